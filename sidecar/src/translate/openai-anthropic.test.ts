import { EventStreamCodec } from '@smithy/eventstream-codec';
import { describe, expect, it } from 'vitest';
import { anthropicSseChatStream, bedrockChatStream } from './chat-stream.ts';
import { AnthropicChunkTranslator, DEFAULT_ANTHROPIC_MAX_TOKENS, fromAnthropicMessage, toAnthropicRequest } from './openai-anthropic.ts';
import { refusal } from './testdata/refusal.ts';
import { expectGolden, testdata, testdataJson } from './testdata/golden-file.ts';

const identity = { id: 'chatcmpl-test', created: 1758190360, model: 'claude-sonnet-4-20250514', includeUsage: true };
const direct = { imageUrls: true, route: 'gamma-direct' };

describe('chat completions → Anthropic Messages request', () => {
  it('translates a multi-turn agent conversation (golden)', () => {
    const out = toAnthropicRequest(testdataJson('chat-request-agent.json'), direct);
    expectGolden('chat-request-agent.anthropic.json', out);
    // The points a reader checks first, spelled out:
    expect(out.body.max_tokens).toBe(512); // max_completion_tokens wins over max_tokens
    expect(out.body.stop_sequences).toEqual(['\n\nHuman:']);
    expect(out.body.tool_choice).toEqual({ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true });
    const turns = out.body.messages as { role: string; content: { type: string }[] }[];
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'user']);
    // Both tool results and the following user text share one user turn, results first.
    expect(turns[2]!.content.map((b) => b.type)).toEqual(['tool_result', 'tool_result', 'text']);
    expect(out).toMatchObject({ stream: true, includeUsage: true, jsonMode: false });
  });

  it('defaults max_tokens, which Anthropic requires', () => {
    const out = toAnthropicRequest({ model: 'claude-sonnet-4', messages: [{ role: 'user', content: 'Hi' }] }, direct);
    expect(out.body).toEqual({ max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] });
  });

  it('maps tool_choice values and parallel_tool_calls', () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
    const choice = (tool_choice: unknown, extra: Record<string, unknown> = {}) =>
      toAnthropicRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools, tool_choice, ...extra }, direct).body.tool_choice;
    expect(choice('auto')).toEqual({ type: 'auto' });
    expect(choice('required')).toEqual({ type: 'any' });
    expect(choice('none')).toEqual({ type: 'none' });
    expect(choice(undefined, { parallel_tool_calls: false })).toEqual({ type: 'auto', disable_parallel_tool_use: true });
  });

  it('turns response_format json into a forced tool', () => {
    const out = toAnthropicRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' } }, direct);
    expect(out.jsonMode).toBe(true);
    expect(out.body.tools).toEqual([{ name: 'json_response', description: 'Respond with a JSON object.', input_schema: { type: 'object' } }]);
    expect(out.body.tool_choice).toEqual({ type: 'tool', name: 'json_response' });
  });

  it.each([
    [{ n: 3 }, 'n'],
    [{ seed: 7 }, 'seed'],
    [{ frequency_penalty: 0.5 }, 'frequency_penalty'],
    [{ logprobs: true }, 'logprobs'],
    [{ reasoning_effort: 'high' }, 'reasoning_effort'],
    [{ temperature: 1.5 }, 'temperature'],
    [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio'],
    [{ store: true }, 'store'],
    [{ functions: [] }, 'functions'],
    [{ made_up_option: 1 }, 'made_up_option'],
    [{ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }] }] }, 'messages[0].content[0].type'],
    [{ messages: [{ role: 'function', name: 'f', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' }, tools: [{ type: 'function', function: { name: 'f' } }] }, 'response_format'],
  ])('refuses %j with a 400 naming %s', (extra, param) => {
    const error = refusal(() => toAnthropicRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], ...extra }, direct));
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(param);
    expect(error.toJSON().error).toMatchObject({ param, type: 'invalid_request_error' });
  });

  it('accepts parameters set to the value that changes nothing', () => {
    const body = toAnthropicRequest(
      {
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        n: 1,
        logprobs: false,
        frequency_penalty: 0,
        presence_penalty: 0,
        store: false,
        service_tier: 'auto',
        modalities: ['text'],
      },
      direct,
    ).body;
    expect(Object.keys(body).sort()).toEqual(['max_tokens', 'messages']);
  });

  it('takes images by URL only where the route accepts them', () => {
    const request = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.jpg' } }] }] };
    expect((toAnthropicRequest(request, direct).body.messages as { content: unknown[] }[])[0]!.content[0]).toEqual({
      type: 'image',
      source: { type: 'url', url: 'https://example.com/a.jpg' },
    });
    expect(refusal(() => toAnthropicRequest(request, { imageUrls: false, route: 'gamma' })).param).toBe('messages[0].content[0].image_url.url');
  });
});

describe('Anthropic Messages response → chat.completion', () => {
  it('translates text, tool calls, stop reason and usage with cache counts (golden)', () => {
    const out = fromAnthropicMessage(testdataJson('anthropic-message.json'), { model: 'claude-sonnet-4', jsonMode: false, created: identity.created });
    expectGolden('anthropic-message.chat.json', out);
    expect(out.choices[0]!.finish_reason).toBe('tool_calls');
    // prompt tokens count cache reads and writes; cached tokens are the reads
    expect(out.usage).toMatchObject({ prompt_tokens: 412 + 1024 + 2048, completion_tokens: 131, prompt_tokens_details: { cached_tokens: 2048 } });
  });

  it('maps stop reasons', () => {
    const reason = (stop_reason: string, jsonMode = false) => fromAnthropicMessage({ content: [], stop_reason }, { model: 'm', jsonMode, created: 0 }).choices[0]!.finish_reason;
    expect([reason('end_turn'), reason('stop_sequence'), reason('max_tokens'), reason('tool_use'), reason('refusal'), reason('tool_use', true)]).toEqual([
      'stop',
      'stop',
      'length',
      'tool_calls',
      'content_filter',
      'stop',
    ]);
  });
});

function sseStream(route: string, includeUsage: boolean) {
  return anthropicSseChatStream(route, new AnthropicChunkTranslator({ ...identity, includeUsage }, false));
}

describe('Anthropic stream → chat.completion.chunk SSE', () => {
  const upstream = Buffer.from(testdata('anthropic-stream.sse'));

  it('translates a text-then-tool-call stream (golden), whatever the read boundaries', () => {
    const whole = sseStream('gamma-direct', true);
    const out = whole.write(upstream) + whole.end();
    expectGolden('anthropic-stream.chat.sse', out);
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);

    // One byte at a time gives the same bytes out.
    const bytewise = sseStream('gamma-direct', true);
    let pieces = '';
    for (let i = 0; i < upstream.length; i++) pieces += bytewise.write(upstream.subarray(i, i + 1));
    expect(pieces + bytewise.end()).toBe(out);
  });

  it('sends no usage chunk and no usage fields when the caller did not ask', () => {
    const stream = sseStream('gamma-direct', false);
    const out = stream.write(upstream) + stream.end();
    expect(out).not.toContain('"usage"');
    expect(out).toContain('"finish_reason":"tool_calls"');
  });

  it("reads the same events from Bedrock's event stream and gives the same chunks", () => {
    const codec = new EventStreamCodec(
      (bytes) => Buffer.from(bytes).toString('utf8'),
      (text) => Buffer.from(text, 'utf8'),
    );
    const frames = testdata('anthropic-stream.sse')
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) =>
        Buffer.from(
          codec.encode({
            headers: { ':event-type': { type: 'string', value: 'chunk' }, ':message-type': { type: 'string', value: 'event' } },
            body: Buffer.from(JSON.stringify({ bytes: Buffer.from(line.slice(6)).toString('base64'), p: 'abcd' })),
          }),
        ),
      );
    const stream = bedrockChatStream('gamma-cloudb', new AnthropicChunkTranslator(identity, false));
    const out = Buffer.concat(frames).reduce((acc, _b, i, all) => (i % 7 === 0 ? acc + stream.write(all.subarray(i, i + 7)) : acc), '') + stream.end();
    const sse = sseStream('gamma-direct', true);
    expect(out).toBe(sse.write(upstream) + sse.end());
  });

  it('ends a stream cut before message_stop with an error event and no [DONE]', () => {
    const cut = upstream.subarray(0, upstream.indexOf('event: message_delta'));
    const stream = sseStream('gamma', true);
    const out = stream.write(cut) + stream.end();
    expect(out).not.toContain('[DONE]');
    const last = out.trim().split('\n\n').at(-1)!;
    expect(JSON.parse(last.slice(6))).toEqual({
      error: { message: 'upstream gamma stream failed: stream ended before message_stop', type: 'server_error', param: null, code: 'upstream_stream_error' },
    });
    expect(stream.failure).toBe('stream ended before message_stop');
  });

  it('turns an Anthropic error event into an error event', () => {
    const stream = sseStream('gamma-direct', false);
    const out =
      stream.write(upstream.subarray(0, upstream.indexOf('event: content_block_stop'))) +
      stream.write(Buffer.from('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')) +
      stream.end();
    expect(out).toContain('data: {"error":{"message":"upstream gamma-direct stream failed: Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}');
    expect(out).not.toContain('[DONE]');
  });
});

describe('Anthropic tool calls without arguments', () => {
  it('sends `{}` as the arguments of a tool call that streamed none', () => {
    const events = [
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"claude-haiku-4-5","usage":{"input_tokens":10,"output_tokens":1}}}',
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_time","input":{}}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}',
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}',
      'event: message_stop\ndata: {"type":"message_stop"}',
    ];
    const stream = sseStream('gamma-direct', false);
    const out = stream.write(Buffer.from(events.join('\n\n') + '\n\n')) + stream.end();
    const args = out
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .flatMap((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { tool_calls?: { function: { arguments?: string } }[] } }[] }).choices)
      .flatMap((c) => c.delta.tool_calls ?? [])
      .map((t) => t.function.arguments ?? '')
      .join('');
    expect(JSON.parse(args)).toEqual({});
  });
});

describe('Anthropic JSON mode, streamed', () => {
  it("streams the forced json_response tool's input as content and finishes with stop", () => {
    const events = [
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_2","model":"claude-sonnet-4-20250514","usage":{"input_tokens":30,"output_tokens":1}}}',
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_2","name":"json_response","input":{}}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"answer\\": "}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"42}"}}',
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}',
      'event: message_stop\ndata: {"type":"message_stop"}',
    ];
    const stream = anthropicSseChatStream('gamma-direct', new AnthropicChunkTranslator({ ...identity, includeUsage: false }, true));
    const out = stream.write(Buffer.from(events.join('\n\n') + '\n\n')) + stream.end();
    const choices = out
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .flatMap((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { content?: string; tool_calls?: unknown }; finish_reason: string | null }[] }).choices);
    expect(JSON.parse(choices.map((c) => c.delta.content ?? '').join(''))).toEqual({ answer: 42 });
    expect(choices.some((c) => c.delta.tool_calls)).toBe(false);
    expect(choices.at(-1)!.finish_reason).toBe('stop');
  });
});

describe('what the Responses API asks beyond chat (ChatExtensions)', () => {
  const base = { model: 'm', messages: [{ role: 'user', content: 'x' }] };
  const reasoning = (budget: number) => ({ reasoning: { budget, effort: null, summaries: true }, returnReasoning: true, singleToolCall: false });

  it('thinks with the budget, leaving room for the answer under a default max_tokens', () => {
    const out = toAnthropicRequest(base, { ...direct, extensions: reasoning(8192) }).body;
    expect(out).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 8192 }, max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS + 8192 });
    // A caller's limit counts the thinking: the budget shrinks to fit below it, down to Anthropic's 1024.
    expect(toAnthropicRequest({ ...base, max_completion_tokens: 3000 }, { ...direct, extensions: reasoning(8192) }).body.thinking).toEqual({
      type: 'enabled',
      budget_tokens: 2999,
    });
    expect(refusal(() => toAnthropicRequest({ ...base, max_completion_tokens: 1000 }, { ...direct, extensions: reasoning(8192) })).param).toBe('max_output_tokens');
    expect(refusal(() => toAnthropicRequest({ ...base, response_format: { type: 'json_object' } }, { ...direct, extensions: reasoning(1024) })).param).toBe('reasoning');
    expect(toAnthropicRequest(base, { ...direct, extensions: reasoning(0) }).body.thinking).toBeUndefined();
  });

  it('sends signed thinking back first in its assistant turn, only while thinking', () => {
    const request = {
      model: 'm',
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'ok' },
      ],
    };
    const thinking = new Map([
      [
        1,
        [
          { kind: 'thinking' as const, thinking: 'plan', signature: 'sig' },
          { kind: 'redacted' as const, data: 'opaque' },
        ],
      ],
    ]);
    const turns = (budget: number) =>
      toAnthropicRequest(request, { ...direct, extensions: { ...reasoning(budget), thinking } }).body.messages as { role: string; content: Record<string, unknown>[] }[];
    expect(turns(1024)[1]!.content).toEqual([
      { type: 'thinking', thinking: 'plan', signature: 'sig' },
      { type: 'redacted_thinking', data: 'opaque' },
      { type: 'tool_use', id: 't1', name: 'f', input: {} },
    ]);
    expect(turns(0)[1]!.content.map((b) => b.type)).toEqual(['tool_use']);
  });

  it('tells Claude to make at most one call', () => {
    const tools = [{ type: 'function', function: { name: 'f' } }];
    const out = toAnthropicRequest({ ...base, tools }, { ...direct, extensions: { returnReasoning: false, singleToolCall: true } }).body;
    expect(out.tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
  });

  it('returns thinking, whole and streamed, only when asked', () => {
    const message = {
      content: [
        { type: 'thinking', thinking: 'plan', signature: 'sig' },
        { type: 'text', text: 'Hi' },
      ],
      stop_reason: 'end_turn',
    };
    expect(fromAnthropicMessage(message, { model: 'm', jsonMode: false, created: 0, reasoning: true }).choices[0]!.message.thinking).toEqual([
      { kind: 'thinking', thinking: 'plan', signature: 'sig' },
    ]);
    expect(fromAnthropicMessage(message, { model: 'm', jsonMode: false, created: 0 }).choices[0]!.message.thinking).toBeUndefined();
  });
});
