import { describe, expect, it } from 'vitest';
import { BedrockMessagesStream } from './bedrock-messages.ts';
import { sseEvents } from './testdata/sse-events.ts';
import { chunkFrame as chunk, exceptionFrame as exception } from '../../../test/fakes/llm-bedrock.ts';

const EVENTS = [
  {
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-20250514', content: [], usage: { input_tokens: 9, output_tokens: 1 } },
  },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } },
  { type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 9, outputTokenCount: 3 } },
];

describe("Bedrock's event stream → the Messages API's SSE", () => {
  it('re-frames each event as it arrives, byte for byte, whatever the reads split', () => {
    const bytes = Buffer.concat(EVENTS.map(chunk));
    const stream = new BedrockMessagesStream('gamma-cloudb');
    let out = '';
    for (let i = 0; i < bytes.length; i += 13) out += stream.write(bytes.subarray(i, i + 13));
    out += stream.end();
    expect(sseEvents(out)).toEqual(EVENTS.map((event) => ({ event: event.type, data: event })));
    expect(stream.failure).toBeUndefined();
  });

  it('ends with one Anthropic error event on an exception frame, or a stream cut before message_stop', () => {
    const failed = new BedrockMessagesStream('gamma-cloudb');
    const out = failed.write(Buffer.concat([chunk(EVENTS[0]!), exception('modelStreamErrorException', 'The model failed.'), chunk(EVENTS[1]!)])) + failed.end();
    const events = sseEvents(out);
    expect(events.map((e) => e.event)).toEqual(['message_start', 'error']);
    expect(events[1]!.data).toEqual({ type: 'error', error: { type: 'api_error', message: 'upstream gamma-cloudb stream failed: modelStreamErrorException: The model failed.' } });

    const cut = new BedrockMessagesStream('gamma-cloudb');
    const partial = sseEvents(cut.write(Buffer.concat(EVENTS.slice(0, 3).map(chunk))) + cut.end());
    expect(partial.at(-1)!.data).toMatchObject({ error: { message: 'upstream gamma-cloudb stream failed: stream ended before message_stop' } });
  });
});
