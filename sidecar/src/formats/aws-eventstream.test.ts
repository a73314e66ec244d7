import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec';
import { describe, expect, it } from 'vitest';
import { AwsEventStreamDecoder } from './aws-eventstream.ts';
import { BedrockStreamDecoder } from './bedrock-stream.ts';

// Frames are built with the same codec AWS SDKs use, so they are byte-for-byte what Bedrock sends.
const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => Buffer.from(text, 'utf8'),
);

function frame(headers: MessageHeaders, body: string): Buffer {
  return Buffer.from(codec.encode({ headers, body: Buffer.from(body, 'utf8') }));
}

function chunkFrame(event: object, padding = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456'): Buffer {
  const bytes = Buffer.from(JSON.stringify(event)).toString('base64');
  return frame(
    {
      ':event-type': { type: 'string', value: 'chunk' },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    JSON.stringify({ bytes, p: padding.slice(0, 1 + (bytes.length % padding.length)) }),
  );
}

const BEDROCK_EVENTS = [
  {
    type: 'message_start',
    message: {
      id: 'msg_bdrk_01',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-20250514',
      content: [],
      stop_reason: null,
      usage: { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
    },
  },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ', wörld 🌍' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 12 } },
  {
    type: 'message_stop',
    'amazon-bedrock-invocationMetrics': { inputTokenCount: 25, outputTokenCount: 12, invocationLatency: 812, firstByteLatency: 301 },
  },
];

const FRAMES = BEDROCK_EVENTS.map((event) => chunkFrame(event));
const STREAM = Buffer.concat(FRAMES);

function run(chunks: Buffer[]): { events: { type: string; event: unknown }[]; error: string | undefined } {
  const events: { type: string; event: unknown }[] = [];
  const decoder = new BedrockStreamDecoder((type, json) => events.push({ type, event: JSON.parse(json) }));
  for (const chunk of chunks) decoder.push(chunk);
  return { events, error: decoder.end() };
}

const EXPECTED = BEDROCK_EVENTS.map((event) => ({ type: event.type, event }));

describe('AWS event stream → Anthropic events', () => {
  it('decodes coalesced frames (the whole stream in one read)', () => {
    expect(run([STREAM])).toEqual({ events: EXPECTED, error: undefined });
  });

  it('decodes frames split at every byte boundary', () => {
    for (let i = 0; i <= STREAM.length; i++) {
      expect(run([STREAM.subarray(0, i), STREAM.subarray(i)]), `split at ${i}`).toEqual({ events: EXPECTED, error: undefined });
    }
  });

  it('decodes a stream fed one byte at a time, and in uneven reads mixing partial and whole frames', () => {
    expect(run([...STREAM].map((b) => Buffer.from([b])))).toEqual({ events: EXPECTED, error: undefined });
    const reads: Buffer[] = [];
    for (let at = 0, size = 3; at < STREAM.length; at += size, size = ((size * 7) % 301) + 1) reads.push(STREAM.subarray(at, at + size));
    expect(run(reads)).toEqual({ events: EXPECTED, error: undefined });
  });

  it('reports a message CRC mismatch as a stream error, keeping the events before it, without throwing', () => {
    const corrupt = Buffer.from(STREAM);
    const third = FRAMES[0]!.length + FRAMES[1]!.length;
    corrupt[third + FRAMES[2]!.length - 10]! ^= 0xff; // a payload byte of the third frame
    for (const chunks of [[corrupt], [corrupt.subarray(0, third + 5), corrupt.subarray(third + 5)]]) {
      const { events, error } = run(chunks);
      expect(events).toEqual(EXPECTED.slice(0, 2));
      expect(error).toMatch(/^event stream frame 3 rejected: The message checksum/);
    }
  });

  it('reports a prelude CRC mismatch', () => {
    const corrupt = Buffer.from(STREAM);
    corrupt[FRAMES[0]!.length + 9]! ^= 0x01; // the prelude CRC of the second frame
    const { events, error } = run([corrupt]);
    expect(events).toEqual(EXPECTED.slice(0, 1));
    expect(error).toMatch(/^event stream frame 2 rejected: The prelude checksum/);
  });

  it('reports a stream cut inside a frame, also inside its length prefix', () => {
    const cutAt = FRAMES[0]!.length + FRAMES[1]!.length + 20;
    expect(run([STREAM.subarray(0, cutAt)])).toEqual({
      events: EXPECTED.slice(0, 2),
      error: `event stream ended inside a frame (20 of ${FRAMES[2]!.length} bytes received)`,
    });
    expect(run([STREAM.subarray(0, FRAMES[0]!.length + 2)]).error).toBe('event stream ended inside a frame (2 bytes received)');
  });

  it('rejects an impossible frame length instead of allocating it', () => {
    const bogus = Buffer.alloc(16);
    bogus.writeUInt32BE(0xfffffff0, 0);
    const decoder = new AwsEventStreamDecoder(() => {});
    decoder.push(Buffer.concat([FRAMES[0]!, bogus]));
    expect(decoder.frames).toBe(1);
    expect(decoder.end()).toBe(`invalid event stream frame length 4294967280 at byte ${FRAMES[0]!.length}`);
  });

  it('surfaces exception frames with their type and message', () => {
    const exception = frame(
      {
        ':exception-type': { type: 'string', value: 'throttlingException' },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'exception' },
      },
      '{"message":"Too many requests, please wait before trying again."}',
    );
    const { events, error } = run([FRAMES[0]!, exception, FRAMES[1]!]);
    expect(events).toEqual(EXPECTED.slice(0, 1));
    expect(error).toBe('throttlingException: Too many requests, please wait before trying again.');
  });

  it('surfaces error frames with their code and message headers', () => {
    const failure = frame(
      {
        ':error-code': { type: 'string', value: 'InternalFailure' },
        ':error-message': { type: 'string', value: 'The request processing has failed.' },
        ':message-type': { type: 'string', value: 'error' },
      },
      '',
    );
    expect(run([FRAMES[0]!, failure]).error).toBe('InternalFailure: The request processing has failed.');
  });

  it('reports a chunk frame whose payload has no bytes', () => {
    const odd = frame({ ':event-type': { type: 'string', value: 'chunk' }, ':message-type': { type: 'string', value: 'event' } }, '{"p":"x"}');
    expect(run([odd]).error).toBe('chunk frame payload has no "bytes" field');
  });
});
