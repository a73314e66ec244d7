import type { TokenUsage } from '../../usage/usage.ts';
import { tokens, type TokenRates } from '../token-rates.ts';

/** Gemini: uncached prompt × input + cached × cached price + (candidates + thoughts) × output. */
export function geminiPico(usage: TokenUsage, rates: TokenRates): bigint {
  const input = tokens(usage.inputTokens);
  const cached = tokens(Math.min(usage.cacheReadTokens, usage.inputTokens));
  return (input - cached) * rates.input + cached * rates.cachedRead + tokens(usage.outputTokens) * rates.output;
}
