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
//
// A call may fall under the rate limits of several levels (ADR 1313): its user's own, its team's, its workloads'
// and its namespace's, each a subject of its own (a user id or a group key) whose window all its members' calls
// share. It is admitted only if every level has room, and counted in all of them or in none.

/** The limits of one policy, applied to each subject it matches. Absent: that dimension is not limited. */
export interface RateLimits {
  readonly requestsPerMinute?: number;
  /** Input + output tokens: reserved at admission, settled to the real count when the call ends. */
  readonly tokensPerMinute?: number;
  /** Calls in flight at once. */
  readonly concurrent?: number;
}

export type RateDimension = 'requests' | 'tokens' | 'concurrent';

/** One level a call is counted under: its user id or a group key (`@team:<name>`, …), with that policy's limits. */
export interface RateSubject {
  readonly key: string;
  readonly limits: RateLimits;
}

/** One subject's windows before a call: theoretical arrival times (epoch ms; at or before now: full) and calls in flight. */
export interface WindowsBefore {
  rt: number;
  tt: number;
  n: number;
}

/** One per-minute window as the OpenAI-style `x-ratelimit-*` headers show it. */
export interface RateWindowState {
  limit: number;
  /** Whole units that would still fit now (after this call, when it was admitted). */
  remaining: number;
  /** ms until the window is back to its full allowance. */
  resetMs: number;
}

export interface RateAdmission {
  /** null: admitted and counted at every level (settle it once); else the limit that refused it, and nothing was counted. */
  refusedBy: RateDimension | null;
  /** Refused: the index of the first subject (innermost level) whose limit refused it. */
  refusedAt?: number;
  /** Refused by tokens: the whole tokens that level has left (the headers may show a tighter level). */
  tokensLeft?: number;
  /**
   * True when a shared store's windows could not be reached and this process's admitted the call (ADR 1311):
   * it is settled there too, whatever the store's state when it ends. Absent: counted where `admit` counts.
   */
  countedHere?: true;
  /** Refused: ms until this call would fit at every level (a concurrent refusal cannot know: 1 000). 0 when admitted. */
  retryAfterMs: number;
  /**
   * Present when a level limits requestsPerMinute / tokensPerMinute: the level with the fewest remaining (on a
   * tie the innermost), after this call when it was admitted, as it stands when it was refused.
   */
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

/** The tighter of two windows as the headers show them: fewer remaining; on a tie the first (inner) one. */
function tighter(a: RateWindowState | null, b: RateWindowState): RateWindowState {
  return a === null || b.remaining < a.remaining ? b : a;
}

/** A requests TAT after one more call under `limits` (unchanged when requests are not limited). */
export function requestsTatAfter(rt: number, limits: RateLimits, now: number): number {
  const rpm = limits.requestsPerMinute;
  return rpm === undefined ? rt : Math.max(rt, now) + RATE_WINDOW_MS / rpm;
}

/** A tokens TAT after `tokens` more under `limits` (unchanged when tokens are not limited). */
export function tokensTatAfter(tt: number, limits: RateLimits, tokens: number, now: number): number {
  const tpm = limits.tokensPerMinute;
  return tpm === undefined ? tt : Math.max(tt, now) + (tokens * RATE_WINDOW_MS) / tpm;
}

/** Which limit of one level refuses a call of `tokens` (null: it fits), and how long until it would fit. */
function levelVerdict(before: WindowsBefore, limits: RateLimits, tokens: number, now: number): { refusedBy: RateDimension | null; waitMs: number } {
  const tpm = limits.tokensPerMinute;
  const requestsWait = limits.requestsPerMinute === undefined ? 0 : requestsTatAfter(before.rt, limits, now) - now - RATE_WINDOW_MS;
  const tokensWait = tpm === undefined ? 0 : tokensTatAfter(before.tt, limits, tokens, now) - now - RATE_WINDOW_MS;
  const concurrentFull = limits.concurrent !== undefined && before.n >= limits.concurrent;
  const refusedBy: RateDimension | null = requestsWait > RATE_EPSILON_MS ? 'requests' : tokensWait > RATE_EPSILON_MS ? 'tokens' : concurrentFull ? 'concurrent' : null;
  if (refusedBy === null) return { refusedBy, waitMs: 0 };
  // Wait for the slowest dimension; a call over the whole tokens limit never fits.
  let waitMs = Math.max(requestsWait, tokensWait, concurrentFull ? CONCURRENT_RETRY_MS : 0);
  if (tpm !== undefined && tokens > tpm) waitMs = Math.max(waitMs, RATE_WINDOW_MS);
  return { refusedBy, waitMs };
}

/** Whether one level has room for a call of `tokens`: the check the store's script makes alike. Allocates nothing. */
export function levelFits(before: WindowsBefore, limits: RateLimits, tokens: number, now: number): boolean {
  const rpm = limits.requestsPerMinute;
  const tpm = limits.tokensPerMinute;
  if (rpm !== undefined && requestsTatAfter(before.rt, limits, now) - now - RATE_WINDOW_MS > RATE_EPSILON_MS) return false;
  if (tpm !== undefined && tokensTatAfter(before.tt, limits, tokens, now) - now - RATE_WINDOW_MS > RATE_EPSILON_MS) return false;
  return limits.concurrent === undefined || before.n < limits.concurrent;
}

/** The admission of a call counted at one level, from that level's windows before it. */
export function admittedAt(before: WindowsBefore, limits: RateLimits, tokens: number, now: number): RateAdmission {
  const rpm = limits.requestsPerMinute;
  const tpm = limits.tokensPerMinute;
  return {
    refusedBy: null,
    retryAfterMs: 0,
    requests: rpm === undefined ? null : rateWindowState(rpm, requestsTatAfter(before.rt, limits, now), now),
    tokens: tpm === undefined ? null : rateWindowState(tpm, tokensTatAfter(before.tt, limits, tokens, now), now),
  };
}

/**
 * The admission of a call of `tokens` under `subjects`, from each one's windows before it: admitted (counted at
 * every level) when `refusedAt` is -1, else refused there, with the wait of the slowest refusing level.
 */
export function admissionOf(befores: readonly WindowsBefore[], subjects: readonly RateSubject[], tokens: number, now: number, refusedAt: number): RateAdmission {
  let requests: RateWindowState | null = null;
  let tokensState: RateWindowState | null = null;
  let waitMs = 0;
  let refusedBy: RateDimension | null = null;
  let tokensLeft = 0;
  for (let i = 0; i < subjects.length; i++) {
    const before = befores[i]!;
    const { limits } = subjects[i]!;
    const counted = refusedAt === -1;
    if (!counted) {
      const verdict = levelVerdict(before, limits, tokens, now);
      if (verdict.refusedBy !== null) waitMs = Math.max(waitMs, verdict.waitMs);
      // The store's script judged it refused; its own judgement agrees but for float noise below a millisecond.
      if (i === refusedAt) refusedBy = verdict.refusedBy ?? 'concurrent';
    }
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    if (rpm !== undefined) requests = tighter(requests, rateWindowState(rpm, counted ? requestsTatAfter(before.rt, limits, now) : before.rt, now));
    if (tpm !== undefined) {
      const state = rateWindowState(tpm, counted ? tokensTatAfter(before.tt, limits, tokens, now) : before.tt, now);
      if (i === refusedAt) tokensLeft = state.remaining;
      tokensState = tighter(tokensState, state);
    }
  }
  if (refusedBy === null) return { refusedBy: null, retryAfterMs: 0, requests, tokens: tokensState };
  const refusal: RateAdmission = { refusedBy, refusedAt, retryAfterMs: Math.ceil(waitMs - RATE_EPSILON_MS), requests, tokens: tokensState };
  if (refusedBy === 'tokens') refusal.tokensLeft = tokensLeft;
  return refusal;
}

export interface RateWindows {
  /**
   * Admits one call that reserves `reservedTokens` (estimated input + max output) under the rate limits of
   * every level in `subjects` (innermost first), counting it in every dimension each level's limits set, or
   * refuses it and counts nothing at any level: all or none, atomically. `now` is epoch ms (the in-memory
   * windows use it; a shared store may use its own clock).
   */
  admit(subjects: readonly RateSubject[], reservedTokens: number, now: number): RateAdmission | Promise<RateAdmission>;
  /**
   * Ends an admitted call, exactly once, with the `subjects` it was admitted under: frees its concurrent slot
   * and replaces its reserved tokens by `usedTokens` at every level (null: unknown, the reservation stands).
   * `countedHere`: the admission's, so the call is settled in the windows that counted it. Never throws; an
   * async store may settle in the background.
   */
  settle(subjects: readonly RateSubject[], reservedTokens: number, usedTokens: number | null, now: number, countedHere?: boolean): void | Promise<void>;
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
