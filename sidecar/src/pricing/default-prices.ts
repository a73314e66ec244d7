// Built-in list prices, USD per million tokens, from the providers' pricing pages (dated 2025–2026; the table
// is in docs/spans-and-pricing.md). One entry per model; `aliases` lists its ids on other routes that
// normaliseModelId does not reduce to the canonical id by itself, plus the dated ids for readability.
//
// Anthropic 1-hour cache writes cost 2× the input price; the prices we took them from list them for Opus 4/4.1
// and Sonnet 4/4.5 only, and the same rule gives Haiku 4.5 (2), Claude 3.5 Haiku (1.6) and Opus 4.5 (10).

import type { PriceEntry } from '../../../contracts/price-entry.ts';

function claude(
  model: string,
  snapshot: string,
  prices: { input: number; cached: number; write5m: number; write1h: number; output: number },
  extraAliases: string[] = [],
): PriceEntry {
  return {
    provider: 'anthropic',
    model,
    aliases: [
      `${model}-${snapshot}`, // Anthropic API
      `${model}@${snapshot}`, // Vertex AI
      `anthropic.${model}-${snapshot}-v1:0`, // Bedrock
      `us.anthropic.${model}-${snapshot}-v1:0`, // Bedrock cross-region inference profile
      ...extraAliases,
    ],
    input_per_million: prices.input,
    cached_input_per_million: prices.cached,
    cache_write_per_million: prices.write5m,
    cache_write_1h_per_million: prices.write1h,
    output_per_million: prices.output,
  };
}

function gemini(model: string, input: number, cached: number, output: number, extra: Partial<PriceEntry> = {}): PriceEntry {
  return {
    provider: 'google',
    model,
    aliases: [`google/${model}`, `${model}-001`],
    input_per_million: input,
    cached_input_per_million: cached,
    output_per_million: output,
    ...extra,
  };
}

function openai(model: string, input: number, cached: number, output: number, aliases: string[] = []): PriceEntry {
  return { provider: 'openai', model, aliases, input_per_million: input, cached_input_per_million: cached, output_per_million: output };
}

export const DEFAULT_PRICES: readonly PriceEntry[] = [
  gemini('gemini-2.5-pro', 1.25, 0.125, 10, {
    long_context: { threshold_tokens: 200_000, input_per_million: 2.5, output_per_million: 15, cached_input_per_million: 0.25 },
  }),
  gemini('gemini-2.5-flash', 0.3, 0.03, 2.5),
  gemini('gemini-2.5-flash-lite', 0.1, 0.01, 0.4),

  openai('gpt-4o', 2.5, 1.25, 10, ['gpt-4o-2024-08-06', 'gpt-4o-2024-11-20']),
  openai('gpt-4o-mini', 0.15, 0.075, 0.6, ['gpt-4o-mini-2024-07-18']),
  openai('gpt-4.1', 2, 0.5, 8, ['gpt-4.1-2025-04-14']),
  openai('gpt-4.1-mini', 0.4, 0.1, 1.6, ['gpt-4.1-mini-2025-04-14']),
  openai('gpt-4.1-nano', 0.1, 0.025, 0.4, ['gpt-4.1-nano-2025-04-14']),
  openai('o3', 2, 0.5, 8, ['o3-2025-04-16']),
  openai('o4-mini', 1.1, 0.275, 4.4, ['o4-mini-2025-04-16']),

  claude('claude-opus-4', '20250514', { input: 15, cached: 1.5, write5m: 18.75, write1h: 30, output: 75 }, ['claude-opus-4-0', 'claude-4-opus']),
  claude('claude-opus-4-1', '20250805', { input: 15, cached: 1.5, write5m: 18.75, write1h: 30, output: 75 }, ['claude-opus-4.1']),
  claude('claude-sonnet-4', '20250514', { input: 3, cached: 0.3, write5m: 3.75, write1h: 6, output: 15 }, ['claude-sonnet-4-0', 'claude-4-sonnet']),
  claude('claude-sonnet-4-5', '20250929', { input: 3, cached: 0.3, write5m: 3.75, write1h: 6, output: 15 }, ['claude-sonnet-4.5']),
  claude('claude-haiku-4-5', '20251001', { input: 1, cached: 0.1, write5m: 1.25, write1h: 2, output: 5 }, ['claude-haiku-4.5']),
  claude('claude-3-5-haiku', '20241022', { input: 0.8, cached: 0.08, write5m: 1, write1h: 1.6, output: 4 }, ['claude-3.5-haiku']),
  claude('claude-opus-4-5', '20251101', { input: 5, cached: 0.5, write5m: 6.25, write1h: 10, output: 25 }, ['claude-opus-4.5']),
];
