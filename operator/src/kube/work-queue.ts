// A rate-limited work queue with controller-runtime semantics: a key is queued at most once however often it
// is added; a key being processed is never handed to a second worker (an add during processing marks it
// dirty and it is queued again when the worker is done); failures requeue with per-key exponential backoff.

import { backoffDelay, type BackoffPolicy } from '../../../kube-client/backoff.ts';

/** controller-runtime's default per-item limiter: 5 ms doubling up to 1000 s. */
export const DEFAULT_ITEM_BACKOFF: BackoffPolicy = { baseMs: 5, maxMs: 1_000_000 };

export interface ReconcileResult {
  /** Process the key again after this many milliseconds (periodic work); failures are thrown instead. */
  requeueAfterMs?: number;
}

export type Reconciler = (key: string) => Promise<ReconcileResult | void>;

/** What the queue and its workers report, for metrics (operator/src/metrics/operator-metrics.ts). */
export interface WorkQueueObserver {
  /** A key waited this long between being queued and a worker taking it. */
  waited(seconds: number): void;
  /** A worker finished one key. */
  reconciled(outcome: 'success' | 'error' | 'requeue_after', seconds: number): void;
  /** A failed key was queued again with backoff. */
  retried(): void;
}

export class WorkQueue {
  #queue: string[] = [];
  #dirty = new Set<string>();
  #processing = new Set<string>();
  #failures = new Map<string, number>();
  #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  #waiters: ((key: string | undefined) => void)[] = [];
  #shuttingDown = false;
  #policy: BackoffPolicy;
  #queuedAt = new Map<string, number>();
  readonly observer: WorkQueueObserver | undefined;

  constructor(policy: BackoffPolicy = DEFAULT_ITEM_BACKOFF, observer?: WorkQueueObserver) {
    this.#policy = policy;
    this.observer = observer;
  }

  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.observer) this.#queuedAt.set(key, performance.now());
    if (this.#processing.has(key)) return;
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#take(key);
      waiter(key);
    } else {
      this.#queue.push(key);
    }
  }

  /** Adds the key after a delay; of several pending delays for one key the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const pending = this.#timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  /** Requeues after a failure: the delay doubles with each consecutive failure of this key. */
  addRateLimited(key: string): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    const delay = backoffDelay(this.#policy, failures);
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the failure history of a key (after it was processed successfully). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  get length(): number {
    return this.#queue.length;
  }

  /** Resolves with the next key, or undefined once the queue shuts down. Call done(key) when finished. */
  get(): Promise<string | undefined> {
    const key = this.#queue.shift();
    if (key !== undefined) {
      this.#take(key);
      return Promise.resolve(key);
    }
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key) && !this.#shuttingDown) {
      const waiter = this.#waiters.shift();
      if (waiter) {
        this.#take(key);
        waiter(key);
      } else {
        this.#queue.push(key);
      }
    }
  }

  shutDown(): void {
    this.#shuttingDown = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  #take(key: string): void {
    this.#dirty.delete(key);
    this.#processing.add(key);
    const queuedAt = this.#queuedAt.get(key);
    if (queuedAt !== undefined) {
      this.#queuedAt.delete(key);
      this.observer?.waited((performance.now() - queuedAt) / 1000);
    }
  }
}

export interface Workers {
  /** Shuts the queue down and waits for the keys being processed to finish. */
  stop(): Promise<void>;
}

/**
 * Runs `count` workers over the queue. A reconciler that throws is retried with backoff (the error goes to
 * onError); one that returns normally has its failure history cleared.
 */
export function runWorkers(queue: WorkQueue, count: number, reconcile: Reconciler, onError: (key: string, error: unknown, retryInMs: number) => void): Workers {
  const loops: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    loops.push(
      (async () => {
        for (;;) {
          const key = await queue.get();
          if (key === undefined) return;
          const started = performance.now();
          const took = () => (performance.now() - started) / 1000;
          try {
            const result = await reconcile(key);
            queue.forget(key);
            if (result?.requeueAfterMs !== undefined) queue.addAfter(key, result.requeueAfterMs);
            queue.observer?.reconciled(result?.requeueAfterMs !== undefined ? 'requeue_after' : 'success', took());
          } catch (error) {
            queue.observer?.reconciled('error', took());
            if (!queue.shuttingDown) queue.observer?.retried();
            onError(key, error, queue.shuttingDown ? 0 : queue.addRateLimited(key));
          } finally {
            queue.done(key);
          }
        }
      })(),
    );
  }
  return {
    async stop() {
      queue.shutDown();
      await Promise.all(loops);
    },
  };
}
