// One /v1 call to a model alias: its targets tried in attemptOrder's order until one answers, within one
// deadline. A target that fails in a way the alias falls back on (429, 5xx, a refused or reset connection, a
// timeout, an open breaker) gives way to the next, but only before any byte has reached the caller: the answer
// this returns is relayed by the caller of run(), and nothing is switched after that. A 429 cools its target down
// for its Retry-After. Once every target has been tried, further attempts (alias.attempts) start again from the
// top after a jittered backoff, never waiting past the deadline. Other failures (another 4xx, a refused request,
// the caller leaving) end the call at once (ADR 0902).

import type { AliasTarget, FallbackTrigger, ModelAlias } from '../../../contracts/model-aliases.ts';
import { ProxyError } from '../errors.ts';
import { CallAbort } from '../upstream/call-abort.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { attemptOrder } from './attempt-order.ts';
import { coolDownUntil } from '../upstream/retry-after.ts';
import { TargetHealth } from './target-health.ts';

/** Backoff before a target is tried again in the same call: full jitter over 250 ms × 2^round, at most 8 s. */
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 8_000;

/** One failed attempt, for its span and the fallback metric. */
export interface FailedAttempt {
  attempt: number;
  target: AliasTarget;
  /** performance.now() and Date.now() when the attempt began. */
  startedAt: number;
  startTime: number;
  statusCode: number | null;
  error: string;
  /** Why the call went on (or would have): null when the failure is not one the alias falls back on. */
  reason: FallbackTrigger | null;
}

/** The attempt that answered, to be relayed. */
export interface Answered<P> {
  attempt: number;
  target: AliasTarget;
  plan: P;
  upstream: UpstreamResponse;
  startedAt: number;
  startTime: number;
}

export interface AliasCallOptions<P> {
  alias: string;
  definition: ModelAlias;
  health: TargetHealth;
  /** Whether the route's breaker is open now (its target is then tried last). */
  breakerOpen: (route: string) => boolean;
  /** Plans and sends one attempt. Throws GatewayError for a request the target cannot take, ProxyError otherwise. */
  attempt: (target: AliasTarget, abort: CallAbort) => Promise<{ plan: P; upstream: UpstreamResponse }>;
  /** Told each time the call goes on from one target to the next. */
  onFallback?: (from: AliasTarget, to: AliasTarget, reason: FallbackTrigger) => void;
  now?: () => number;
  random?: () => number;
}

/** Thrown by an attempt when its target cannot take this request at all (planning refused it): the next may. */
export class TargetUnfit extends Error {
  readonly reason: unknown;
  constructor(reason: unknown) {
    super(reason instanceof Error ? reason.message : String(reason));
    this.name = 'TargetUnfit';
    this.reason = reason;
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function describe(error: unknown): string {
  return error instanceof ProxyError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error);
}

/** Which trigger a thrown error is, or null when the alias never falls back on it. */
function thrownTrigger(error: unknown): FallbackTrigger | null {
  if (!(error instanceof ProxyError)) return null;
  switch (error.code) {
    case 'upstream_unreachable':
    case 'credential_unavailable':
      return 'unreachable';
    case 'upstream_timeout':
      return 'timeout';
    case 'circuit_open':
      return 'circuit_open';
    default:
      return null;
  }
}

function statusTrigger(statusCode: number): FallbackTrigger | null {
  if (statusCode === 429) return 'rate_limited';
  return statusCode >= 500 ? 'server_error' : null;
}

export class AliasCall<P> {
  readonly #o: AliasCallOptions<P>;
  readonly #now: () => number;
  readonly failed: FailedAttempt[] = [];
  #current: CallAbort | null = null;
  #cancelled: Error | undefined = undefined;
  /** The last failing answer, unread, kept in case no other attempt answers. */
  #held: Answered<P> | null = null;
  /** The last error an attempt threw that the alias falls back on, and the last reason a target was unfit. */
  #thrown: Error | undefined = undefined;
  #unfit: Error | undefined = undefined;
  #wake: (() => void) | null = null;

  constructor(options: AliasCallOptions<P>) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Ends the call: the attempt under way is aborted with `reason`, and no other starts. */
  cancel(reason: Error): void {
    if (this.#cancelled !== undefined) return;
    this.#cancelled = reason;
    this.#current?.abort(reason);
    this.#wake?.();
    this.#dropHeld();
  }

  /**
   * Tries the targets until one answers. Resolves with the answer to relay: a success, or the last failure when
   * no fallback is left (the caller then sees the provider's own 429 or 5xx). Rejects with the last error thrown.
   */
  async run(): Promise<Answered<P>> {
    const { definition, health } = this.#o;
    const deadline = this.#now() + definition.timeoutMs;
    const timer = setTimeout(
      () => this.cancel(new ProxyError('upstream_timeout', `model alias ${this.#o.alias}: no target answered within ${definition.timeoutMs} ms (timeoutMs)`)),
      definition.timeoutMs,
    );
    timer.unref();
    try {
      return await this.#attempts(deadline, health);
    } catch (error) {
      // Ended by an error: a failing answer still held goes unread, its connection given back.
      this.#dropHeld();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  async #attempts(deadline: number, health: TargetHealth): Promise<Answered<P>> {
    const { definition } = this.#o;
    let order: AliasTarget[] = [];
    let at = 0;
    let round = 0;
    let triedThisRound = 0;
    let attempt = 0;
    let previous: AliasTarget | null = null;
    for (;;) {
      if (at === order.length) {
        // A new round: the targets ordered again from what is known now; after the first, a backoff. A round in
        // which no target could be tried (all cooling down past the deadline, or unfit) ends the call.
        if (round > 0 && (triedThisRound === 0 || !(await this.#backoff(round, deadline)))) return this.#lastAnswer();
        const now = this.#now();
        order = attemptOrder(definition, (target) => health.coolingUntil(target, now) === 0 && !this.#o.breakerOpen(target.route), this.#o.random);
        at = 0;
        round++;
        triedThisRound = 0;
      }
      const target = order[at++]!;
      if (!(await this.#cooled(target, deadline))) continue;
      // A fallback is counted by why the last target failed; one passed over as unfit for the request is not a failure.
      const why = this.failed.at(-1)?.reason;
      if (previous !== null && why !== undefined && why !== null) this.#o.onFallback?.(previous, target, why);
      previous = target;
      attempt++;
      triedThisRound++;
      const outcome = await this.#try(attempt, target);
      if (outcome !== null) return outcome;
      if (attempt >= definition.attempts) return this.#lastAnswer();
    }
  }

  /**
   * One attempt: the answer to relay, or null when the call goes on to the next target (the failing answer is
   * held, unread, until another attempt starts or none will). Throws what ends the call.
   */
  async #try(attempt: number, target: AliasTarget): Promise<Answered<P> | null> {
    const { definition, health } = this.#o;
    const startedAt = performance.now();
    const startTime = this.#now();
    const abort = (this.#current = new CallAbort());
    let sent: { plan: P; upstream: UpstreamResponse };
    try {
      sent = await this.#o.attempt(target, abort);
    } catch (error) {
      if (error instanceof TargetUnfit) {
        // This target cannot take the request (a parameter its provider lacks, a route the config lost); another may.
        this.failed.push({ attempt, target, startedAt, startTime, statusCode: null, error: describe(error.reason), reason: null });
        this.#unfit = asError(error.reason);
        return null;
      }
      const trigger = this.#cancelled === undefined ? thrownTrigger(error) : null;
      this.failed.push({ attempt, target, startedAt, startTime, statusCode: null, error: describe(error), reason: trigger });
      if (trigger === null || !definition.fallbackOn.has(trigger)) throw error;
      this.#thrown = asError(error);
      return null;
    }
    this.#dropHeld();
    const { upstream } = sent;
    const trigger = statusTrigger(upstream.statusCode);
    if (trigger === 'rate_limited') health.coolDown(target, coolDownUntil(upstream.headers, this.#now()));
    const answered: Answered<P> = { attempt, target, plan: sent.plan, upstream, startedAt, startTime };
    if (trigger === null || !definition.fallbackOn.has(trigger) || attempt >= definition.attempts || this.#cancelled !== undefined) return answered;
    this.failed.push({
      attempt,
      target,
      startedAt,
      startTime,
      statusCode: upstream.statusCode,
      error: `${trigger}: the upstream answered ${upstream.statusCode}`,
      reason: trigger,
    });
    this.#held = answered;
    return null;
  }

  /** Nothing of a held failing answer reached the caller: another attempt answered, so it is dropped unread. */
  #dropHeld(): void {
    const held = this.#held;
    if (held === null) return;
    this.#held = null;
    held.upstream.settle(held.upstream.statusCode >= 500 ? 'failure' : 'abandoned');
    held.upstream.body.destroy();
  }

  /**
   * No attempt is left: the last failing answer, relayed as the provider gave it (its 429 with Retry-After, its
   * 5xx), or the last error; a call cancelled (the caller left, the deadline) ends with that reason.
   */
  #lastAnswer(): Answered<P> {
    this.#throwIfCancelled();
    if (this.#held !== null) {
      const held = this.#held;
      this.#held = null;
      return held;
    }
    throw this.#thrown ?? this.#unfit ?? this.#exhausted();
  }

  /**
   * Whether `target` may be tried now: a target still cooling down is waited for when that fits the deadline,
   * otherwise passed over (no upstream attempt is made, so none is counted). Throws when the call was cancelled.
   */
  async #cooled(target: AliasTarget, deadline: number): Promise<boolean> {
    this.#throwIfCancelled();
    const until = this.#o.health.coolingUntil(target, this.#now());
    if (until === 0 || (await this.#waitUntil(until, deadline))) return true;
    this.#throwIfCancelled();
    return false;
  }

  #throwIfCancelled(): void {
    const reason = this.#cancelled;
    if (reason !== undefined) throw reason;
  }

  #exhausted(): ProxyError {
    const last = this.failed.at(-1);
    return new ProxyError(
      'upstream_unreachable',
      `model alias ${this.#o.alias}: every target failed (${this.failed.length} attempts${last ? `; last: ${last.target.route} ${last.target.model}: ${last.error}` : ''})`,
    );
  }

  /** Waits a jittered backoff before a new round; false when it would pass the deadline or the call ended. */
  #backoff(round: number, deadline: number): Promise<boolean> {
    const cap = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (round - 1));
    return this.#waitUntil(this.#now() + Math.floor((this.#o.random ?? Math.random)() * cap), deadline);
  }

  #waitUntil(until: number, deadline: number): Promise<boolean> {
    if (until >= deadline || this.#cancelled !== undefined) return Promise.resolve(false);
    const ms = until - this.#now();
    if (ms <= 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve(this.#cancelled === undefined);
      }, ms);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = null;
        resolve(false);
      };
    });
  }
}
