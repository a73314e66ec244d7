import { describe, expect, it } from 'vitest';
import type { TokenUsage } from '../usage/usage.ts';
import { DEFAULT_CACHE_SETTINGS } from './default-cache.ts';
import { DEFAULT_PRICES } from './default-prices.ts';
import { PriceTable } from './price-table.ts';

const table = new PriceTable([...DEFAULT_PRICES], { ...DEFAULT_CACHE_SETTINGS });

function usage(fields: Partial<TokenUsage>): TokenUsage {
  const u = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0, ...fields };
  u.totalTokens = u.inputTokens + u.outputTokens;
  return u;
}

// Expected values are worked by hand from the list prices (USD per million tokens = micro-dollars per token).
describe('cost formulas', () => {
  it('Gemini: uncached prompt, cached prompt and output (thoughts included) at their prices', () => {
    // gemini-2.5-flash: 476 × 0.30 + 1024 × 0.03 + 500 × 2.50 = 142.8 + 30.72 + 1250 = 1423.52 µ$
    const cost = table.cost('google', 'gemini-2.5-flash', usage({ inputTokens: 1500, cacheReadTokens: 1024, outputTokens: 500, reasoningTokens: 300 }));
    expect(cost).toEqual({ costUsd: 0.00142352, priced: true, model: 'gemini-2.5-flash' });
  });

  it('Gemini 2.5 Pro bills the whole request at the long-context tier past 200k prompt tokens', () => {
    // At the threshold: 200000 × 1.25 + 1000 × 10 = 260000 µ$
    expect(table.cost('google', 'gemini-2.5-pro', usage({ inputTokens: 200_000, outputTokens: 1000 })).costUsd).toBe(0.26);
    // Past it: 100001 × 2.50 + 100000 × 0.25 + 1000 × 15 = 250002.5 + 25000 + 15000 = 290002.5 µ$
    expect(table.cost('google', 'gemini-2.5-pro', usage({ inputTokens: 200_001, cacheReadTokens: 100_000, outputTokens: 1000 })).costUsd).toBe(0.2900025);
  });

  it('OpenAI: (prompt − cached) × input + cached × cached price + completion × output', () => {
    // gpt-4o-mini: 176 × 0.15 + 1024 × 0.075 + 300 × 0.60 = 26.4 + 76.8 + 180 = 283.2 µ$
    expect(table.cost('openai', 'gpt-4o-mini', usage({ inputTokens: 1200, cacheReadTokens: 1024, outputTokens: 300, reasoningTokens: 128 })).costUsd).toBe(0.0002832);
    // gpt-4.1: 8000 × 2 + 2000 × 0.5 + 500 × 8 = 21000 µ$
    expect(table.cost('openai', 'gpt-4.1-2025-04-14', usage({ inputTokens: 10_000, cacheReadTokens: 2000, outputTokens: 500 })).costUsd).toBe(0.021);
  });

  it('Anthropic: uncached input, 5-minute and 1-hour cache writes, cache reads and output at their prices', () => {
    const u = usage({ inputTokens: 472 + 2000 + 8000, cacheWriteTokens: 2000, cacheWrite1hTokens: 500, cacheReadTokens: 8000, outputTokens: 503 });
    // claude-sonnet-4: 472 × 3 + 1500 × 3.75 + 500 × 6 + 8000 × 0.30 + 503 × 15 = 1416 + 5625 + 3000 + 2400 + 7545 = 19986 µ$
    expect(table.cost('anthropic', 'claude-sonnet-4@20250514', u).costUsd).toBe(0.019986);
    // claude-opus-4-1: 472 × 15 + 1500 × 18.75 + 500 × 30 + 8000 × 1.5 + 503 × 75 = 7080 + 28125 + 15000 + 12000 + 37725 = 99930 µ$
    expect(table.cost('anthropic', 'anthropic.claude-opus-4-1-20250805-v1:0', u).costUsd).toBe(0.09993);
    // claude-haiku-4-5: 1000 × 1 + 100 × 5 = 1500 µ$
    expect(table.cost('anthropic', 'claude-haiku-4-5-20251001', usage({ inputTokens: 1000, outputTokens: 100 })).costUsd).toBe(0.0015);
  });

  it('prices the current models: GPT-5 family tiers, Gemini 3, Claude without dated snapshots', () => {
    // gpt-5: 9000 × 1.25 + 1000 × 0.125 + 2000 × 10 = 11250 + 125 + 20000 = 31375 µ$
    expect(table.cost('openai', 'gpt-5-2025-08-07', usage({ inputTokens: 10_000, cacheReadTokens: 1000, outputTokens: 2000 })).costUsd).toBe(0.031375);
    // gpt-5.4 at 272000 prompt tokens: 272000 × 2.5 + 1000 × 15 = 695000 µ$
    expect(table.cost('openai', 'gpt-5.4', usage({ inputTokens: 272_000, outputTokens: 1000 })).costUsd).toBe(0.695);
    // past it, the whole request at 2× input and cached, 1.5× output:
    // 172001 × 5 + 100000 × 0.5 + 1000 × 22.5 = 860005 + 50000 + 22500 = 932505 µ$
    expect(table.cost('openai', 'gpt-5.4', usage({ inputTokens: 272_001, cacheReadTokens: 100_000, outputTokens: 1000 })).costUsd).toBe(0.932505);
    // gpt-6.2-sol: 6000 × 2 + 4000 × 0.1 + 1000 × 10 = 12000 + 400 + 10000 = 22400 µ$
    expect(table.cost('openai', 'gpt-6.2-sol', usage({ inputTokens: 10_000, cacheReadTokens: 4000, outputTokens: 1000 })).costUsd).toBe(0.0224);
    // gemini-3-pro-preview past 200k: 200001 × 4 + 1000 × 18 = 800004 + 18000 = 818004 µ$
    expect(table.cost('google', 'gemini-3-pro-preview', usage({ inputTokens: 200_001, outputTokens: 1000 })).costUsd).toBe(0.818004);
    // gemini-3-flash: 1000 × 0.5 + 1000 × 0.05 + 100 × 3 = 500 + 50 + 300 = 850 µ$
    expect(table.cost('google', 'gemini-3-flash', usage({ inputTokens: 2000, cacheReadTokens: 1000, outputTokens: 100 })).costUsd).toBe(0.00085);
    // claude-opus-4-6 on Bedrock: 1000 × 5 + 2000 × 6.25 + 4000 × 0.5 + 500 × 25 = 5000 + 12500 + 2000 + 12500 = 32000 µ$
    const opus = usage({ inputTokens: 7000, cacheWriteTokens: 2000, cacheReadTokens: 4000, outputTokens: 500 });
    expect(table.cost('anthropic', 'us.anthropic.claude-opus-4-6-v1', opus).costUsd).toBe(0.032);
    // claude-sonnet-5-5 (cache reads 0.1 since 2026-10-07): 1000 × 2 + 2000 × 2.5 + 4000 × 0.1 + 500 × 10 = 2000 + 5000 + 400 + 5000 = 12400 µ$
    expect(table.cost('anthropic', 'claude-sonnet-5-5', opus).costUsd).toBe(0.0124);
  });

  it('falls back to input price × the provider cached multiplier when an entry has no cached price', () => {
    const entry = { provider: 'openai' as const, model: 'house-model', input_per_million: 2, output_per_million: 4 };
    const u = usage({ inputTokens: 1000, cacheReadTokens: 400, outputTokens: 100 });
    // 600 × 2 + 400 × (2 × 0.5) + 100 × 4 = 1200 + 400 + 400 = 2000 µ$
    expect(new PriceTable([entry], { ...DEFAULT_CACHE_SETTINGS }).cost('openai', 'house-model', u).costUsd).toBe(0.002);
    // With a 0.25 multiplier: 1200 + 400 × 0.5 + 400 = 1800 µ$
    const custom = { ...DEFAULT_CACHE_SETTINGS, openai: { ttl_seconds: 300, cached_multiplier: 0.25 } };
    expect(new PriceTable([entry], custom).cost('openai', 'house-model', u).costUsd).toBe(0.0018);
  });

  it('does not drift: three tokens at 0.1 $/M cost exactly 3e-7, and a large bill is exact to 1e-10', () => {
    expect(table.cost('openai', 'gpt-4.1-nano', usage({ inputTokens: 3 })).costUsd).toBe(3e-7);
    // 123456789 × 0.075 + 987654321 × 0.6 = 9259259.175 + 592592592.6 = 601851851.775 µ$
    expect(table.cost('openai', 'gpt-4o-mini', usage({ inputTokens: 123_456_789, cacheReadTokens: 123_456_789, outputTokens: 987_654_321 })).costUsd).toBe(601.851851775);
  });

  it('costs provider local at 0 and counts it as priced; an unknown model costs 0, unpriced', () => {
    expect(table.cost('local', 'llama-3.1-8b-instruct', usage({ inputTokens: 1000, outputTokens: 1000 }))).toEqual({ costUsd: 0, priced: true });
    expect(table.cost('openai', 'gpt-9-ultra', usage({ inputTokens: 1000, outputTokens: 1000 }))).toEqual({ costUsd: 0, priced: false });
    // A model is priced on its own provider's routes only.
    expect(table.cost('openai', 'gemini-2.5-flash', usage({ inputTokens: 1000 }))).toEqual({ costUsd: 0, priced: false });
  });

  it("costs a configured route's provider by its route's wire format, openai's when it has none", () => {
    const kimi = { provider: 'kimi', model: 'kimi-k2', input_per_million: 1, output_per_million: 4, cached_input_per_million: 0.1, cache_write_per_million: 1.25 };
    const u = usage({ inputTokens: 1000, cacheReadTokens: 200, cacheWriteTokens: 300, outputTokens: 100 });
    // Anthropic's formula: 500 uncached × 1 + 300 written × 1.25 + 200 read × 0.1 + 100 × 4 = 500 + 375 + 20 + 400 = 1295 µ$
    const anthropicWire = new PriceTable([...DEFAULT_PRICES, kimi], { ...DEFAULT_CACHE_SETTINGS }, new Map([['kimi', 'anthropic']]));
    expect(anthropicWire.cost('kimi', 'kimi-k2', u).costUsd).toBe(0.001295);
    // OpenAI's (no cache writes): (1000 − 200) × 1 + 200 × 0.1 + 100 × 4 = 800 + 20 + 400 = 1220 µ$
    const noWire = new PriceTable([...DEFAULT_PRICES, kimi], { ...DEFAULT_CACHE_SETTINGS });
    expect(noWire.cost('kimi', 'kimi-k2', u).costUsd).toBe(0.00122);
  });

  it('costs provider local at 0 even with a price entry and a wire format of its own', () => {
    const priced = { provider: 'local', model: 'llama-3.1-8b-instruct', input_per_million: 5, output_per_million: 5 };
    const local = new PriceTable([...DEFAULT_PRICES, priced], { ...DEFAULT_CACHE_SETTINGS }, new Map([['local', 'anthropic']]));
    expect(local.cost('local', 'llama-3.1-8b-instruct', usage({ inputTokens: 1000, outputTokens: 1000 }))).toEqual({ costUsd: 0, priced: true });
  });
});
