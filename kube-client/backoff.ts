// Exponential backoff with jitter, as pure arithmetic so callers (the work queue, informer restarts, the
// sidecar's reconnects) share one tested formula and keep their own state.

export interface BackoffPolicy {
  /** Delay after the first failure, milliseconds. */
  baseMs: number;
  /** Upper bound of any delay, milliseconds. */
  maxMs: number;
  /**
   * Fraction of the delay that is randomised (0 = none, 1 = "full jitter": anywhere in [0, delay]).
   * Jitter spreads the retries of many clients that failed at the same moment (an API server restart).
   */
  jitter?: number;
}

/** Delay before retry number `failures` (1 = first retry): base·2^(failures−1), capped, then jittered. */
export function backoffDelay(policy: BackoffPolicy, failures: number, random: () => number = Math.random): number {
  if (failures <= 0) return 0;
  // 2^exponent overflows to Infinity for large counts; the cap makes that harmless.
  const raw = Math.min(policy.maxMs, policy.baseMs * 2 ** (failures - 1));
  const jitter = Math.min(Math.max(policy.jitter ?? 0, 0), 1);
  return Math.round(raw * (1 - jitter * random()));
}

/** A failure counter bound to a policy: next() returns the delay for one more failure; reset() on success. */
export class Backoff {
  #policy: BackoffPolicy;
  #failures = 0;
  #random: () => number;

  constructor(policy: BackoffPolicy, random: () => number = Math.random) {
    this.#policy = policy;
    this.#random = random;
  }

  next(): number {
    this.#failures += 1;
    return backoffDelay(this.#policy, this.#failures, this.#random);
  }

  reset(): void {
    this.#failures = 0;
  }

  get failures(): number {
    return this.#failures;
  }
}
