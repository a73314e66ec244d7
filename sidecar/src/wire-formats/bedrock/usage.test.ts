import { EventStreamCodec } from '@smithy/eventstream-codec';
import { describe, expect, it } from 'vitest';
import { createUsageExtractor, type UsageExtractor } from '../extractor.ts';
import type { UsageResult } from '../../usage/usage.ts';

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => Buffer.from(text, 'utf8'),
);

function chunkFrame(event: object): Buffer {
  const bytes = Buffer.from(JSON.stringify(event)).toString('base64');
  return Buffer.from(
    codec.encode({
      headers: {
        ':event-type': { type: 'string', value: 'chunk' },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body: Buffer.from(JSON.stringify({ bytes, p: 'abcdefghijklmnopqrstuvwxyzABCDEF'.slice(0, bytes.length % 32) })),
    }),
  );
}

function pump(extractor: UsageExtractor, chunks: Buffer[]): { out: Buffer; result: UsageResult; streamEvents: number | undefined } {
  const out: Buffer[] = [];
  for (const chunk of chunks) out.push(extractor.write(chunk));
  out.push(extractor.flush());
  const { streamEvents, ...result } = extractor.end();
  return { out: Buffer.concat(out), result, streamEvents };
}

/** The result without the event count, which the stream-event tests check on their own. */
function withoutEvents(full: UsageResult): UsageResult {
  const { streamEvents, ...result } = full;
  void streamEvents;
  return result;
}

const EVENTSTREAM = 'application/vnd.amazon.eventstream';
const MODEL = 'claude-sonnet-4-20250514';
const EVENTS = [
  {
    type: 'message_start',
    message: {
      id: 'msg_bdrk_01',
      type: 'message',
      role: 'assistant',
      model: MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 40, cache_creation_input_tokens: 1200, cache_read_input_tokens: 3000, output_tokens: 1 },
    },
  },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Bonjour 🌍' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 57 } },
  {
    type: 'message_stop',
    'amazon-bedrock-invocationMetrics': {
      inputTokenCount: 40,
      outputTokenCount: 57,
      invocationLatency: 1419,
      firstByteLatency: 512,
      cacheReadInputTokenCount: 3000,
      cacheWriteInputTokenCount: 1200,
    },
  },
];
const FRAMES = EVENTS.map(chunkFrame);
const STREAM = Buffer.concat(FRAMES);
const EXPECTED = { inputTokens: 4240, outputTokens: 57, cacheReadTokens: 3000, cacheWriteTokens: 1200, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 4297 };

describe('Bedrock usage', () => {
  it('reads the InvokeModel body usage', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'msg_bdrk_1',
        type: 'message',
        role: 'assistant',
        model: MODEL,
        content: [{ type: 'text', text: 'Hi' }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 40, cache_creation_input_tokens: 1200, cache_read_input_tokens: 3000, output_tokens: 57 },
      }),
    );
    const headers = { 'x-amzn-bedrock-input-token-count': '40', 'x-amzn-bedrock-output-token-count': '57', 'x-amzn-bedrock-invocation-latency': '900' };
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers }), [body]).result).toEqual({ usage: EXPECTED, responseModel: MODEL });
  });

  it('falls back to the token-count headers when the body has no usage', () => {
    const body = Buffer.from(JSON.stringify({ generation: 'Hi', prompt_token_count: 11, generation_token_count: 3, stop_reason: 'stop' }));
    const headers = {
      'X-Amzn-Bedrock-Input-Token-Count': '40',
      'X-Amzn-Bedrock-Output-Token-Count': '57',
      'X-Amzn-Bedrock-Cache-Read-Input-Token-Count': '3000',
      'X-Amzn-Bedrock-Cache-Write-Input-Token-Count': '1200',
    };
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers }), [body]).result).toEqual({ usage: EXPECTED });
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers: {} }), [body]).result).toEqual({ usage: null });
  });

  it('reads the event stream split at every byte, forwarding the bytes untouched', () => {
    for (let i = 0; i <= STREAM.length; i++) {
      const extractor = createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} });
      const chunks = [STREAM.subarray(0, i), STREAM.subarray(i)];
      for (const chunk of chunks) expect(extractor.write(chunk)).toBe(chunk);
      const result = extractor.end();
      expect(withoutEvents(result), `split at ${i}`).toEqual({ usage: EXPECTED, responseModel: MODEL });
      expect(result.streamEvents).toBe(FRAMES.length);
    }
  });

  it('reads coalesced frames and byte-by-byte reads alike', () => {
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [STREAM]).result).toEqual({ usage: EXPECTED, responseModel: MODEL });
    const bytewise = [...STREAM].map((b) => Buffer.from([b]));
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), bytewise).result).toEqual({ usage: EXPECTED, responseModel: MODEL });
  });

  it('uses invocationMetrics when the events carry no usage', () => {
    const bare = EVENTS.map((e) => {
      if (e.type === 'message_start') return { ...e, message: { ...e.message!, usage: undefined } };
      if (e.type === 'message_delta') return { ...e, usage: undefined };
      return e;
    });
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [Buffer.concat(bare.map(chunkFrame))]).result).toEqual({
      usage: EXPECTED,
      responseModel: MODEL,
    });
  });

  it('returns the usage so far and a stream error on a corrupted CRC', () => {
    const corrupt = Buffer.from(STREAM);
    const deltaAt = FRAMES.slice(0, 4).reduce((n, f) => n + f.length, 0);
    corrupt[deltaAt + 30]! ^= 0x20; // inside the message_delta frame
    const { out, result } = pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [corrupt]);
    expect(out.equals(corrupt)).toBe(true);
    expect(result.usage).toEqual({ ...EXPECTED, outputTokens: 1, totalTokens: 4241 });
    expect(result.streamError).toMatch(/^event stream frame 5 rejected: The message checksum/);
  });

  it('returns the usage so far and a stream error on a truncated stream', () => {
    const cut = STREAM.subarray(0, STREAM.length - FRAMES[5]!.length - 10);
    const { result } = pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [cut]);
    expect(result.usage).toEqual({ ...EXPECTED, outputTokens: 1, totalTokens: 4241 });
    expect(result.streamError).toBe(`event stream ended inside a frame (${FRAMES[4]!.length - 10} of ${FRAMES[4]!.length} bytes received)`);
    const whole = pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [Buffer.concat(FRAMES.slice(0, 5))]);
    expect(whole.result.streamError).toBe('stream ended before message_stop');
    expect(whole.result.usage).toEqual(EXPECTED);
  });

  it('surfaces an exception frame as the stream error', () => {
    const exception = Buffer.from(
      codec.encode({
        headers: {
          ':exception-type': { type: 'string', value: 'modelStreamErrorException' },
          ':content-type': { type: 'string', value: 'application/json' },
          ':message-type': { type: 'string', value: 'exception' },
        },
        body: Buffer.from('{"message":"Model stream error","originalStatusCode":500}'),
      }),
    );
    const { result } = pump(createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} }), [FRAMES[0]!, exception]);
    expect(result.streamError).toBe('modelStreamErrorException: Model stream error');
    expect(result.usage?.inputTokens).toBe(4240);
  });
});

function converseFrame(type: string, member: object): Buffer {
  return Buffer.from(
    codec.encode({
      headers: {
        ':event-type': { type: 'string', value: type },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body: Buffer.from(JSON.stringify({ ...member, p: 'abcdef' })),
    }),
  );
}

// Converse's inputTokens leaves out cache reads and writes (40 + 3000 + 1200 = 4240 prompt tokens in all).
const CONVERSE_USAGE = { inputTokens: 40, outputTokens: 57, totalTokens: 4297, cacheReadInputTokens: 3000, cacheWriteInputTokens: 1200 };
const CONVERSE_STREAM = [
  converseFrame('messageStart', { role: 'assistant' }),
  converseFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Bonjour' } }),
  converseFrame('contentBlockStop', { contentBlockIndex: 0 }),
  converseFrame('messageStop', { stopReason: 'end_turn' }),
  converseFrame('metadata', { usage: CONVERSE_USAGE, metrics: { latencyMs: 412 } }),
];

describe('Bedrock Converse usage', () => {
  it("reads a Converse answer's camelCase usage", () => {
    const body = Buffer.from(
      JSON.stringify({ output: { message: { role: 'assistant', content: [{ text: 'Hi' }] } }, stopReason: 'end_turn', usage: CONVERSE_USAGE, metrics: { latencyMs: 412 } }),
    );
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers: {} }), [body]).result).toEqual({ usage: EXPECTED });
  });

  it('a usage in neither shape is no usage: the token-count headers decide, never a free zero', () => {
    const body = Buffer.from(JSON.stringify({ output: {}, usage: { promptTokens: 40 } }));
    const headers = { 'x-amzn-bedrock-input-token-count': '40', 'x-amzn-bedrock-output-token-count': '57' };
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers }), [body]).result.usage).toMatchObject({ inputTokens: 40, outputTokens: 57 });
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers: {} }), [body]).result).toEqual({ usage: null });
  });

  it("reads a ConverseStream's metadata usage, split at every byte, and calls the stream whole", () => {
    const stream = Buffer.concat(CONVERSE_STREAM);
    const bytes = Array.from(stream, (byte) => Buffer.from([byte]));
    const extractor = createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} });
    const { out, result, streamEvents } = pump(extractor, bytes);
    expect(out.equals(stream)).toBe(true);
    expect(result).toEqual({ usage: EXPECTED });
    expect(streamEvents).toBe(5);
    expect(extractor.sawEnd).toBe(true);
  });

  it('a ConverseStream cut before its metadata says so, and has no usage to charge', () => {
    const extractor = createUsageExtractor({ format: 'bedrock', contentType: EVENTSTREAM, headers: {} });
    const { result } = pump(extractor, CONVERSE_STREAM.slice(0, 4));
    expect(result).toEqual({ usage: null, streamError: 'stream ended before the metadata event' });
    expect(extractor.sawEnd).toBe(false);
  });
});

describe("Bedrock's embedding models", () => {
  it("reads Titan Text Embeddings' inputTextTokenCount from the body, without the headers", () => {
    const body = Buffer.from(JSON.stringify({ embedding: [0.125, -0.5], embeddingsByType: { float: [0.125, -0.5] }, inputTextTokenCount: 17 }));
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers: {} }), [body]).result).toEqual({
      usage: { inputTokens: 17, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 17 },
    });
  });

  it("reads Cohere Embed's count from the input-token header, its body having none", () => {
    const body = Buffer.from(JSON.stringify({ id: 'e1', response_type: 'embeddings_floats', texts: ['a', 'b'], embeddings: [[0.1], [0.2]] }));
    const headers = { 'x-amzn-bedrock-input-token-count': '9' };
    expect(pump(createUsageExtractor({ format: 'bedrock', contentType: 'application/json', headers }), [body]).result.usage).toMatchObject({ inputTokens: 9, outputTokens: 0 });
  });
});
