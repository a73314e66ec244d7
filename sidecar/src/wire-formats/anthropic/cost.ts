import type { TokenUsage } from '../../usage/usage.ts';
import { tokens, type TokenRates } from '../token-rates.ts';

/**
 * Anthropic: uncached input × input + 5-minute writes × write price + 1-hour writes × 1-hour price
 * + cache reads × read price + output × output. inputTokens holds all three input kinds; split them back.
 */
export function anthropicPico(usage: TokenUsage, rates: TokenRates): bigint {
  const read = tokens(usage.cacheReadTokens);
  const write = tokens(usage.cacheWriteTokens);
  const write1h = tokens(Math.min(usage.cacheWrite1hTokens, usage.cacheWriteTokens));
  let uncached = tokens(usage.inputTokens) - read - write;
  if (uncached < 0n) uncached = 0n;
  return uncached * rates.input + (write - write1h) * rates.cacheWrite5m + write1h * rates.cacheWrite1h + read * rates.cachedRead + tokens(usage.outputTokens) * rates.output;
}
