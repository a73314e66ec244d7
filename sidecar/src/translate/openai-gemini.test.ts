import { describe, expect, it } from 'vitest';
import { geminiSseChatStream } from './chat-stream.ts';
import { refusal } from './testdata/refusal.ts';
import { fromGeminiResponse, GeminiChunkTranslator, toGeminiRequest } from './openai-gemini.ts';
import { expectGolden, testdata, testdataJson } from './testdata/golden-file.ts';

function counter(): () => string {
  let n = 0;
  return () => `call_${++n}`;
}

describe('chat completions → Gemini generateContent request', () => {
  it('translates system, images, tool calls and results, JSON schema and generation settings (golden)', () => {
    const out = toGeminiRequest(testdataJson('chat-request-gemini.json'));
    expectGolden('chat-request-gemini.gemini.json', out);
    const config = out.body.generationConfig as Record<string, unknown>;
    expect(config).toMatchObject({ candidateCount: 2, maxOutputTokens: 800, stopSequences: ['END', 'STOP'], thinkingConfig: { thinkingBudget: 1024 } });
    expect(out.body.toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY' } });
    // A tool result that is not a JSON object is wrapped, since functionResponse.response must be one.
    const contents = out.body.contents as { role: string; parts: Record<string, unknown>[] }[];
    expect(contents.map((c) => c.role)).toEqual(['user', 'model', 'user']);
    expect(contents[2]!.parts[0]).toEqual({ functionResponse: { name: 'lookup_quarter', response: { content: 'Revenue 4.2M, up 12% on Q2' } } });
  });

  it('maps a named tool_choice to ANY with allowedFunctionNames, and none to NONE', () => {
    const tools = [{ type: 'function', function: { name: 'f' } }];
    const config = (tool_choice: unknown) => toGeminiRequest({ model: 'g', messages: [{ role: 'user', content: 'x' }], tools, tool_choice }).body.toolConfig;
    expect(config({ type: 'function', function: { name: 'f' } })).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } });
    expect(config('none')).toEqual({ functionCallingConfig: { mode: 'NONE' } });
  });

  it.each([
    [{ parallel_tool_calls: false }, 'parallel_tool_calls'],
    [{ logit_bias: { '50256': -100 } }, 'logit_bias'],
    [{ n: 9 }, 'n'],
    [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
    // A name every object has was once read as a budget, and Gemini got an empty thinkingConfig.
    [{ reasoning_effort: 'constructor' }, 'reasoning_effort'],
    [{ web_search_options: {} }, 'web_search_options'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/chart' } }] }] }, 'messages[0].content[0].image_url.url'],
    [{ messages: [{ role: 'tool', tool_call_id: 'nope', content: 'x' }] }, 'messages[0].tool_call_id'],
  ])('refuses %j with a 400 naming %s', (extra, param) => {
    const error = refusal(() => toGeminiRequest({ model: 'g', messages: [{ role: 'user', content: 'x' }], ...extra }));
    expect(error.param).toBe(param);
    expect(error.statusCode).toBe(400);
  });
});

describe('Gemini response → chat.completion', () => {
  it('gives one choice per candidate, hides thoughts, maps function calls and usage (golden)', () => {
    const out = fromGeminiResponse(testdataJson('gemini-response.json'), { model: 'gemini-2.5-flash', created: 1758190360, newId: counter() });
    expectGolden('gemini-response.chat.json', out);
    expect(out.choices.map((c) => c.finish_reason)).toEqual(['stop', 'tool_calls']);
    // completion tokens = candidates + thoughts; reasoning = thoughts; cached = cachedContentTokenCount
    expect(out.usage).toEqual({
      prompt_tokens: 1540,
      completion_tokens: 96 + 257,
      total_tokens: 1540 + 96 + 257,
      prompt_tokens_details: { cached_tokens: 1024 },
      completion_tokens_details: { reasoning_tokens: 257 },
    });
  });

  it('answers a blocked prompt with a content_filter choice', () => {
    const out = fromGeminiResponse({ promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 8 } }, { model: 'g', created: 0, newId: counter() });
    expect(out.choices).toEqual([{ index: 0, message: { role: 'assistant', content: null, refusal: null }, logprobs: null, finish_reason: 'content_filter' }]);
  });

  it('maps finish reasons', () => {
    const reason = (finishReason: string) =>
      fromGeminiResponse({ candidates: [{ content: { parts: [{ text: 'x' }] }, finishReason }] }, { model: 'g', created: 0, newId: counter() }).choices[0]!.finish_reason;
    expect(['STOP', 'MAX_TOKENS', 'SAFETY', 'RECITATION', 'OTHER'].map(reason)).toEqual(['stop', 'length', 'content_filter', 'content_filter', 'stop']);
  });
});

describe('Gemini stream → chat.completion.chunk SSE', () => {
  const identity = { id: 'chatcmpl-test', created: 1758190360, model: 'gemini-2.5-flash', includeUsage: true };
  // The real service ends SSE lines with CRLF.
  const upstream = Buffer.from(testdata('gemini-stream.sse').replace(/\n/g, '\r\n'));

  it('translates text and a function call with the last cumulative usage (golden)', () => {
    const stream = geminiSseChatStream('alpha', new GeminiChunkTranslator(identity, counter()));
    let out = '';
    for (let i = 0; i < upstream.length; i += 5) out += stream.write(upstream.subarray(i, i + 5));
    out += stream.end();
    expectGolden('gemini-stream.chat.sse', out);
    const usage = JSON.parse(out.trim().split('\n\n').at(-2)!.slice(6)) as { usage: Record<string, unknown> };
    expect(usage.usage).toMatchObject({ prompt_tokens: 1540, completion_tokens: 24 + 257 });
  });

  it('fails a stream that ends before its finishReason', () => {
    const cut = upstream.subarray(0, upstream.indexOf('data: {"candidates": [{"content": {"role": "model","parts": [{"functionCall"'));
    const stream = geminiSseChatStream('alpha', new GeminiChunkTranslator(identity, counter()));
    const out = stream.write(cut) + stream.end();
    expect(out).toContain('"message":"upstream alpha stream failed: stream ended before a finishReason"');
    expect(out).not.toContain('[DONE]');
  });

  it('passes a Google error chunk on as an error event', () => {
    const stream = geminiSseChatStream('alpha', new GeminiChunkTranslator(identity, counter()));
    const out = stream.write(Buffer.from('data: {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}\r\n\r\n')) + stream.end();
    expect(out).toBe('data: {"error":{"message":"upstream alpha stream failed: The model is overloaded.","type":"server_error","param":null,"code":"unavailable"}}\n\n');
  });
});

describe('what the Responses and Messages APIs ask beyond chat (ChatExtensions)', () => {
  const base = { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'x' }] };

  it('sets the thinking budget, and asks for thought summaries only when they are to be shown', () => {
    const config = (budget: number | 'dynamic', summaries: boolean) =>
      toGeminiRequest(base, { reasoning: { budget, effort: null, summaries }, returnReasoning: summaries, singleToolCall: false }).body.generationConfig;
    expect(config(2048, true)).toEqual({ thinkingConfig: { thinkingBudget: 2048, includeThoughts: true } });
    expect(config('dynamic', false)).toEqual({ thinkingConfig: { thinkingBudget: -1 } });
    expect(config(0, true)).toEqual({ thinkingConfig: { thinkingBudget: 0 } });
  });

  it('keeps the thought summary apart from the answer, and one function call when only one is wanted', () => {
    const response = {
      candidates: [
        {
          content: {
            role: 'model',
            parts: [{ text: 'Planning.', thought: true }, { functionCall: { name: 'a', args: {} } }, { functionCall: { name: 'b', args: {} } }],
          },
          finishReason: 'STOP',
        },
      ],
    };
    let id = 0;
    const message = fromGeminiResponse(response, { model: 'm', created: 0, newId: () => `call_${++id}`, reasoning: true, singleToolCall: true }).choices[0]!.message;
    expect(message.thinking).toEqual([{ kind: 'thinking', thinking: 'Planning.', signature: '' }]);
    expect(message.tool_calls!.map((c) => c.function.name)).toEqual(['a']);
    expect(fromGeminiResponse(response, { model: 'm', created: 0, newId: () => 'x' }).choices[0]!.message).not.toHaveProperty('thinking');
  });
});
