// Rate limits of a budget policy (ADR 1309): the counters of requests per minute, tokens per minute and calls
// in flight, per subject, behind one small interface so that they can be kept in this process (memory, a
// synchronous Map: memory-rate-windows.ts) or shared by every engine of a namespace in a store that answers in
// one round trip with an atomic server-side script (Redis). The request path asks `admit` once per call before
// the upstream call and `settle` once when the call ends, whatever its end.
//
// The windows are a GCRA (generic cell rate algorithm): per subject and dimension one number, the theoretical
// arrival time (TAT). A limit of L per minute spends 60 000 / L ms of the TAT per unit; a cost of n fits when
// max(TAT, now) + n · 60 000 / L − now ≤ 60 000. A full minute's allowance may go at once, then it comes back
// evenly (one unit every 60 000 / L ms); nothing else is stored, and the store needs no sweep of old windows.

/** The limits of one policy, applied to each subject it matches. Absent: that dimension is not limited. */
export interface RateLimits {
  readonly requestsPerMinute?: number;
  /** Input + output tokens: reserved at admission, settled to the real count when the call ends. */
  readonly tokensPerMinute?: number;
  /** Calls in flight at once. */
  readonly concurrent?: number;
}

export type RateDimension = 'requests' | 'tokens' | 'concurrent';

/** One per-minute window as the OpenAI-style `x-ratelimit-*` headers show it. */
export interface RateWindowState {
  limit: number;
  /** Whole units that would still fit now (after this call, when it was admitted). */
  remaining: number;
  /** ms until the window is back to its full allowance. */
  resetMs: number;
}

export interface RateAdmission {
  /** null: admitted and counted (settle it once); else the limit that refused it, and nothing was counted. */
  refusedBy: RateDimension | null;
  /** Refused: ms until this call would fit (a concurrent refusal cannot know: 1 000). 0 when admitted. */
  retryAfterMs: number;
  /** Present when the limits have requestsPerMinute / tokensPerMinute. */
  requests: RateWindowState | null;
  tokens: RateWindowState | null;
}

/** The window every per-minute limit is counted over. */
export const RATE_WINDOW_MS = 60_000;
/** What a concurrent refusal tells the caller to wait: a call in flight may end at any moment. */
export const CONCURRENT_RETRY_MS = 1_000;
/** Float slack for the GCRA sums (60 000 / L is rarely exact); far below a millisecond. */
export const RATE_EPSILON_MS = 1e-6;

/** A per-minute window of `limit` whose theoretical arrival time is `tat`, as the headers show it at `now`. */
export function rateWindowState(limit: number, tat: number, now: number): RateWindowState {
  const ahead = tat > now ? tat - now : 0;
  return {
    limit,
    remaining: Math.max(0, Math.floor(((RATE_WINDOW_MS - ahead) * limit) / RATE_WINDOW_MS + RATE_EPSILON_MS)),
    resetMs: Math.max(0, Math.ceil(ahead - RATE_EPSILON_MS)),
  };
}

export interface RateWindows {
  /**
   * Admits one call of `subject` that reserves `reservedTokens` (estimated input + max output), counting it
   * in every dimension `limits` sets, or refuses it and counts nothing: all or none, atomically. `now` is
   * epoch ms (the in-memory windows use it; a shared store may use its own clock).
   */
  admit(subject: string, limits: RateLimits, reservedTokens: number, now: number): RateAdmission | Promise<RateAdmission>;
  /**
   * Ends an admitted call, exactly once, with the `limits` it was admitted under: frees its concurrent slot
   * and replaces its reserved tokens by `usedTokens` (null: unknown, the reservation stands). Never throws;
   * an async store may settle in the background.
   */
  settle(subject: string, limits: RateLimits, reservedTokens: number, usedTokens: number | null, now: number): void | Promise<void>;
  /** A shared store's state for the health answer (ADR 1311); absent: windows in this process. */
  readonly store?: RateStoreHealth;
}

export interface RateStoreHealth {
  /** e.g. `redis at host:port`. */
  store: string;
  /** ISO time the store stopped answering; null while it answers. */
  unreachableSince: string | null;
}

/**
 * A shared store's admission while the store cannot be reached past the grace and budgets.unreachable is
 * closed (ADR 1311): nothing was counted; the call is answered 503 as a closed ledger's are.
 */
export class RateStoreUnreachable extends Error {
  readonly store: string;
  /** epoch ms: when the store last stopped answering. */
  readonly since: number;
  constructor(store: string, since: number, cause: string) {
    super(`the rate-limit store (${store}) has not been reachable since ${new Date(since).toISOString()}: ${cause}`);
    this.name = 'RateStoreUnreachable';
    this.store = store;
    this.since = since;
  }
}
