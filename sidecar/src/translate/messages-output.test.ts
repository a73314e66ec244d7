import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors.ts';
import { geminiSseChatStream, openAiSseChatStream } from './chat-stream.ts';
import { messageFromCompletion, MessagesStreamEncoder } from './messages-output.ts';
import { OpenAiChunkReader } from './openai-chunks.ts';
import { GeminiChunkTranslator } from './openai-gemini.ts';
import { testdata } from './testdata/golden-file.ts';
import { sseEvents } from './testdata/sse-events.ts';

const identity = { id: 'chatcmpl-test', created: 1758190360, model: 'gemini-2.5-flash', includeUsage: true };

function feed(translator: { write(chunk: Buffer): string; end(): string }, text: string): string {
  const bytes = Buffer.from(text);
  let out = '';
  for (let i = 0; i < bytes.length; i += 29) out += translator.write(bytes.subarray(i, i + 29));
  return out + translator.end();
}

describe('chat chunks → the Messages event stream', () => {
  it("turns Gemini's text and function call into content blocks, usage and stop reason in message_delta", () => {
    const out = feed(
      geminiSseChatStream('alpha', new GeminiChunkTranslator(identity, () => 'call_1'), new MessagesStreamEncoder('msg_test', 'gemini-2.5-flash')),
      testdata('gemini-stream.sse'),
    );
    const events = sseEvents(out);
    events.forEach((e) => expect(e.data.type).toBe(e.event));
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[0]!.data.message).toMatchObject({ id: 'msg_test', type: 'message', role: 'assistant', model: 'gemini-2.5-flash', content: [] });
    expect(events[5]!.data).toEqual({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'call_1', name: 'lookup_quarter', input: {} } });
    expect(events[6]!.data).toEqual({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"quarter":"Q2","year":2025}' } });
    // Gemini's 1540 prompt tokens hold 1024 cache reads; 24 + 257 thoughts out
    expect(events[8]!.data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { input_tokens: 516, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024, output_tokens: 281 },
    });
  });

  it("writes thinking as a thinking block, and a runtime's stream without [DONE] as an error event", () => {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'qwen3', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const stream = chunk({ role: 'assistant', reasoning: 'Think first.' }) + chunk({ content: 'Done.' }) + chunk({}, 'stop');
    const whole = sseEvents(feed(openAiSseChatStream('local', new OpenAiChunkReader(true), new MessagesStreamEncoder('msg_1', 'qwen3')), `${stream}data: [DONE]\n\n`));
    expect(whole.filter((e) => e.event === 'content_block_start').map((e) => e.data.content_block)).toEqual([
      { type: 'thinking', thinking: '', signature: '' },
      { type: 'text', text: '' },
    ]);
    expect(whole[2]!.data.delta).toEqual({ type: 'thinking_delta', thinking: 'Think first.' });
    const cut = sseEvents(feed(openAiSseChatStream('local', new OpenAiChunkReader(true), new MessagesStreamEncoder('msg_1', 'qwen3')), stream));
    expect(cut.at(-1)).toEqual({
      event: 'error',
      data: { type: 'error', error: { type: 'api_error', message: 'upstream local stream failed: stream ended before data: [DONE]' } },
    });
  });

  it('fails the stream instead of the process when a chunk is not what the encoder expects', () => {
    const broken = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', function: null }] } }] })}\n\ndata: [DONE]\n\n`;
    const events = sseEvents(feed(openAiSseChatStream('local', new OpenAiChunkReader(false), new MessagesStreamEncoder('msg_1', 'm')), broken));
    expect(events.at(-1)!.event).toBe('error');
    expect(String((events.at(-1)!.data.error as { message: string }).message)).toContain('could not be translated');
  });
});

describe('a chat completion → a Messages message', () => {
  const completion = (message: Record<string, unknown>, finish: string) =>
    ({
      id: 'c',
      object: 'chat.completion',
      created: 0,
      model: 'gpt-5',
      choices: [{ index: 0, message: { role: 'assistant', refusal: null, ...message }, logprobs: null, finish_reason: finish }],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120, prompt_tokens_details: { cached_tokens: 40 }, completion_tokens_details: { reasoning_tokens: 5 } },
      system_fingerprint: null,
    }) as never;

  it('has the text, the tool calls as tool_use blocks, the stop reason and the usage split as Anthropic splits it', () => {
    const message = messageFromCompletion(
      completion({ content: 'Checking.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, 'tool_calls'),
      'msg_1',
    );
    expect(message).toEqual({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'gpt-5',
      content: [
        { type: 'text', text: 'Checking.' },
        { type: 'tool_use', id: 'call_1', name: 'f', input: { a: 1 } },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 60, cache_creation_input_tokens: 0, cache_read_input_tokens: 40, output_tokens: 20 },
    });
    expect(messageFromCompletion(completion({ content: 'Cut' }, 'length'), 'msg_2').stop_reason).toBe('max_tokens');
  });

  it('refuses arguments a tool_use block cannot carry, rather than invent them', () => {
    const bad = completion({ content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }, 'tool_calls');
    expect(() => messageFromCompletion(bad, 'msg_1')).toThrow(ProxyError);
  });
});
