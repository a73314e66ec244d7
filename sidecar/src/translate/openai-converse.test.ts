import { describe, expect, it } from 'vitest';
import { converseFrame, exceptionFrame } from '../../../test/fakes/llm-bedrock.ts';
import { converseChatStream } from './chat-stream.ts';
import { ConverseChunkTranslator, fromConverseResponse, toConverseRequest } from './openai-converse.ts';
import { refusal } from './testdata/refusal.ts';

const ROUTE = 'gamma-cloudb';
const user = { role: 'user', content: 'What was Q3 revenue?' };
const weatherTool = {
  type: 'function',
  function: { name: 'lookup_quarter', description: 'Reads a quarter', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
};

const translate = (request: Record<string, unknown>) => toConverseRequest({ model: 'amazon.nova-pro-v1:0', ...request }, { route: ROUTE });

describe('chat completions → Converse request', () => {
  it('translates system, images, tool calls and results, and the inference settings', () => {
    const out = translate({
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look at this.' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
          ],
        },
        { role: 'user', content: 'And this quarter?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'tooluse_1', type: 'function', function: { name: 'lookup_quarter', arguments: '{"q":"Q3"}' } }] },
        { role: 'tool', tool_call_id: 'tooluse_1', content: 'Revenue 4.2M' },
      ],
      tools: [weatherTool],
      tool_choice: 'required',
      max_completion_tokens: 300,
      max_tokens: 999,
      temperature: 0.2,
      top_p: 0.9,
      stop: 'END',
      stream: true,
      stream_options: { include_usage: true },
      user: 'alice',
    });
    expect(out).toEqual({
      stream: true,
      includeUsage: true,
      body: {
        system: [{ text: 'You are terse.' }, { text: 'Answer in French.' }],
        messages: [
          // Two user messages in a row become one turn: Converse wants the roles to alternate.
          { role: 'user', content: [{ text: 'Look at this.' }, { image: { format: 'png', source: { bytes: 'iVBORw0KGgo=' } } }, { text: 'And this quarter?' }] },
          { role: 'assistant', content: [{ toolUse: { toolUseId: 'tooluse_1', name: 'lookup_quarter', input: { q: 'Q3' } } }] },
          { role: 'user', content: [{ toolResult: { toolUseId: 'tooluse_1', content: [{ text: 'Revenue 4.2M' }] } }] },
        ],
        inferenceConfig: { maxTokens: 300, temperature: 0.2, topP: 0.9, stopSequences: ['END'] },
        toolConfig: {
          tools: [{ toolSpec: { name: 'lookup_quarter', description: 'Reads a quarter', inputSchema: { json: { type: 'object', properties: { q: { type: 'string' } } } } } }],
          toolChoice: { any: {} },
        },
      },
    });
  });

  it('sends no inferenceConfig or toolConfig when nothing asks for them, and the model nowhere in the body', () => {
    expect(translate({ messages: [user] })).toEqual({ stream: false, includeUsage: false, body: { messages: [{ role: 'user', content: [{ text: 'What was Q3 revenue?' }] }] } });
  });

  it('maps tool_choice auto and a named function; none leaves the tools out', () => {
    const choice = (tool_choice: unknown) =>
      (translate({ messages: [user], tools: [weatherTool], tool_choice }).body.toolConfig as { toolChoice?: unknown } | undefined)?.toolChoice;
    expect(choice('auto')).toEqual({ auto: {} });
    expect(choice({ type: 'function', function: { name: 'lookup_quarter' } })).toEqual({ tool: { name: 'lookup_quarter' } });
    expect(translate({ messages: [user], tools: [weatherTool], tool_choice: 'none' }).body).not.toHaveProperty('toolConfig');
  });

  const toolHistory = [
    user,
    { role: 'assistant', tool_calls: [{ id: 't1', type: 'function', function: { name: 'lookup_quarter', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 't1', content: '4.2M' },
  ];

  it.each([
    [{ n: 2 }, 'n'],
    [{ seed: 7 }, 'seed'],
    [{ response_format: { type: 'json_object' } }, 'response_format'],
    [{ parallel_tool_calls: false, tools: [weatherTool] }, 'parallel_tool_calls'],
    [{ frequency_penalty: 0.5 }, 'frequency_penalty'],
    [{ reasoning_effort: 'low' }, 'reasoning_effort'],
    [{ temperature: 1.5 }, 'temperature'],
    [{ logprobs: true }, 'logprobs'],
    [{ temprature: 0.3 }, 'temprature'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/chart.png' } }] }] }, 'messages[0].content[0].image_url.url'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/heic;base64,AAAA' } }] }] }, 'messages[0].content[0].image_url.url'],
    [{ messages: toolHistory }, 'tools'],
    [{ messages: toolHistory, tools: [weatherTool], tool_choice: 'none' }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
  ])('refuses %j with a 400 naming %s, before anything is sent', (extra, param) => {
    const error = refusal(() => translate({ messages: [user], ...extra }));
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(param);
  });

  it('accepts the parameters Converse cannot take at the value that changes nothing', () => {
    expect(() => translate({ messages: [user], n: 1, seed: null, response_format: { type: 'text' }, parallel_tool_calls: true, presence_penalty: 0, store: false })).not.toThrow();
  });

  it('refuses thinking a Responses or Messages caller asked for, naming reasoning', () => {
    const extensions = { reasoning: { budget: 1024, effort: 'low' as const, summaries: false }, returnReasoning: false, singleToolCall: false };
    const error = refusal(() => toConverseRequest({ model: 'm', messages: [user] }, { route: ROUTE, extensions }));
    expect(error.param).toBe('reasoning');
  });
});

describe('Converse response → chat.completion', () => {
  const ctx = { model: 'amazon.nova-pro-v1:0', created: 1764381600, id: 'chatcmpl-req-1' };

  it('joins the text, maps tool calls, the stop reason and the usage', () => {
    const out = fromConverseResponse(
      {
        output: {
          message: {
            role: 'assistant',
            content: [{ text: 'Let me check ' }, { text: 'that.' }, { toolUse: { toolUseId: 'tooluse_a', name: 'lookup_quarter', input: { q: 'Q3' } } }],
          },
        },
        stopReason: 'tool_use',
        usage: { inputTokens: 1200, outputTokens: 80, totalTokens: 1780, cacheReadInputTokens: 500 },
        metrics: { latencyMs: 412 },
      },
      ctx,
    );
    expect(out).toEqual({
      id: 'chatcmpl-req-1',
      object: 'chat.completion',
      created: 1764381600,
      model: 'amazon.nova-pro-v1:0',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'Let me check that.',
            refusal: null,
            tool_calls: [{ id: 'tooluse_a', type: 'function', function: { name: 'lookup_quarter', arguments: '{"q":"Q3"}' } }],
          },
          logprobs: null,
          finish_reason: 'tool_calls',
        },
      ],
      // Converse's inputTokens leaves the 500 cache reads out: 1200 + 500 prompt tokens, 500 of them cached.
      usage: { prompt_tokens: 1700, completion_tokens: 80, total_tokens: 1780, prompt_tokens_details: { cached_tokens: 500 }, completion_tokens_details: { reasoning_tokens: 0 } },
      system_fingerprint: null,
    });
  });

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['model_context_window_exceeded', 'length'],
    ['guardrail_intervened', 'content_filter'],
    ['content_filtered', 'content_filter'],
  ])('stopReason %s is finish_reason %s', (stopReason, finish) => {
    const out = fromConverseResponse({ output: { message: { role: 'assistant', content: [{ text: 'x' }] } }, stopReason }, ctx);
    expect(out.choices[0]!.finish_reason).toBe(finish);
  });

  it('keeps only the first tool call when the caller asked for at most one', () => {
    const content = [{ toolUse: { toolUseId: 'a', name: 'f', input: {} } }, { toolUse: { toolUseId: 'b', name: 'g', input: {} } }];
    const out = fromConverseResponse({ output: { message: { role: 'assistant', content } }, stopReason: 'tool_use' }, { ...ctx, singleToolCall: true });
    expect(out.choices[0]!.message).toEqual({
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }],
    });
  });
});

/** The SSE a caller reads for these ConverseStream frames, as parsed `data:` payloads. */
function streamed(frames: Buffer[], includeUsage: boolean, cut?: string): unknown[] {
  const stream = converseChatStream(ROUTE, new ConverseChunkTranslator({ id: 'chatcmpl-1', created: 1764381600, model: 'amazon.nova-lite-v1:0', includeUsage }));
  // Every byte on its own: frames split anywhere must decode the same.
  let out = '';
  for (const byte of Buffer.concat(frames)) out += stream.write(Buffer.from([byte]));
  out += stream.end(cut);
  return out
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => {
      const data = event.slice('data: '.length);
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown);
    });
}

const metadata = converseFrame('metadata', { usage: { inputTokens: 40, outputTokens: 12, totalTokens: 52 }, metrics: { latencyMs: 300 } });
const delta = (d: Record<string, unknown>, withUsage = false) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1764381600,
  model: 'amazon.nova-lite-v1:0',
  system_fingerprint: null,
  choices: [{ index: 0, delta: d, logprobs: null, finish_reason: null }],
  ...(withUsage ? { usage: null } : {}),
});

describe('ConverseStream → chat chunks', () => {
  it('streams text deltas, the finish reason, the usage chunk and [DONE]', () => {
    const events = streamed(
      [
        converseFrame('messageStart', { role: 'assistant', p: 'abc' }),
        converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Bon' } }),
        converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'jour' } }),
        converseFrame('contentBlockStop', { contentBlockIndex: 0 }),
        converseFrame('messageStop', { stopReason: 'end_turn' }),
        metadata,
      ],
      true,
    );
    expect(events).toEqual([
      delta({ role: 'assistant', content: '' }, true),
      delta({ content: 'Bon' }, true),
      delta({ content: 'jour' }, true),
      { ...delta({}, true), choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] },
      {
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1764381600,
        model: 'amazon.nova-lite-v1:0',
        system_fingerprint: null,
        choices: [],
        usage: { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
      },
      '[DONE]',
    ]);
  });

  it('streams a tool call: id and name at its block start, then its input in pieces; no usage chunk unless asked', () => {
    const events = streamed(
      [
        converseFrame('messageStart', { role: 'assistant' }),
        converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Checking.' } }),
        converseFrame('contentBlockStop', { contentBlockIndex: 0 }),
        converseFrame('contentBlockStart', { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tooluse_x', name: 'lookup_quarter' } } }),
        converseFrame('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '{"q":' } } }),
        converseFrame('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '"Q3"}' } } }),
        converseFrame('contentBlockStop', { contentBlockIndex: 1 }),
        converseFrame('contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tooluse_y', name: 'now' } } }),
        converseFrame('contentBlockStop', { contentBlockIndex: 2 }),
        converseFrame('messageStop', { stopReason: 'tool_use' }),
        metadata,
      ],
      false,
    );
    expect(events).toEqual([
      delta({ role: 'assistant', content: '' }),
      delta({ content: 'Checking.' }),
      delta({ tool_calls: [{ index: 0, id: 'tooluse_x', type: 'function', function: { name: 'lookup_quarter', arguments: '' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: '"Q3"}' } }] }),
      delta({ tool_calls: [{ index: 1, id: 'tooluse_y', type: 'function', function: { name: 'now', arguments: '' } }] }),
      // A tool called without input streams none: the caller still gets arguments it can parse.
      delta({ tool_calls: [{ index: 1, function: { arguments: '{}' } }] }),
      { ...delta({}), choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'tool_calls' }] },
      '[DONE]',
    ]);
  });

  it('ends with an error event and no [DONE] when the stream stops before its metadata', () => {
    const events = streamed([converseFrame('messageStart', { role: 'assistant' }), converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Half' } })], true);
    expect(events.at(-1)).toEqual({ error: expect.objectContaining({ message: expect.stringContaining('stream ended before the metadata event') }) });
    expect(events).not.toContain('[DONE]');
  });

  it("passes on Bedrock's in-stream exception as the caller's error event", () => {
    const events = streamed(
      [
        converseFrame('messageStart', { role: 'assistant' }),
        exceptionFrame('modelStreamErrorException', 'The model encountered an error while streaming.'),
        converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'never seen' } }),
      ],
      false,
    );
    expect(events).toHaveLength(2);
    expect(events[1]).toEqual({
      error: expect.objectContaining({
        message: expect.stringContaining('modelStreamErrorException: The model encountered an error while streaming.'),
        code: 'bedrock_stream_error',
      }),
    });
  });
});
