import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { DEFAULT_PRICES } from '../pricing/default-prices.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { MAX_PLAUSIBLE_TOKENS } from '../usage/usage-bounds.ts';
import type { TokenUsage } from '../usage/usage.ts';
import { CallMeter } from './call-meter.ts';

function capturedLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

function usage(fields: Partial<TokenUsage>): TokenUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0, ...fields };
}

const writers: SpanWriter[] = [];
afterEach(async () => {
  for (const writer of writers.splice(0)) await writer.close();
});

function meter() {
  const { logger, lines } = capturedLogger();
  const writer = new SpanWriter(openMemorySpanStore(100), { bufferSize: 100, batchSize: 10, flushIntervalMs: 1000 }, logger);
  writers.push(writer);
  return { meter: new CallMeter(writer, logger), lines };
}

const start = { route: 'beta', provider: 'openai', model: 'gpt-4o-mini', operation: 'chat', userId: null, projectId: null, requestId: 'r1' } as const;
const prices = new PriceTable([...DEFAULT_PRICES], { ...DEFAULT_CACHE_SETTINGS });

describe('a call whose metering goes wrong is recorded, never thrown', () => {
  it('a price no cost can be computed with (one that bypassed validation) is a metering_failed span at cost 0, logged and counted', () => {
    const { meter: m, lines } = meter();
    // 2e302 USD per million is refused wherever prices enter; a table built around the validator must still not crash a call.
    const hostile = new PriceTable([{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 1, cache_write_per_million: 2e302 }], {
      ...DEFAULT_CACHE_SETTINGS,
    });
    const span = m
      .start({ ...start, trace: startSpanContext(undefined, undefined) })
      .finish({ prices: hostile, usage: usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 }), status: 'ok', statusCode: 200 });
    expect(span.status).toBe('error');
    expect(span.costUsd).toBe(0);
    expect(span.priced).toBe(false);
    expect(span.error).toMatch(/^metering_failed: price of 2e\+302 USD per million tokens is outside/);
    expect(m.stats()).toEqual({ meteringErrors: 1, implausibleUsage: 0 });
    expect(lines.find((l) => l.msg === 'metering failed; call recorded with cost 0')).toMatchObject({ level: 50, metering_errors: 1, request_id: 'r1' });
    expect(lines.find((l) => l.msg === 'llm call')).not.toHaveProperty('pricing');
  });

  it('token counts no call can have are not costed: the span keeps no usage, says why, and is counted', () => {
    const { meter: m } = meter();
    for (const counts of [{ inputTokens: 1.7e308 }, { outputTokens: 1e20 }, { cacheReadTokens: MAX_PLAUSIBLE_TOKENS + 1 }, { totalTokens: Number.POSITIVE_INFINITY }]) {
      const span = m.start({ ...start, trace: startSpanContext(undefined, undefined) }).finish({ prices, usage: usage(counts), status: 'ok', statusCode: 200 });
      expect(span.status).toBe('error');
      expect(span.costUsd).toBe(0);
      expect(span.inputTokens + span.outputTokens + span.cachedTokens + span.totalTokens).toBe(0);
      expect(span.error).toMatch(/^usage_implausible: upstream reported .* tokens, (more than the 100000000 one call can use|which is not a token count); usage not recorded$/);
    }
    expect(m.stats().implausibleUsage).toBe(4);
  });

  it('keeps an upstream error status and its message, adding the metering problem after it', () => {
    const { meter: m } = meter();
    const span = m
      .start({ ...start, trace: startSpanContext(undefined, undefined) })
      .finish({ prices, usage: usage({ inputTokens: 1e20 }), status: 'upstream_error', statusCode: 500, error: 'upstream said no' });
    expect(span.status).toBe('upstream_error');
    expect(span.error).toMatch(/^upstream said no; usage_implausible: /);
  });

  it('a plausible call at the largest plausible count is costed as before', () => {
    const { meter: m } = meter();
    const span = m
      .start({ ...start, trace: startSpanContext(undefined, undefined) })
      .finish({ prices, usage: usage({ inputTokens: MAX_PLAUSIBLE_TOKENS, totalTokens: MAX_PLAUSIBLE_TOKENS }), status: 'ok', statusCode: 200 });
    expect(span).toMatchObject({ status: 'ok', error: null, priced: true, inputTokens: MAX_PLAUSIBLE_TOKENS, costUsd: 15 });
    expect(m.stats()).toEqual({ meteringErrors: 0, implausibleUsage: 0 });
  });
});

describe("a call's billed units from its request (ADR 0910)", () => {
  it("merges the request's size and quality under the answer's image count, and records the units on the span", () => {
    const { meter: m } = meter();
    const call = m.start({ ...start, model: 'dall-e-3', trace: startSpanContext(undefined, undefined), units: { imageSize: '1024x1792', imageQuality: 'hd' } });
    const span = call.finish({ prices, usage: usage({ units: { images: 2 } }), status: 'ok', statusCode: 200 });
    // 2 × 0.12 (hd 1024x1792)
    expect(span).toMatchObject({ images: 2, costUsd: 0.24, priced: true, audioSeconds: 0, characters: 0 });
  });

  it('bills an answer without usage by the request alone once it succeeded, and not a failed one', () => {
    const { meter: m } = meter();
    const tts = new PriceTable([{ provider: 'openai', model: 'tts-1', input_per_million: 0, output_per_million: 0, characters_per_million: 15 }], { ...DEFAULT_CACHE_SETTINGS });
    const speech = { ...start, model: 'tts-1', units: { characters: 1234 } };
    // 1234 × 15 / 10⁶ = 0.01851
    const ok = m.start({ ...speech, trace: startSpanContext(undefined, undefined) }).finish({ prices: tts, usage: null, status: 'ok', statusCode: 200 });
    expect(ok).toMatchObject({ characters: 1234, costUsd: 0.01851, priced: true });
    const failed = m.start({ ...speech, trace: startSpanContext(undefined, undefined) }).finish({ prices: tts, usage: null, status: 'upstream_error', statusCode: 400 });
    expect(failed).toMatchObject({ characters: 0, costUsd: 0 });
  });

  it('an image size without a price is logged as unpriced, naming the size and quality', () => {
    const { meter: m, lines } = meter();
    const call = m.start({ ...start, model: 'dall-e-3', trace: startSpanContext(undefined, undefined), units: { imageSize: '512x512', imageQuality: 'standard' } });
    expect(call.finish({ prices, usage: usage({ units: { images: 1 } }), status: 'ok', statusCode: 200 })).toMatchObject({ images: 1, costUsd: 0, priced: false });
    expect(lines.find((l) => l.msg === 'llm call')).toMatchObject({ pricing: 'dall-e-3 has no price for images of size 512x512 and quality standard: cost recorded as 0' });
  });
});
