// How many tokeninfo lookups may start: a token bucket (a steady rate, and a burst for a morning's first
// calls) and a bound on lookups in flight. Only a token that no cache knows costs a lookup, so the bounds are
// met by strangers: a flood of made-up tokens, each new and each a lookup, cannot turn the server into a
// relay that hammers the tokeninfo endpoint (Google throttles the project, and every caller's new token is
// then a 503). A token already verified is answered from the cache and never waits for these bounds.

export interface LookupLimits {
  /** Lookups a second, on average (server.auth.accessTokens.lookupsPerSecond). */
  perSecond: number;
  /** Lookups that may start at once after a quiet spell (…lookupBurst). */
  burst: number;
  /** Lookups waiting for tokeninfo at the same time (…concurrentLookups). */
  concurrent: number;
}

/** A lookup may start (release it when it is answered), or the seconds after which one may. */
export type LookupSlot = { release: () => void; retryAfterSeconds?: undefined } | { retryAfterSeconds: number };

export class LookupBounds {
  readonly #limits: LookupLimits;
  readonly #now: () => number;
  #tokens: number;
  #refilledAt: number;
  #inFlight = 0;
  #refused = 0;

  constructor(limits: LookupLimits, now: () => number) {
    this.#limits = limits;
    this.#now = now;
    this.#tokens = limits.burst;
    this.#refilledAt = now();
  }

  /** Lookups refused by the bounds since start. */
  get refused(): number {
    return this.#refused;
  }

  take(): LookupSlot {
    const { perSecond, burst, concurrent } = this.#limits;
    const now = this.#now();
    // A clock set back refills nothing.
    this.#tokens = Math.min(burst, this.#tokens + (Math.max(0, now - this.#refilledAt) / 1000) * perSecond);
    this.#refilledAt = now;
    if (this.#inFlight >= concurrent) {
      this.#refused++;
      return { retryAfterSeconds: 1 };
    }
    if (this.#tokens < 1) {
      this.#refused++;
      return { retryAfterSeconds: Math.max(1, Math.ceil((1 - this.#tokens) / perSecond)) };
    }
    this.#tokens -= 1;
    this.#inFlight++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#inFlight--;
      },
    };
  }
}
