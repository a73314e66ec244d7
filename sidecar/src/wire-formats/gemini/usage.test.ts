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

/** The result without the event count, which the stream-event tests check on their own. */
function withoutEvents(full: UsageResult): UsageResult {
  const { streamEvents, ...result } = full;
  void streamEvents;
  return result;
}

const meta = { modelVersion: 'gemini-2.5-flash', createTime: '2025-07-01T10:00:00.000000Z', responseId: 'l6NjaJ7BC4GXmecP' };
const part = (text: string) => ({ content: { role: 'model', parts: [{ text }] } });

// Usage is cumulative: the first chunk carries only trafficType, later ones grow, the last is final.
const CHUNKS = [
  { candidates: [part('The')], usageMetadata: { trafficType: 'ON_DEMAND' }, ...meta },
  {
    candidates: [part(' answer is "usageMetadata": {} — 42 🚀')],
    usageMetadata: { promptTokenCount: 1500, candidatesTokenCount: 0, totalTokenCount: 1500, trafficType: 'ON_DEMAND' },
    ...meta,
  },
  {
    candidates: [{ ...part('.'), finishReason: 'STOP' }],
    usageMetadata: {
      promptTokenCount: 1500,
      candidatesTokenCount: 200,
      totalTokenCount: 2000,
      cachedContentTokenCount: 1024,
      thoughtsTokenCount: 300,
      trafficType: 'ON_DEMAND',
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: 1500 }],
      cacheTokensDetails: [{ modality: 'TEXT', tokenCount: 1024 }],
      candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: 200 }],
    },
    ...meta,
  },
];
const FINAL = { inputTokens: 1500, outputTokens: 500, cacheReadTokens: 1024, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 300, totalTokens: 2000 };

const SSE = Buffer.from(CHUNKS.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`).join(''));
const ARRAY = Buffer.from(`[${CHUNKS.map((c) => JSON.stringify(c, null, 2)).join('\n,\r\n')}\n]`);

describe('Gemini usage', () => {
  it('reads a generateContent body: prompt includes cached, output adds thoughts, tool-use prompt is input', () => {
    const body = Buffer.from(
      JSON.stringify({
        candidates: [{ content: { role: 'model', parts: [{ text: 'Hi' }] }, finishReason: 'STOP', avgLogprobs: -0.2 }],
        usageMetadata: {
          promptTokenCount: 900,
          candidatesTokenCount: 50,
          thoughtsTokenCount: 120,
          toolUsePromptTokenCount: 30,
          cachedContentTokenCount: 512,
          totalTokenCount: 1100,
          trafficType: 'ON_DEMAND',
        },
        modelVersion: 'gemini-2.5-pro',
        createTime: '2025-07-01T10:00:00.000000Z',
        responseId: 'x',
      }),
    );
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json; charset=UTF-8', headers: {} }), [body]).result).toEqual({
      usage: { inputTokens: 930, outputTokens: 170, cacheReadTokens: 512, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 120, totalTokens: 1100 },
      responseModel: 'gemini-2.5-pro',
    });
  });

  it('keeps the last usageMetadata of an SSE stream (never adds chunks), whatever the chunking', () => {
    for (let i = 0; i <= SSE.length; i += 3) {
      const extractor = createUsageExtractor({ format: 'gemini', contentType: 'text/event-stream', headers: {} });
      const chunks = [SSE.subarray(0, i), SSE.subarray(i)];
      const { out, result } = pump(extractor, chunks);
      expect(out.equals(SSE)).toBe(true);
      expect(result, `split at ${i}`).toEqual({ usage: FINAL, responseModel: 'gemini-2.5-flash' });
    }
  });

  it('keeps the last usageMetadata of a progressively written JSON array, whatever the chunking', () => {
    for (let i = 0; i <= ARRAY.length; i += 3) {
      const extractor = createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} });
      const chunks = [ARRAY.subarray(0, i), ARRAY.subarray(i)];
      for (const chunk of chunks) expect(extractor.write(chunk)).toBe(chunk);
      expect(withoutEvents(extractor.end()), `split at ${i}`).toEqual({ usage: FINAL, responseModel: 'gemini-2.5-flash' });
    }
  });

  it('reports a JSON array cut short with the usage of the last complete element', () => {
    const cut = ARRAY.subarray(0, ARRAY.lastIndexOf('"candidatesTokensDetails"'));
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} }), [cut]).result).toEqual({
      usage: { inputTokens: 1500, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 1500 },
      responseModel: 'gemini-2.5-flash',
      streamError: 'JSON array ended before its closing ]',
    });
  });

  it('reports an SSE stream that ends without a finishReason, keeping the usage seen', () => {
    const cut = Buffer.from(
      CHUNKS.slice(0, 2)
        .map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`)
        .join(''),
    );
    const { result } = pump(createUsageExtractor({ format: 'gemini', contentType: 'text/event-stream', headers: {} }), [cut]);
    expect(result.usage?.inputTokens).toBe(1500);
    expect(result.streamError).toBe('stream ended before a finishReason');
  });

  it('reports an error object written into the stream', () => {
    const error = { error: { code: 429, message: 'Resource exhausted. Please try again later.', status: 'RESOURCE_EXHAUSTED' } };
    const array = Buffer.from(`[${JSON.stringify(CHUNKS[0])},\r\n${JSON.stringify(error)}]`);
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} }), [array]).result.streamError).toBe(
      'RESOURCE_EXHAUSTED: Resource exhausted. Please try again later.',
    );
    const sse = Buffer.from(`data: ${JSON.stringify(CHUNKS[0])}\r\n\r\ndata: ${JSON.stringify(error)}\r\n\r\n`);
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'text/event-stream', headers: {} }), [sse]).result.streamError).toBe(
      'RESOURCE_EXHAUSTED: Resource exhausted. Please try again later.',
    );
  });

  it('treats a blocked prompt as a finished stream', () => {
    const blocked = { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 }, ...meta };
    const { result } = pump(createUsageExtractor({ format: 'gemini', contentType: 'text/event-stream', headers: {} }), [Buffer.from(`data: ${JSON.stringify(blocked)}\r\n\r\n`)]);
    expect(result.streamError).toBeUndefined();
    expect(result.usage?.inputTokens).toBe(8);
  });
});

describe("Vertex AI's text embeddings (:predict)", () => {
  /** A :predict answer as Vertex AI writes it, pretty-printed, one prediction per text with its token count. */
  function predictAnswer(counts: number[], values: number): Buffer {
    const predictions = counts.map((count, i) => ({
      embeddings: { statistics: { truncated: false, token_count: count }, values: Array.from({ length: values }, (_, v) => ((i + 1) * (v + 1)) / 1e6 - 0.0123456789) },
    }));
    return Buffer.from(JSON.stringify({ predictions, metadata: { billableCharacterCount: 1234 } }, null, 2));
  }
  const inputOnly = (input: number) => ({
    inputTokens: input,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    totalTokens: input,
  });

  it("sums each prediction's token_count, the body split at every byte", () => {
    // 7 + 12 + 130 = 149 input tokens.
    const body = predictAnswer([7, 12, 130], 3);
    const { out, result } = pump(
      createUsageExtractor({ format: 'gemini', contentType: 'application/json; charset=UTF-8', headers: {} }),
      Array.from(body, (byte) => Buffer.from([byte])),
    );
    expect(out.equals(body)).toBe(true);
    expect(result).toEqual({ usage: inputOnly(149) });
  });

  it('sums them across a body far larger than the JSON a reader holds, in chunks of any size', () => {
    // 250 texts of 768 values pretty-printed: about 7 MB, beyond the 4 MiB kept whole. Each text counts 8 tokens: 2000.
    const body = predictAnswer(
      Array.from({ length: 250 }, () => 8),
      768,
    );
    expect(body.length).toBeGreaterThan(4 * 1024 * 1024);
    for (const size of [1000, 4093, 65536]) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < body.length; at += size) chunks.push(body.subarray(at, at + size));
      expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} }), chunks).result.usage, `chunks of ${size}`).toEqual(inputOnly(2000));
    }
  });

  it('a token_count that is text, not a key, counts for nothing', () => {
    const body = Buffer.from(JSON.stringify({ candidates: [part('"token_count": 99')], usageMetadata: { promptTokenCount: 3, totalTokenCount: 3 } }));
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} }), [body]).result.usage?.inputTokens).toBe(3);
    const noCount = Buffer.from(JSON.stringify({ predictions: [{ embeddings: { statistics: { token_count: 'many' }, values: [0.1] } }] }));
    expect(pump(createUsageExtractor({ format: 'gemini', contentType: 'application/json', headers: {} }), [noCount]).result).toEqual({ usage: null });
  });
});
