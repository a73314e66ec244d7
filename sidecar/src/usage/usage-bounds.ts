// Token counts come from the upstream's response, which the proxy does not control: a broken or hostile
// upstream (or a fake behind a misconfigured baseUrl) can report 1.7e308 tokens. Costed as given, that is an
// infinite cost in the span store and a sum that no budget survives. A count past what any model can take
// or produce in one call is not a usage figure; the call meter refuses it and marks the span (ADR 1001).

import type { BilledUnits, TokenUsage } from './usage.ts';

/**
 * Most tokens of any one kind a single call can plausibly report: ten times the largest context window
 * offered today (10M tokens), so no real call comes near it, while its cost at the highest accepted price
 * stays a finite number of dollars.
 */
export const MAX_PLAUSIBLE_TOKENS = 100_000_000;

const COUNTS: readonly [Exclude<keyof TokenUsage, 'units'>, string][] = [
  ['inputTokens', 'input'],
  ['outputTokens', 'output'],
  ['cacheReadTokens', 'cache-read'],
  ['cacheWriteTokens', 'cache-write'],
  ['cacheWrite1hTokens', '1-hour cache-write'],
  ['reasoningTokens', 'reasoning'],
  ['totalTokens', 'total'],
];

// Billed units share the bound: far past any one call, and still a finite cost at the highest unit price.
const UNITS: readonly [keyof BilledUnits, string][] = [
  ['images', 'images'],
  ['audioSeconds', 'seconds of audio'],
  ['characters', 'characters'],
  ['imageInputTokens', 'image input tokens'],
];

function implausibleCount(count: unknown, label: string, kind = 'a count'): string | null {
  if (typeof count !== 'number' || !Number.isFinite(count) || count < 0) return `upstream reported ${String(count)} ${label}, which is not ${kind}`;
  if (count > MAX_PLAUSIBLE_TOKENS) return `upstream reported ${count} ${label}, more than the ${MAX_PLAUSIBLE_TOKENS} one call can use`;
  return null;
}

/** Why `usage` cannot be real (the first count out of bounds), or null when every count is plausible. */
export function implausibleUsage(usage: TokenUsage): string | null {
  for (const [field, label] of COUNTS) {
    const problem = implausibleCount(usage[field], `${label} tokens`, 'a token count');
    if (problem !== null) return problem;
  }
  for (const [field, label] of UNITS) {
    const count = usage.units?.[field];
    const problem = count === undefined ? null : implausibleCount(count, label);
    if (problem !== null) return problem;
  }
  return null;
}
