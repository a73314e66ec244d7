import { describe, expect, it } from 'vitest';
import { anthropicSseChatStream, geminiSseChatStream } from './chat-stream.ts';
import { AnthropicChunkTranslator } from './openai-anthropic.ts';
import { GeminiChunkTranslator } from './openai-gemini.ts';
import { responseEcho } from './responses-output.ts';
import type { ResponseItem } from './responses-request.ts';
import { ResponsesStreamEncoder } from './responses-stream.ts';
import { testdata } from './testdata/golden-file.ts';
import { sseEvents } from './testdata/sse-events.ts';

const identity = { id: 'chatcmpl-test', created: 1758190360, model: 'claude-sonnet-4-20250514', includeUsage: true };

function encoder(overrides: Partial<ConstructorParameters<typeof ResponsesStreamEncoder>[0]> = {}) {
  let counter = 0;
  const done: { response?: Record<string, unknown>; stored?: ResponseItem[] } = {};
  const encoder = new ResponsesStreamEncoder({
    head: { id: 'resp_test', createdAt: 1758190360, echo: responseEcho({ store: true }) },
    model: 'claude-sonnet-4',
    newId: (prefix) => `${prefix}${++counter}`,
    summaries: true,
    encrypted: false,
    maxOutputChars: 1 << 20,
    onDone: (response, stored) => Object.assign(done, { response, stored }),
    ...overrides,
  });
  return { encoder, done };
}

/** The upstream bytes fed in small pieces, as a network delivers them. */
function feed(translator: { write(chunk: Buffer): string; end(): string }, text: string, piece = 37): string {
  const bytes = Buffer.from(text);
  let out = '';
  for (let i = 0; i < bytes.length; i += piece) out += translator.write(bytes.subarray(i, i + piece));
  return out + translator.end();
}

/** Every event carries its own type and a sequence number one past the last. */
function expectWellFormed(events: ReturnType<typeof sseEvents>): void {
  events.forEach((e, i) => {
    expect(e.data.type).toBe(e.event);
    expect(e.data.sequence_number).toBe(i);
  });
}

describe('chat chunks → the Responses event stream', () => {
  it("turns Claude's text and tool call into the Responses events, usage in response.completed", () => {
    const { encoder: responses, done } = encoder();
    const events = sseEvents(feed(anthropicSseChatStream('gamma-direct', new AnthropicChunkTranslator(identity, false), responses), testdata('anthropic-stream.sse')));
    expectWellFormed(events);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[6]!.data).toMatchObject({ item_id: 'msg_1', output_index: 0, text: 'Let me look up the weather.' });
    expect(events[12]!.data).toMatchObject({ item_id: 'fc_2', output_index: 1, name: 'get_weather', arguments: '{"city": "Paris"}' });
    const response = events.at(-1)!.data.response as Record<string, unknown>;
    expect(response).toMatchObject({
      id: 'resp_test',
      object: 'response',
      status: 'completed',
      model: 'claude-sonnet-4-20250514',
      store: true,
      output: [
        { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look up the weather.' }] },
        { id: 'fc_2', type: 'function_call', status: 'completed', call_id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather', arguments: '{"city": "Paris"}' },
      ],
      // Anthropic's 472 uncached + 1800 cache reads; 89 out
      usage: { input_tokens: 2272, input_tokens_details: { cached_tokens: 1800 }, output_tokens: 89, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 2361 },
    });
    expect(done.response).toEqual(response);
    expect(done.stored).toEqual(response.output);
  });

  it("shows Claude's thinking as a reasoning summary and keeps it signed for the store", () => {
    const stream = [
      { type: 'message_start', message: { id: 'msg_1', model: 'claude-sonnet-4-20250514', usage: { input_tokens: 10, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Short answer.' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'U0lH' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Hi.' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'message_delta', delta: { stop_reason: 'max_tokens' }, usage: { output_tokens: 30 } },
      { type: 'message_stop' },
    ]
      .map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
      .join('');
    const { encoder: responses, done } = encoder({ encrypted: true });
    const events = sseEvents(feed(anthropicSseChatStream('gamma-direct', new AnthropicChunkTranslator(identity, false, true), responses), stream, 11));
    expectWellFormed(events);
    expect(events.map((e) => e.event).slice(2, 9)).toEqual([
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
    ]);
    const response = events.at(-1)!;
    expect(response.event).toBe('response.incomplete');
    expect(response.data.response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    const reasoning = (response.data.response as { output: ResponseItem[] }).output[0]!;
    expect(reasoning).toMatchObject({
      type: 'reasoning',
      summary: [{ type: 'summary_text', text: 'Short answer.' }],
      encrypted_content: expect.stringMatching(/^tollgate\.thinking\.v1\./),
    });
    expect(done.stored![0]).toEqual(reasoning);
  });

  it("writes Gemini's stream, and fails with response.failed and an error event when it ends early", () => {
    const gemini = { ...identity, model: 'gemini-2.5-flash' };
    const { encoder: whole } = encoder();
    const events = sseEvents(feed(geminiSseChatStream('alpha', new GeminiChunkTranslator(gemini, () => 'call_1'), whole), testdata('gemini-stream.sse')));
    expect(events.at(-1)!.data.response).toMatchObject({
      status: 'completed',
      output: [{ type: 'message' }, { type: 'function_call', call_id: 'call_1', name: 'lookup_quarter' }],
    });

    const { encoder: cut, done } = encoder();
    const text = testdata('gemini-stream.sse');
    const partial = sseEvents(
      feed(geminiSseChatStream('alpha', new GeminiChunkTranslator(gemini, () => 'call_1'), cut), text.slice(0, text.lastIndexOf('data:', text.indexOf('functionCall')))),
    );
    expect(partial.slice(-2).map((e) => e.event)).toEqual(['response.failed', 'error']);
    expect(partial.at(-1)!.data).toMatchObject({ message: 'upstream alpha stream failed: stream ended before a finishReason' });
    expect(done.response).toBeUndefined(); // nothing is stored from a failed stream
  });

  it('fails the stream rather than hold an answer past its bound', () => {
    const { encoder: small } = encoder({ maxOutputChars: 10 });
    const events = sseEvents(feed(anthropicSseChatStream('gamma-direct', new AnthropicChunkTranslator(identity, false), small), testdata('anthropic-stream.sse')));
    expect(events.at(-1)!.event).toBe('error');
    expect(String(events.at(-1)!.data.message)).toContain('exceeds 10 characters');
  });
});
