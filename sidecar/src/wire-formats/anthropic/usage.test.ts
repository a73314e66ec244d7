import { describe, expect, it } from 'vitest';
import { createUsageExtractor, type UsageExtractor } from '../extractor.ts';
import type { UsageResult } from '../../usage/usage.ts';

function pump(extractor: UsageExtractor, chunks: Buffer[]): { out: Buffer; result: UsageResult; streamEvents: number | undefined } {
  const out: Buffer[] = [];
  for (const chunk of chunks) out.push(extractor.write(chunk));
  out.push(extractor.flush());
  const { streamEvents, ...result } = extractor.end();
  return { out: Buffer.concat(out), result, streamEvents };
}

const sse = (...events: object[]): Buffer => Buffer.from(events.map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`).join(''));

const START = {
  type: 'message_start',
  message: {
    id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
    type: 'message',
    role: 'assistant',
    content: [],
    model: 'claude-sonnet-4-20250514',
    stop_reason: null,
    stop_sequence: null,
    usage: {
      input_tokens: 472,
      cache_creation_input_tokens: 2000,
      cache_read_input_tokens: 8000,
      cache_creation: { ephemeral_5m_input_tokens: 1500, ephemeral_1h_input_tokens: 500 },
      output_tokens: 2,
      service_tier: 'standard',
    },
  },
};
const BLOCKS = [
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello "usage": {"output_tokens": 999}' } },
  { type: 'content_block_stop', index: 0 },
];
const DELTA = { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 503 } };
const STOP = { type: 'message_stop' };

const MERGED = {
  inputTokens: 472 + 2000 + 8000,
  outputTokens: 503,
  cacheReadTokens: 8000,
  cacheWriteTokens: 2000,
  cacheWrite1hTokens: 500,
  reasoningTokens: 0,
  totalTokens: 472 + 2000 + 8000 + 503,
};

describe('Anthropic usage', () => {
  it('reads a Messages body: input excludes cache reads and writes, 1-hour writes kept apart', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-opus-4-1-20250805',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { usage: { input_tokens: 1 } } }],
        stop_reason: 'tool_use',
        stop_sequence: null,
        usage: { ...START.message.usage, output_tokens: 503 },
      }),
    );
    expect(pump(createUsageExtractor({ format: 'anthropic', contentType: 'application/json', headers: {} }), [body]).result).toEqual({
      usage: MERGED,
      responseModel: 'claude-opus-4-1-20250805',
    });
  });

  it('merges message_start with message_delta by overwriting, whatever the chunking', () => {
    const stream = sse(START, ...BLOCKS, DELTA, STOP);
    for (let i = 0; i <= stream.length; i += 5) {
      const { out, result } = pump(createUsageExtractor({ format: 'anthropic', contentType: 'text/event-stream', headers: {} }), [stream.subarray(0, i), stream.subarray(i)]);
      expect(out.equals(stream)).toBe(true);
      expect(result, `split at ${i}`).toEqual({ usage: MERGED, responseModel: 'claude-sonnet-4-20250514' });
    }
  });

  it('does not add input counts that message_delta repeats cumulatively', () => {
    const cumulative = { ...DELTA, usage: { input_tokens: 472, cache_creation_input_tokens: 2000, cache_read_input_tokens: 8000, output_tokens: 503, server_tool_use: null } };
    const { result } = pump(createUsageExtractor({ format: 'anthropic', contentType: 'text/event-stream', headers: {} }), [sse(START, ...BLOCKS, cumulative, STOP)]);
    expect(result.usage).toEqual(MERGED);
  });

  it('returns the usage so far and an error when the stream ends before message_stop', () => {
    const { result } = pump(createUsageExtractor({ format: 'anthropic', contentType: 'text/event-stream', headers: {} }), [sse(START, ...BLOCKS)]);
    expect(result).toEqual({
      usage: { ...MERGED, outputTokens: 2, totalTokens: MERGED.inputTokens + 2 },
      responseModel: 'claude-sonnet-4-20250514',
      streamError: 'stream ended before message_stop',
    });
  });

  it('reports an error event', () => {
    const error = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
    const { result } = pump(createUsageExtractor({ format: 'anthropic', contentType: 'text/event-stream', headers: {} }), [sse(START, error)]);
    expect(result.streamError).toBe('overloaded_error: Overloaded');
  });

  it('reads events that come without an event: line', () => {
    const bare = Buffer.from([START, ...BLOCKS, DELTA, STOP].map((e) => `data: ${JSON.stringify(e)}\n\n`).join(''));
    expect(pump(createUsageExtractor({ format: 'anthropic', contentType: 'text/event-stream', headers: {} }), [bare]).result).toEqual({
      usage: MERGED,
      responseModel: 'claude-sonnet-4-20250514',
    });
  });

  it('counts nothing for count_tokens answers', () => {
    const body = Buffer.from('{"input_tokens":2095}');
    expect(pump(createUsageExtractor({ format: 'anthropic', contentType: 'application/json', headers: {} }), [body]).result).toEqual({ usage: null });
  });
});
