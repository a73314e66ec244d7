// What a caller of a rate-limited user sees (ADR 1309): OpenAI's `x-ratelimit-*` headers on every answer, so
// the SDKs and dashboards that read OpenAI's own limits read ours; and a refusal: HTTP 429 with Retry-After in
// whole seconds until the call would fit, in the error shape of the API called (`rate_limit_exceeded`).
// Unlike a spent budget, a rate limit lifts within the minute, so the SDKs may retry (no x-should-retry).

import type { ServerResponse } from 'node:http';
import type { BudgetLevel } from '../../../contracts/budget-policies.ts';
import type { RateAdmission, RateDimension, RateLimits } from '../budgets/rate-windows.ts';

export const RATE_LIMIT_EXCEEDED = 'rate_limit_exceeded';

/** Calls refused per level and limit since the process started, for tollgate_rate_limited_total (ADR 1313). */
export const RATE_LIMITED: Record<BudgetLevel, Record<RateDimension, number>> = {
  user: { requests: 0, tokens: 0, concurrent: 0 },
  team: { requests: 0, tokens: 0, concurrent: 0 },
  workload: { requests: 0, tokens: 0, concurrent: 0 },
  namespace: { requests: 0, tokens: 0, concurrent: 0 },
};

export interface RateRefusal {
  userId: string;
  /** The policy whose limit refused the call, at its level (ADR 1313). */
  policy: string;
  level: BudgetLevel;
  /** The user id, or the group key (`@team:<name>`, `@workload:<policy>`, `@namespace:<policy>`) of that level. */
  subject: string;
  limits: RateLimits;
  /** The tokens this call would have held (estimated input + max output). */
  reservedTokens: number;
  admission: RateAdmission & { refusedBy: RateDimension };
  /** Whole seconds, at least 1: the Retry-After value. */
  retryAfterSeconds: number;
}

/**
 * A duration as OpenAI writes its x-ratelimit-reset-* headers (Go's time.Duration form): "12ms", "6s",
 * "1m0s", "2m59.56s", "1h0m0s".
 */
export function formatResetDuration(ms: number): string {
  if (!(ms > 0)) return '0s';
  const whole = Math.ceil(ms);
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const millis = whole % 60_000;
  const seconds = `${Math.floor(millis / 1000)}${
    millis % 1000 === 0
      ? ''
      : `.${String(millis % 1000)
          .padStart(3, '0')
          .replace(/0+$/, '')}`
  }s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  return minutes > 0 ? `${minutes}m${seconds}` : seconds;
}

/**
 * The windows the call's levels limit, as OpenAI names them; nothing for a dimension none limits. Of several
 * levels the headers show the one with the fewest remaining (RateAdmission): what the caller can still send.
 */
export function setRateLimitHeaders(res: ServerResponse, admission: RateAdmission): void {
  if (res.headersSent) return;
  const { requests, tokens } = admission;
  if (requests !== null) {
    res.setHeader('x-ratelimit-limit-requests', String(requests.limit));
    res.setHeader('x-ratelimit-remaining-requests', String(requests.remaining));
    res.setHeader('x-ratelimit-reset-requests', formatResetDuration(requests.resetMs));
  }
  if (tokens !== null) {
    res.setHeader('x-ratelimit-limit-tokens', String(tokens.limit));
    res.setHeader('x-ratelimit-remaining-tokens', String(tokens.remaining));
    res.setHeader('x-ratelimit-reset-tokens', formatResetDuration(tokens.resetMs));
  }
}

const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
] as const;

/**
 * When the user's own limits are on the answer, an upstream's x-ratelimit-* (its organisation's limits, far
 * larger) are dropped from the relayed headers, which would otherwise replace them: the caller sees one account.
 */
export function keepOwnRateLimitHeaders(res: ServerResponse, relayed: Record<string, unknown>): void {
  if (!res.hasHeader('x-ratelimit-limit-requests') && !res.hasHeader('x-ratelimit-limit-tokens')) return;
  for (const name of RATE_LIMIT_HEADERS) delete relayed[name];
}

/** Whose limit it is: `user "ann"`, or `team "eng"` / `workload "p"` / `namespace "p"` named by its group key. */
function rateHolder(refusal: RateRefusal): string {
  if (refusal.level === 'user') return `user ${JSON.stringify(refusal.userId)}`;
  return `${refusal.level} ${JSON.stringify(refusal.subject.slice(refusal.subject.indexOf(':') + 1))}`;
}

/**
 * Names the level, the user, the limit, the policy and when the call would fit; the same text is the span's
 * error. A limit above the user starts `rate limit of team "eng" (user "ann"): …` so the level is plain.
 */
export function rateRefusalMessage(refusal: RateRefusal): string {
  const text = rateRefusalText(refusal);
  if (refusal.level === 'user') return text;
  return `rate limit of ${rateHolder(refusal)} (user ${JSON.stringify(refusal.userId)}): ${text}`;
}

function rateRefusalText(refusal: RateRefusal): string {
  const { policy, limits, reservedTokens, admission, retryAfterSeconds } = refusal;
  const who = refusal.level === 'user' ? rateHolder(refusal) : `the ${refusal.level}`;
  const of = `of policy ${JSON.stringify(policy)}`;
  const wait = `try again in ${retryAfterSeconds}s`;
  switch (admission.refusedBy) {
    case 'requests':
      return `${who} has made the ${limits.requestsPerMinute} requests per minute ${of}; ${wait}`;
    case 'tokens': {
      const limit = limits.tokensPerMinute!;
      const held = `this call may use up to ${reservedTokens} tokens (its input and its max output tokens)`;
      if (reservedTokens > limit) return `${held}, more than the ${limit} tokens per minute ${of}: lower its max_tokens`;
      return `${who} has ${admission.tokensLeft ?? admission.tokens?.remaining ?? 0} of the ${limit} tokens per minute ${of} left and ${held}; ${wait}`;
    }
    case 'concurrent':
      return `${who} has ${limits.concurrent} calls in flight, the concurrent limit ${of}; ${wait}`;
  }
}

export function isRateRefusal(refusal: object): refusal is RateRefusal {
  return 'admission' in refusal;
}
