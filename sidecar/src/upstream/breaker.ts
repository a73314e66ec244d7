// One circuit breaker per upstream. Closed: calls flow and outcomes are counted. Open: calls fail fast
// (the caller answers 502) until openMs has passed. Half-open: exactly one probe call goes through; its
// success closes the breaker, its failure opens it again for another openMs.

import type { Logger } from 'pino';
import type { BreakerConfig } from '../../../contracts/runtime-config.ts';

export type BreakerState = 'closed' | 'open' | 'half-open';

/** The rolling window is kept as this many time buckets: O(1) memory whatever the request rate. */
const BUCKETS = 10;

export class CircuitBreaker {
  readonly #name: string;
  readonly #logger: Logger;
  readonly #now: () => number;
  #config: BreakerConfig;

  #state: BreakerState = 'closed';
  #consecutiveFailures = 0;
  #openedAt = 0;
  #probeInFlight = false;

  #bucketMs = 1;
  readonly #bucketEpoch = new Float64Array(BUCKETS).fill(-1);
  readonly #bucketOk = new Uint32Array(BUCKETS);
  readonly #bucketFailed = new Uint32Array(BUCKETS);

  constructor(name: string, config: BreakerConfig, logger: Logger, now: () => number = Date.now) {
    this.#name = name;
    this.#logger = logger;
    this.#now = now;
    this.#config = validBreakerConfig(config);
    this.#bucketMs = this.#config.windowMs / BUCKETS;
  }

  /** False while open; after openMs lets exactly one probe through (half-open), others still get false. */
  tryAcquire(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'open') {
      if (this.#now() - this.#openedAt < this.#config.openMs) return false;
      this.#state = 'half-open';
      this.#probeInFlight = false;
      this.#logger.info({ upstream: this.#name }, 'circuit breaker half-open; letting one probe through');
    }
    if (this.#probeInFlight) return false;
    this.#probeInFlight = true;
    return true;
  }

  /** Whether tryAcquire would let a call through now, without taking the half-open probe (choosing among endpoints). */
  available(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'open') return this.#now() - this.#openedAt >= this.#config.openMs;
    return !this.#probeInFlight;
  }

  onSuccess(): void {
    if (this.#state === 'half-open') {
      this.#close();
      return;
    }
    if (this.#state === 'closed') {
      this.#consecutiveFailures = 0;
      this.#count(true);
    }
    // While open, a success from a call let through before the trip changes nothing: the timer decides.
  }

  onFailure(): void {
    if (this.#state === 'half-open') {
      this.#trip('half-open probe failed', 1);
      return;
    }
    if (this.#state === 'open') return;
    this.#consecutiveFailures++;
    const { requests, failures } = this.#count(false);
    if (this.#consecutiveFailures >= this.#config.consecutiveFailures) {
      this.#trip(`${this.#consecutiveFailures} consecutive failures`, this.#consecutiveFailures);
    } else if (requests >= this.#config.minimumRequests && failures / requests >= this.#config.failureRatio) {
      this.#trip(`failure ratio ${(failures / requests).toFixed(2)} over ${requests} requests in ${this.#config.windowMs} ms`, failures);
    }
  }

  /** The probe's request ended without a verdict (e.g. client went away): release the half-open slot. */
  release(): void {
    if (this.#state === 'half-open') this.#probeInFlight = false;
  }

  state(): BreakerState {
    // Report half-open once the open period is over, even before the next call asks.
    if (this.#state === 'open' && this.#now() - this.#openedAt >= this.#config.openMs) return 'half-open';
    return this.#state;
  }

  /** Live config change: the state is kept; a new window length restarts the window's counts. */
  updateConfig(config: BreakerConfig): void {
    const next = validBreakerConfig(config);
    if (next.windowMs !== this.#config.windowMs) {
      this.#bucketMs = next.windowMs / BUCKETS;
      this.#resetWindow();
    }
    this.#config = next;
  }

  #trip(reason: string, failures: number): void {
    this.#state = 'open';
    this.#openedAt = this.#now();
    this.#probeInFlight = false;
    this.#logger.warn({ upstream: this.#name, reason, failures, openMs: this.#config.openMs }, 'circuit breaker tripped');
  }

  #close(): void {
    this.#state = 'closed';
    this.#probeInFlight = false;
    this.#consecutiveFailures = 0;
    // Failures from before the trip must not re-open the breaker on the first new failure.
    this.#resetWindow();
    this.#logger.info({ upstream: this.#name, openForMs: this.#now() - this.#openedAt }, 'circuit breaker recovered; closed');
  }

  /** Counts one outcome in the current bucket; returns the totals over the window. */
  #count(ok: boolean): { requests: number; failures: number } {
    const epoch = Math.floor(this.#now() / this.#bucketMs);
    const i = epoch % BUCKETS;
    if (this.#bucketEpoch[i] !== epoch) {
      this.#bucketEpoch[i] = epoch;
      this.#bucketOk[i] = 0;
      this.#bucketFailed[i] = 0;
    }
    if (ok) this.#bucketOk[i]!++;
    else this.#bucketFailed[i]!++;
    let requests = 0;
    let failures = 0;
    for (let b = 0; b < BUCKETS; b++) {
      if (this.#bucketEpoch[b]! > epoch - BUCKETS) {
        requests += this.#bucketOk[b]! + this.#bucketFailed[b]!;
        failures += this.#bucketFailed[b]!;
      }
    }
    return { requests, failures };
  }

  #resetWindow(): void {
    this.#bucketEpoch.fill(-1);
    this.#bucketOk.fill(0);
    this.#bucketFailed.fill(0);
  }
}

/** Returns the config when every field is usable; otherwise throws naming the field. */
export function validBreakerConfig(config: BreakerConfig): BreakerConfig {
  const problems: string[] = [];
  if (!Number.isInteger(config.consecutiveFailures) || config.consecutiveFailures < 1) {
    problems.push(`consecutiveFailures must be an integer >= 1, got ${config.consecutiveFailures}`);
  }
  if (!(config.failureRatio > 0 && config.failureRatio <= 1)) {
    problems.push(`failureRatio must be in (0, 1], got ${config.failureRatio}`);
  }
  if (!Number.isInteger(config.minimumRequests) || config.minimumRequests < 1) {
    problems.push(`minimumRequests must be an integer >= 1, got ${config.minimumRequests}`);
  }
  if (!(Number.isFinite(config.windowMs) && config.windowMs > 0)) {
    problems.push(`windowMs must be a positive number, got ${config.windowMs}`);
  }
  if (!(Number.isFinite(config.openMs) && config.openMs >= 0)) {
    problems.push(`openMs must be a number >= 0, got ${config.openMs}`);
  }
  if (problems.length > 0) throw new RangeError(`invalid breaker config: ${problems.join('; ')}`);
  return { ...config };
}
