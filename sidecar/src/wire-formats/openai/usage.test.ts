import { describe, expect, it } from 'vitest';
import { createUsageExtractor, type UsageExtractor } from '../extractor.ts';
import type { UsageResult } from '../../usage/usage.ts';

function pump(extractor: UsageExtractor, chunks: Buffer[], cut?: string): { out: Buffer; result: UsageResult; streamEvents: number | undefined } {
  const out: Buffer[] = [];
  for (const chunk of chunks) out.push(extractor.write(chunk));
  out.push(extractor.flush());
  const { streamEvents, ...result } = extractor.end(cut);
  return { out: Buffer.concat(out), result, streamEvents };
}

/** The result without the event count, which the stream-event tests check on their own. */
function withoutEvents(full: UsageResult): UsageResult {
  const { streamEvents, ...result } = full;
  void streamEvents;
  return result;
}

function split(bytes: Buffer, ...points: number[]): Buffer[] {
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out;
}

const sse = (...events: (object | string)[]): string => events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('');

const base = {
  id: 'chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT',
  object: 'chat.completion.chunk',
  created: 1741569952,
  model: 'gpt-4o-mini-2024-07-18',
  service_tier: 'default',
  system_fingerprint: 'fp_06737a9306',
};
const USAGE = {
  prompt_tokens: 1200,
  completion_tokens: 300,
  total_tokens: 1500,
  prompt_tokens_details: { cached_tokens: 1024, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 128, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
};
const NORMALISED = { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 1024, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 128, totalTokens: 1500 };

const CONTENT_EVENTS = [
  { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }], usage: null },
  // Content that quotes a usage object must not be mistaken for one.
  { ...base, choices: [{ index: 0, delta: { content: 'The field "usage": {"prompt_tokens": 5} — ünïcødé 🚀' }, logprobs: null, finish_reason: null }], usage: null },
  { ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], usage: null },
];
const USAGE_EVENT = { ...base, choices: [], usage: USAGE };
const WITH_USAGE = Buffer.from(sse(...CONTENT_EVENTS, USAGE_EVENT, '[DONE]'));
const WITHOUT_USAGE = Buffer.from(sse(...CONTENT_EVENTS, '[DONE]'));

const sseOptions = { format: 'openai' as const, contentType: 'text/event-stream; charset=utf-8', headers: {} };

describe('OpenAI usage', () => {
  it('reads a chat completion body: cached and reasoning tokens are subsets', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'chatcmpl-abc',
        object: 'chat.completion',
        created: 1741569952,
        model: 'gpt-4.1-2025-04-14',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hi', refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
        usage: USAGE,
        service_tier: 'default',
        system_fingerprint: 'fp_b3f1157249',
      }),
    );
    const extractor = createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} });
    const { out, result } = pump(extractor, split(body, 17, 100));
    expect(out.equals(body)).toBe(true);
    expect(result).toEqual({ usage: NORMALISED, responseModel: 'gpt-4.1-2025-04-14' });
  });

  it('reads usage from the stream when the caller asked for it, forwarding every chunk untouched', () => {
    const extractor = createUsageExtractor(sseOptions);
    const chunks = split(WITH_USAGE, 50, 400, 900);
    for (const chunk of chunks) expect(extractor.write(chunk)).toBe(chunk);
    expect(extractor.flush().length).toBe(0);
    expect(withoutEvents(extractor.end())).toEqual({ usage: NORMALISED, responseModel: 'gpt-4o-mini-2024-07-18' });
  });

  it('counts the events a stream carried, [DONE] included, however its bytes were split', () => {
    // three content events, the usage event and [DONE]
    expect(pump(createUsageExtractor(sseOptions), split(WITH_USAGE, 7, 300, 301)).streamEvents).toBe(5);
    expect(pump(createUsageExtractor(sseOptions), [WITHOUT_USAGE]).streamEvents).toBe(4);
  });

  it('removes exactly the injected usage chunk, whatever the chunking, and keeps [DONE]', () => {
    for (let i = 0; i <= WITH_USAGE.length; i++) {
      const extractor = createUsageExtractor({ ...sseOptions, stripInjectedUsage: true });
      const { out, result } = pump(extractor, split(WITH_USAGE, i));
      expect(out.toString('utf8'), `split at ${i}`).toBe(WITHOUT_USAGE.toString('utf8'));
      expect(result.usage).toEqual(NORMALISED);
      expect(result.streamError).toBeUndefined();
    }
    const bytewise = pump(
      createUsageExtractor({ ...sseOptions, stripInjectedUsage: true }),
      [...WITH_USAGE].map((b) => Buffer.from([b])),
    );
    expect(bytewise.out.equals(WITHOUT_USAGE)).toBe(true);
  });

  it('strips the usage chunk from a CRLF stream byte-exactly', () => {
    const crlf = (text: string) => Buffer.from(text.replaceAll('\n', '\r\n'));
    const input = crlf(sse(...CONTENT_EVENTS, USAGE_EVENT, '[DONE]'));
    const expected = crlf(sse(...CONTENT_EVENTS, '[DONE]'));
    for (let i = 0; i <= input.length; i += 7) {
      const { out } = pump(createUsageExtractor({ ...sseOptions, stripInjectedUsage: true }), split(input, i, Math.min(input.length, i + 3)));
      expect(out.equals(expected), `split at ${i}`).toBe(true);
    }
  });

  it('forwards a chunk ending on an event boundary as the same Buffer, even when stripping', () => {
    const extractor = createUsageExtractor({ ...sseOptions, stripInjectedUsage: true });
    const first = Buffer.from(sse(CONTENT_EVENTS[0]!));
    expect(extractor.write(first)).toBe(first);
  });

  it('passes a stream without usage through and reports no usage, no error', () => {
    const { out, result } = pump(createUsageExtractor(sseOptions), [WITHOUT_USAGE]);
    expect(out.equals(WITHOUT_USAGE)).toBe(true);
    expect(result).toEqual({ usage: null, responseModel: 'gpt-4o-mini-2024-07-18' });
  });

  it('reports a truncated stream, and the held partial event still reaches the caller', () => {
    const cutAt = WITH_USAGE.indexOf('data: [DONE]') - 30;
    const truncated = WITH_USAGE.subarray(0, cutAt);
    const { out, result } = pump(createUsageExtractor({ ...sseOptions, stripInjectedUsage: true }), [truncated]);
    expect(out.equals(truncated)).toBe(true);
    expect(result).toEqual({ usage: null, responseModel: 'gpt-4o-mini-2024-07-18', streamError: 'stream ended mid-event' });

    const beforeDone = WITH_USAGE.subarray(0, WITH_USAGE.indexOf('data: [DONE]'));
    const second = pump(createUsageExtractor(sseOptions), [beforeDone]);
    expect(second.result).toEqual({ usage: NORMALISED, responseModel: 'gpt-4o-mini-2024-07-18', streamError: 'stream ended before data: [DONE]' });
  });

  it('passes the proxy reason for a cut through', () => {
    const { result } = pump(createUsageExtractor(sseOptions), [WITH_USAGE.subarray(0, 100)], 'upstream socket reset');
    expect(result.streamError).toBe('upstream socket reset');
  });

  it('reports an error event sent inside the stream', () => {
    const body = Buffer.from(sse(CONTENT_EVENTS[0]!, { error: { message: 'The server had an error while processing your request.', type: 'server_error' } }));
    expect(pump(createUsageExtractor(sseOptions), [body]).result.streamError).toBe('server_error: The server had an error while processing your request.');
  });

  it('reads usage from the Vertex AI OpenAI-compatible surface', () => {
    const body = Buffer.from(
      JSON.stringify({
        choices: [{ finish_reason: 'stop', index: 0, logprobs: null, message: { content: 'Hi', role: 'assistant' } }],
        created: 1754000000,
        id: 'abc',
        model: 'google/gemini-2.5-flash',
        object: 'chat.completion',
        system_fingerprint: '',
        usage: { completion_tokens: 42, extra_properties: { google: { traffic_type: 'ON_DEMAND' } }, prompt_tokens: 10, total_tokens: 52 },
      }),
    );
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} }), [body]).result).toEqual({
      usage: { inputTokens: 10, outputTokens: 42, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 52 },
      responseModel: 'google/gemini-2.5-flash',
    });
  });

  it('reads a Responses API body', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'resp_1',
        object: 'response',
        model: 'o4-mini-2025-04-16',
        output: [],
        usage: { input_tokens: 500, input_tokens_details: { cached_tokens: 100 }, output_tokens: 80, output_tokens_details: { reasoning_tokens: 64 }, total_tokens: 580 },
      }),
    );
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} }), [body]).result).toEqual({
      usage: { inputTokens: 500, outputTokens: 80, cacheReadTokens: 100, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 64, totalTokens: 580 },
      responseModel: 'o4-mini-2025-04-16',
    });
  });

  it('reads usage from a body larger than the memory budget, from its head and tail', () => {
    const text = 'x'.repeat(5 * 1024 * 1024);
    const body = Buffer.from(
      JSON.stringify({
        id: 'c',
        object: 'chat.completion',
        model: 'gpt-4o-2024-08-06',
        choices: [{ index: 0, message: { role: 'assistant', content: text, tool_calls: [{ function: { arguments: '{"usage":{"prompt_tokens":1}}' } }] } }],
        usage: USAGE,
      }),
    );
    const chunks: Buffer[] = [];
    for (let at = 0; at < body.length; at += 65536) chunks.push(body.subarray(at, at + 65536));
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} }), chunks).result).toEqual({
      usage: NORMALISED,
      responseModel: 'gpt-4o-2024-08-06',
    });
  });

  it('reports no usage for error responses', () => {
    const body = Buffer.from(JSON.stringify({ error: { message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' } }));
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {}, statusCode: 429 }), [body]).result).toEqual({ usage: null });
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} }), [body]).result).toEqual({ usage: null });
  });

  it("reads the audio API's usage: a transcription's seconds or tokens, a verbose translation's duration; speech audio passes unread", () => {
    const json = (document: unknown) => [Buffer.from(JSON.stringify(document))];
    const read = (document: unknown) => pump(createUsageExtractor({ format: 'openai', contentType: 'application/json', headers: {} }), json(document)).result.usage;
    expect(read({ text: 'hi', usage: { type: 'duration', seconds: 61 } })).toMatchObject({ inputTokens: 0, outputTokens: 0, units: { audioSeconds: 61 } });
    expect(
      read({ text: 'hi', usage: { type: 'tokens', input_tokens: 27, input_token_details: { text_tokens: 2, audio_tokens: 25 }, output_tokens: 9, total_tokens: 36 } }),
    ).toMatchObject({
      inputTokens: 27,
      outputTokens: 9,
      totalTokens: 36,
    });
    expect(read({ task: 'translate', language: 'english', duration: 2.5, text: 'hi', segments: [] })).toMatchObject({ units: { audioSeconds: 2.5 } });
    // A translation's json says nothing; a negative duration is not a count.
    expect(read({ text: 'hi' })).toBeNull();
    expect(read({ text: 'hi', usage: { type: 'duration', seconds: -1 } })).toBeNull();
    const audio = Buffer.from([0xff, 0xf3, 0x44, 0xc4, 0x00]);
    expect(pump(createUsageExtractor({ format: 'openai', contentType: 'audio/mpeg', headers: {} }), [audio])).toEqual({
      out: audio,
      result: { usage: null },
      streamEvents: undefined,
    });
  });
});
