// The rate-limit windows of one engine process (ADR 1309): a Map from subject to three numbers, checked and
// counted synchronously on the request path. Each engine (a local proxy, a server, each sidecar) counts its
// own calls; limits shared across the sidecars of a namespace need a shared store.

import { CONCURRENT_RETRY_MS, RATE_WINDOW_MS, type RateAdmission, type RateLimits, type RateWindows, RATE_EPSILON_MS, rateWindowState } from './rate-windows.ts';

/** Subjects kept before idle ones (windows full again, nothing in flight) are dropped. */
const MAX_SUBJECTS = 100_000;

interface SubjectWindows {
  /** Theoretical arrival times, epoch ms; at or before now: the full allowance is there. */
  requestsTat: number;
  tokensTat: number;
  inFlight: number;
}

export class MemoryRateWindows implements RateWindows {
  readonly #subjects = new Map<string, SubjectWindows>();
  readonly #maxSubjects: number;

  constructor(opts: { maxSubjects?: number } = {}) {
    this.#maxSubjects = opts.maxSubjects ?? MAX_SUBJECTS;
  }

  /** Subjects with state in memory. */
  get size(): number {
    return this.#subjects.size;
  }

  admit(subject: string, limits: RateLimits, reservedTokens: number, now: number): RateAdmission {
    let s = this.#subjects.get(subject);
    if (s === undefined) {
      if (this.#subjects.size >= this.#maxSubjects) this.#dropIdle(now);
      s = { requestsTat: now, tokensTat: now, inFlight: 0 };
      this.#subjects.set(subject, s);
    }
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    const tokens = reservedTokens > 0 ? reservedTokens : 0;
    const requestsTat = rpm === undefined ? now : Math.max(s.requestsTat, now) + RATE_WINDOW_MS / rpm;
    const tokensTat = tpm === undefined ? now : Math.max(s.tokensTat, now) + (tokens * RATE_WINDOW_MS) / tpm;
    const requestsWait = requestsTat - now - RATE_WINDOW_MS;
    const tokensWait = tokensTat - now - RATE_WINDOW_MS;
    const concurrentFull = limits.concurrent !== undefined && s.inFlight >= limits.concurrent;
    if (requestsWait > RATE_EPSILON_MS || tokensWait > RATE_EPSILON_MS || concurrentFull) {
      // Refused: nothing counted; wait for the slowest dimension (a call over the whole tokens limit never fits).
      let wait = Math.max(requestsWait, tokensWait, concurrentFull ? CONCURRENT_RETRY_MS : 0);
      if (tpm !== undefined && tokens > tpm) wait = Math.max(wait, RATE_WINDOW_MS);
      return {
        refusedBy: requestsWait > RATE_EPSILON_MS ? 'requests' : tokensWait > RATE_EPSILON_MS ? 'tokens' : 'concurrent',
        retryAfterMs: Math.ceil(wait - RATE_EPSILON_MS),
        requests: rpm === undefined ? null : rateWindowState(rpm, s.requestsTat, now),
        tokens: tpm === undefined ? null : rateWindowState(tpm, s.tokensTat, now),
      };
    }
    if (rpm !== undefined) s.requestsTat = requestsTat;
    if (tpm !== undefined) s.tokensTat = tokensTat;
    if (limits.concurrent !== undefined) s.inFlight++;
    return {
      refusedBy: null,
      retryAfterMs: 0,
      requests: rpm === undefined ? null : rateWindowState(rpm, requestsTat, now),
      tokens: tpm === undefined ? null : rateWindowState(tpm, tokensTat, now),
    };
  }

  settle(subject: string, limits: RateLimits, reservedTokens: number, usedTokens: number | null, now: number): void {
    const s = this.#subjects.get(subject);
    if (s === undefined) return;
    if (limits.concurrent !== undefined && s.inFlight > 0) s.inFlight--;
    const tpm = limits.tokensPerMinute;
    if (tpm === undefined || usedTokens === null) return;
    const reserved = reservedTokens > 0 ? reservedTokens : 0;
    // Tokens given back never make the window fuller than full (a TAT before now means full).
    const tat = s.tokensTat + ((usedTokens - reserved) * RATE_WINDOW_MS) / tpm;
    s.tokensTat = tat > now ? tat : now;
  }

  /** Drops subjects whose windows are full again and that have nothing in flight: they hold no information. */
  #dropIdle(now: number): void {
    for (const [subject, s] of this.#subjects) {
      if (s.inFlight === 0 && s.requestsTat <= now && s.tokensTat <= now) this.#subjects.delete(subject);
    }
  }
}
