// The integer arithmetic every cost formula shares (ADR 0203): prices per million tokens as pico-dollars
// (10⁻¹² USD) per token, token counts as BigInt, so sums over millions of spans do not drift.

/** The rates that apply to one request (pricing/cost.ts picks the long-context tier), in pico-dollars per token. */
export interface TokenRates {
  input: bigint;
  cachedRead: bigint;
  cacheWrite5m: bigint;
  cacheWrite1h: bigint;
  output: bigint;
}

/**
 * Pico-dollars per token for a price in USD per million tokens (sub-pico fractions are rounded). Prices are
 * bounded where they enter (MAX_PRICE_PER_MILLION); one that is not still fails here with a message that
 * names it, not with BigInt's RangeError about Infinity.
 */
export function picoPerToken(perMillion: number, multiplier = 1): bigint {
  const pico = Math.round(perMillion * multiplier * 1e6);
  if (!Number.isSafeInteger(pico) || pico < 0) {
    throw new RangeError(`price of ${perMillion} USD per million tokens is outside the range costs are computed in`);
  }
  return BigInt(pico);
}

/** A token count as BigInt: negative, fractional or non-finite counts are read as their whole non-negative part. */
export function tokens(count: number): bigint {
  return BigInt(count > 0 && Number.isFinite(count) ? Math.trunc(count) : 0);
}
