import { describe, expect, it } from 'vitest';
import { anthropicBatchLine, batchResultsExtractor } from './batch-results.ts';
import type { TokenUsage } from '../usage/usage.ts';

const line = (id: string, model: string, input: number, output: number) =>
  JSON.stringify({ custom_id: id, result: { type: 'succeeded', message: { model, usage: { input_tokens: input, output_tokens: output } } } });

/** 1 USD per million input tokens and 10 per million output tokens, then halved: a batch price. */
const price = (_model: string, usage: TokenUsage) => ({ costUsd: ((usage.inputTokens * 1 + usage.outputTokens * 10) / 1e6) * 0.5, priced: true });

describe('a batch results file read as it passes', () => {
  it('sums the succeeded lines, split anywhere across chunks, and charges each at its own price', () => {
    const extractor = batchResultsExtractor({ read: anthropicBatchLine, price, skip: 0 });
    const body = `${line('a', 'claude-haiku-4-5', 1000, 200)}\n${JSON.stringify({ custom_id: 'b', result: { type: 'errored', error: { type: 'invalid_request' } } })}\n${line('c', 'claude-haiku-4-5', 3000, 100)}`;
    const bytes = Buffer.from(body);
    // Cut in the middle of the first line and of the third, which has no trailing newline.
    for (const [from, to] of [
      [0, 17],
      [17, bytes.length - 5],
      [bytes.length - 5, bytes.length],
    ]) {
      expect(extractor.write(bytes.subarray(from, to))).toEqual(bytes.subarray(from, to));
    }
    const result = extractor.end();
    // 4,000 input and 300 output tokens; (1,000 × 1 + 200 × 10) / 10⁶ / 2 = 0.0015 and (3,000 × 1 + 100 × 10) / 10⁶ / 2 = 0.002.
    expect(result.usage).toMatchObject({ inputTokens: 4000, outputTokens: 300, totalTokens: 4300 });
    expect(result.charge).toEqual({ costUsd: 0.0035, priced: true });
    expect(result.responseModel).toBe('claude-haiku-4-5');
    expect(extractor.lines).toBe(3);
  });

  it('skips the lines an earlier read charged, and charges nothing when none are left', () => {
    const body = Buffer.from(`${line('a', 'm', 1000, 0)}\n${line('b', 'm', 2000, 0)}\n`);
    const rest = batchResultsExtractor({ read: anthropicBatchLine, price, skip: 1 });
    rest.write(body);
    expect(rest.end().usage).toMatchObject({ inputTokens: 2000 });
    const none = batchResultsExtractor({ read: anthropicBatchLine, price, skip: 2 });
    none.write(body);
    // No tokens at no cost, rather than no usage: a read the caller left would have its usage estimated.
    expect(none.end()).toMatchObject({ usage: { inputTokens: 0, outputTokens: 0 }, charge: { costUsd: 0 } });
  });

  it('names the models apart: no single response model for a mixed batch', () => {
    const extractor = batchResultsExtractor({ read: anthropicBatchLine, price, skip: 0 });
    extractor.write(Buffer.from(`${line('a', 'one', 10, 0)}\n${line('b', 'two', 10, 0)}\n`));
    expect(extractor.end().responseModel).toBeUndefined();
  });

  it('says on the span when a line cannot be read, and a cut read does not take its last partial line', () => {
    const extractor = batchResultsExtractor({ read: anthropicBatchLine, price, skip: 0 });
    extractor.write(Buffer.from(`not json\n${line('a', 'm', 1000, 0)}\n{"custom_id":"b","res`));
    const result = extractor.end('upstream connection failed');
    expect(result.usage).toMatchObject({ inputTokens: 1000 });
    expect(result.streamError).toMatch(/^upstream connection failed; 1 result line\(s\) not read/);
    expect(extractor.lines).toBe(2);
  });
});
