// A call's cost (docs/spans-and-pricing.md, "Cost formulas") on the normalised TokenUsage: its tokens by the
// formula of the wire format that prices its provider (provider-pricing.ts, each formula in
// wire-formats/<wire>/cost.ts), plus its billed units (images, audio, characters).
//
// Arithmetic is exact: a price per million tokens is a price in micro-dollars per token, which is turned
// into an integer count of pico-dollars (10⁻¹² USD) per token; products and sums are BigInt; the result is
// divided once and rounded to 10⁻¹⁰ USD. Summing float products instead drifts (0.1 + 0.2 …) and, over the
// millions of spans a budget adds up, shows in totals. See docs/decisions/0203-cost-arithmetic.md.

import type { WireFormat } from '../../../contracts/routes.ts';
import type { TokenUsage } from '../usage/usage.ts';
import type { CacheSettings, PriceEntry } from '../../../contracts/price-entry.ts';
import { picoPerToken, tokens, type TokenRates } from '../wire-formats/token-rates.ts';
import { WIRE_ADAPTERS } from '../wire-formats/wire-adapters.ts';
import { pricingOf } from './provider-pricing.ts';

/** The rates that apply to one request: the long-context tier applies to the whole request past its threshold. */
function ratesFor(entry: PriceEntry, promptTokens: number, cache: CacheSettings): TokenRates {
  const tier = entry.long_context !== undefined && promptTokens > entry.long_context.threshold_tokens ? entry.long_context : undefined;
  const input = tier?.input_per_million ?? entry.input_per_million;
  const output = tier?.output_per_million ?? entry.output_per_million;
  const explicitCached = tier !== undefined ? tier.cached_input_per_million : entry.cached_input_per_million;
  const cachedRead = explicitCached !== undefined ? picoPerToken(explicitCached) : picoPerToken(input, cache.cached_multiplier);
  const write5m = entry.cache_write_per_million ?? input;
  const write1h = entry.cache_write_1h_per_million ?? write5m;
  return {
    input: picoPerToken(input),
    cachedRead,
    cacheWrite5m: picoPerToken(write5m),
    cacheWrite1h: picoPerToken(write1h),
    output: picoPerToken(output),
  };
}

/** Pico-dollars to USD, rounded half up to 10⁻¹⁰ USD. */
function picoToUsd(pico: bigint): number {
  return Number((pico + 50n) / 100n) / 1e10;
}

/** Pico-dollars for a price in USD per one unit (an image, a minute, a million characters), bounded by MAX_USD_PER_UNIT. */
function picoPerUnit(usd: number): bigint {
  const pico = Math.round(usd * 1e12);
  if (!Number.isSafeInteger(pico) || pico < 0) throw new RangeError(`unit price of ${usd} USD is outside the range costs are computed in`);
  return BigInt(pico);
}

/** The image price of `entry` for a size and quality: an exact (size, quality) entry wins over a size-only one. */
function imagePrice(entry: PriceEntry, size: string, quality: string | undefined): number | undefined {
  const prices = entry.image_prices ?? [];
  const sized = prices.filter((price) => price.size === size);
  return (sized.find((price) => quality !== undefined && price.quality === quality) ?? sized.find((price) => price.quality === undefined))?.usd;
}

/**
 * The non-token part of a call's cost (ADR 0910): images × their size and quality's price, seconds of audio ×
 * the price per minute / 60, characters × the price per million / 10⁶, in pico-dollars; or why it has no price.
 * A unit the entry has no price field for is billed through the call's tokens (gpt-image-* bill tokens while
 * the span still counts their images); with no tokens either, nothing would bill it, so the call is unpriced.
 */
function unitsPico(entry: PriceEntry, usage: TokenUsage): bigint | { problem: string } {
  const units = usage.units;
  if (units === undefined) return 0n;
  const hasTokens = usage.inputTokens > 0 || usage.outputTokens > 0;
  const unpriced = (what: string) => ({ problem: `${entry.model} has no price for ${what}` });
  let pico = 0n;
  const images = tokens(units.images ?? 0);
  if (images > 0n && (entry.image_prices !== undefined || !hasTokens)) {
    const size = units.imageSize ?? 'auto';
    const usd = imagePrice(entry, size, units.imageQuality);
    if (usd === undefined) return unpriced(`images of size ${size} and quality ${units.imageQuality ?? '(none)'}`);
    pico += images * picoPerUnit(usd);
  }
  // Milliseconds, so a fractional duration is billed exactly; divided once, rounded half up to a pico-dollar.
  const ms = tokens(Math.round((units.audioSeconds ?? 0) * 1000));
  if (ms > 0n && entry.audio_per_minute !== undefined) pico += (ms * picoPerUnit(entry.audio_per_minute) + 30_000n) / 60_000n;
  else if (ms > 0n && !hasTokens) return unpriced(`audio (audio_per_minute)`);
  const characters = tokens(units.characters ?? 0);
  if (characters > 0n && entry.characters_per_million !== undefined) pico += characters * picoPerToken(entry.characters_per_million);
  else if (characters > 0n && !hasTokens) return unpriced(`characters (characters_per_million)`);
  return pico;
}

/**
 * A call's cost in USD, tokens and billed units together; or why it has no price (it is then recorded unpriced).
 * `wire` is the usage format of a configured route's provider (its cached and cache-write tokens are counted as
 * that format counts them); default openai.
 */
export function costUsd(provider: string, entry: PriceEntry, usage: TokenUsage, cache: CacheSettings, wire?: WireFormat): { usd: number } | { problem: string } {
  const formula = pricingOf(provider, wire);
  if (formula === 'free') return { usd: 0 };
  const token = WIRE_ADAPTERS[formula].tokenPico(usage, ratesFor(entry, usage.inputTokens, cache), entry);
  const units = unitsPico(entry, usage);
  if (typeof units !== 'bigint') return units;
  return { usd: picoToUsd(token + units) };
}
