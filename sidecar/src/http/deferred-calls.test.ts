import { describe, expect, it } from 'vitest';
import { DeferredCharges } from '../metering/deferred-charges.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { anthropicDeferred } from '../routes/deferred-plan.ts';
import type { Span } from '../spans/span.ts';
import { NoUsageExtractor } from '../usage/usage-extractor.ts';
import { DeferredCall } from './deferred-calls.ts';

/** 1 USD per million input tokens, 10 per million output: a batch line costs half of that. */
const prices = new PriceTable([{ provider: 'anthropic', model: 'claude-haiku-4-5', input_per_million: 1, output_per_million: 10 }], { ...DEFAULT_CACHE_SETTINGS });

const line = (id: string, input: number, output: number) =>
  `${JSON.stringify({ custom_id: id, result: { type: 'succeeded', message: { model: 'claude-haiku-4-5', usage: { input_tokens: input, output_tokens: output } } } })}\n`;

const submitter = { userId: 'alice', projectId: null, model: 'claude-haiku-4-5' };

function resultsRead(charges: DeferredCharges) {
  const call = new DeferredCall(charges, 'claude', anthropicDeferred('GET', '/v1/messages/batches/msgbatch_1/results', null)!);
  return { call, extractor: call.extractor(new NoUsageExtractor(), 200, prices, 'anthropic', submitter) };
}

describe("a batch's results read twice at once", () => {
  it('charges each line once between the two reads, and nothing to a read after them', () => {
    const charges = new DeferredCharges();
    let released = 0;
    charges.keep('claude', 'msgbatch_1', { ...submitter, holdUntil: 1e15, release: () => released++ }, Date.now());
    const first = resultsRead(charges);
    const second = resultsRead(charges);
    // The first read gets line a; the second, started before the first ended, reads a and b; then the first reads b.
    first.extractor.write(Buffer.from(line('a', 1000, 200)));
    second.extractor.write(Buffer.from(line('a', 1000, 200) + line('b', 3000, 100)));
    first.extractor.write(Buffer.from(line('b', 3000, 100)));
    const firstResult = first.extractor.end();
    const secondResult = second.extractor.end();
    // Line a: (1,000 × 1 + 200 × 10) / 10⁶ / 2 = 0.0015 USD, charged to the first read; line b: (3,000 × 1 + 100 × 10)
    // / 10⁶ / 2 = 0.002 USD, to the second, which got to it first. Together 0.0035, the batch's cost, not 0.007.
    expect(firstResult.charge?.costUsd).toBe(0.0015);
    expect(secondResult.charge?.costUsd).toBe(0.002);
    const ended = { statusCode: 200, status: 'ok' } as Span;
    first.call.finished(ended, Date.now());
    second.call.finished(ended, Date.now());
    expect(released).toBe(1);
    const third = resultsRead(charges);
    third.extractor.write(Buffer.from(line('a', 1000, 200) + line('b', 3000, 100)));
    expect(third.extractor.end().charge?.costUsd).toBe(0);
  });
});

describe('results of a batch not submitted through this proxy, read twice at once', () => {
  it('are charged to the readers once between them, and nothing to a read after them (ADR 0913)', () => {
    const charges = new DeferredCharges();
    const first = resultsRead(charges);
    const second = resultsRead(charges);
    first.extractor.write(Buffer.from(line('a', 1000, 200)));
    second.extractor.write(Buffer.from(line('a', 1000, 200) + line('b', 3000, 100)));
    first.extractor.write(Buffer.from(line('b', 3000, 100)));
    // Line a, 0.0015 USD, to the first read; line b, 0.002 USD, to the second: 0.0035 in all, the batch's cost.
    expect(first.extractor.end().charge?.costUsd).toBe(0.0015);
    expect(second.extractor.end().charge?.costUsd).toBe(0.002);
    const ended = { statusCode: 200, status: 'ok' } as Span;
    first.call.finished(ended, Date.now());
    second.call.finished(ended, Date.now());
    const third = resultsRead(charges);
    third.extractor.write(Buffer.from(line('a', 1000, 200) + line('b', 3000, 100)));
    expect(third.extractor.end().charge?.costUsd).toBe(0);
  });
});
