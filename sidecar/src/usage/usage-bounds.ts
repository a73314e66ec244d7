// Token counts come from the upstream's response, which the proxy does not control: a broken or hostile
// upstream (or a fake behind a misconfigured baseUrl) can report 1.7e308 tokens. Costed as given, that is an
// infinite cost in the span store and a sum that no budget survives. A count past what any model can take
// or produce in one call is not a usage figure; the call meter refuses it and marks the span (ADR 1001).

import type { TokenUsage } from './usage.ts';

/**
 * Most tokens of any one kind a single call can plausibly report: ten times the largest context window
 * offered today (10M tokens), so no real call comes near it, while its cost at the highest accepted price
 * stays a finite number of dollars.
 */
export const MAX_PLAUSIBLE_TOKENS = 100_000_000;

const COUNTS: readonly [keyof TokenUsage, string][] = [
  ['inputTokens', 'input'],
  ['outputTokens', 'output'],
  ['cacheReadTokens', 'cache-read'],
  ['cacheWriteTokens', 'cache-write'],
  ['cacheWrite1hTokens', '1-hour cache-write'],
  ['reasoningTokens', 'reasoning'],
  ['totalTokens', 'total'],
];

/** Why `usage` cannot be real (the first count out of bounds), or null when every count is plausible. */
export function implausibleUsage(usage: TokenUsage): string | null {
  for (const [field, label] of COUNTS) {
    const count = usage[field];
    if (!Number.isFinite(count) || count < 0) return `upstream reported ${count} ${label} tokens, which is not a token count`;
    if (count > MAX_PLAUSIBLE_TOKENS) {
      return `upstream reported ${count} ${label} tokens, more than the ${MAX_PLAUSIBLE_TOKENS} one call can use`;
    }
  }
  return null;
}
