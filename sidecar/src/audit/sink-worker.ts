// One sink's bounded queue and the worker that empties it: batches in arrival order, retries with capped
// exponential backoff and full jitter, and the dead-letter file after the last attempt. Nothing waits on a
// sink: offer() never blocks, and a full queue drops (drop_newest or drop_oldest) and counts.
//
// Every event offered is counted once, at the end, as delivered, dropped or dead-lettered; until then it is
// queued or in flight. So received = delivered + dropped + deadLettered + queueDepth + inFlight at any time.

import type { Logger } from 'pino';
import type { DeadLetterFile } from './dead-letter.ts';
import { abortableDelay, type BackoffSettings, fullJitterDelay } from './full-jitter.ts';
import { type AuditRecord, type AuditSink, isRetryable } from './sinks/audit-sink.ts';

export type WhenFull = 'drop_newest' | 'drop_oldest';

export interface SinkWorkerSettings {
  maxEvents: number;
  whenFull: WhenFull;
  retry: BackoffSettings & { maxAttempts: number };
  /** At most one `audit sink write failed` line per sink per this interval; the others are counted into it. */
  failureLogIntervalMs?: number;
}

export interface SinkCounters {
  received: number;
  delivered: number;
  /** Events sent again after a failed attempt (a batch of 10 retried twice counts 20). */
  retried: number;
  dropped: number;
  deadLettered: number;
  queueDepth: number;
  inFlight: number;
  /** Failed write attempts. */
  failures: number;
}

export interface SinkStatus extends SinkCounters {
  name: string;
  kind: string;
  lastError?: string;
  lastErrorAt?: string;
  lastDeliveredAt?: string;
}

/** A ring buffer: O(1) at both ends, fixed memory. */
class BoundedQueue<T> {
  #items: (T | undefined)[];
  #head = 0;
  #size = 0;
  constructor(capacity: number) {
    this.#items = new Array<T | undefined>(capacity);
  }
  get size(): number {
    return this.#size;
  }
  get full(): boolean {
    return this.#size === this.#items.length;
  }
  push(item: T): void {
    this.#items[(this.#head + this.#size) % this.#items.length] = item;
    this.#size++;
  }
  shift(): T | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.#items.length;
    this.#size--;
    return item;
  }
  take(max: number): T[] {
    const out: T[] = [];
    while (out.length < max && this.#size > 0) out.push(this.shift()!);
    return out;
  }
}

export class SinkWorker {
  readonly sink: AuditSink;
  #settings: SinkWorkerSettings;
  #logger: Logger;
  #deadLetter: DeadLetterFile;
  #queue: BoundedQueue<AuditRecord>;
  #counters: SinkCounters = { received: 0, delivered: 0, retried: 0, dropped: 0, deadLettered: 0, queueDepth: 0, inFlight: 0, failures: 0 };
  #lastError: string | undefined;
  #lastErrorAt: number | undefined;
  #lastDeliveredAt: number | undefined;
  #wake: (() => void) | undefined;
  #draining = false;
  /** Aborted at the drain deadline: backoff waits end and the write in flight is cancelled. */
  #abort = new AbortController();
  #loop: Promise<void>;
  #failureLog = { lastAt: 0, suppressed: 0 };
  #dropLog = { lastAt: 0, suppressed: 0 };

  constructor(sink: AuditSink, settings: SinkWorkerSettings, deadLetter: DeadLetterFile, logger: Logger) {
    this.sink = sink;
    this.#settings = settings;
    this.#deadLetter = deadLetter;
    this.#logger = logger;
    this.#queue = new BoundedQueue(settings.maxEvents);
    this.#loop = this.#run();
  }

  /** Takes an event for this sink; never waits. */
  offer(record: AuditRecord): void {
    this.#counters.received++;
    if (this.#draining) {
      this.#drop(1, 'shutting down');
      return;
    }
    if (this.#queue.full) {
      if (this.#settings.whenFull === 'drop_oldest') {
        this.#queue.shift();
        this.#queue.push(record);
      }
      this.#drop(1, `queue full (${this.#settings.maxEvents} events, ${this.#settings.whenFull})`);
    } else {
      this.#queue.push(record);
    }
    this.#wake?.();
  }

  status(): SinkStatus {
    return {
      name: this.sink.name,
      kind: this.sink.kind,
      ...this.#counters,
      queueDepth: this.#queue.size,
      ...(this.#lastError !== undefined ? { lastError: this.#lastError, lastErrorAt: new Date(this.#lastErrorAt!).toISOString() } : {}),
      ...(this.#lastDeliveredAt !== undefined ? { lastDeliveredAt: new Date(this.#lastDeliveredAt).toISOString() } : {}),
    };
  }

  /**
   * Stops taking events, delivers what is queued until `deadline` (epoch ms), then dead-letters whatever is
   * left, the batch in flight included, and closes the sink.
   */
  async drain(deadline: number): Promise<void> {
    this.#draining = true;
    this.#wake?.();
    const timer = setTimeout(() => this.#abort.abort(), Math.max(0, deadline - Date.now()));
    try {
      await this.#loop;
    } finally {
      clearTimeout(timer);
    }
    await this.sink.close().catch((error: unknown) => this.#logger.warn({ sink: this.sink.name, err: (error as Error).message }, 'audit sink close failed'));
  }

  async #run(): Promise<void> {
    for (;;) {
      if (this.#queue.size === 0) {
        if (this.#draining) return;
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      if (this.#abort.signal.aborted) {
        // Past the drain deadline: what is still queued goes to the dead-letter file, in order.
        while (this.#queue.size > 0) await this.#giveUp(this.#queue.take(this.sink.maxBatch), 'drain deadline reached before delivery', 0);
        return;
      }
      const batch = this.#queue.take(this.sink.maxBatch);
      this.#counters.inFlight = batch.length;
      await this.#deliver(batch);
      this.#counters.inFlight = 0;
    }
  }

  async #deliver(batch: AuditRecord[]): Promise<void> {
    const { retry } = this.#settings;
    for (let attempt = 1; ; attempt++) {
      const signal = this.#abort.signal;
      try {
        if (signal.aborted) throw new Error('drain deadline reached');
        await this.#raceAbort(this.sink.write(batch, signal), signal);
        this.#counters.delivered += batch.length;
        this.#lastDeliveredAt = Date.now();
        return;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        this.#counters.failures++;
        this.#lastError = message;
        this.#lastErrorAt = Date.now();
        if (signal.aborted) {
          this.#logFailure(message, attempt, false);
          await this.#giveUp(batch, `drain deadline reached: ${message}`, attempt);
          return;
        }
        const retryable = isRetryable(error);
        const last = !retryable || attempt >= retry.maxAttempts;
        this.#logFailure(message, attempt, !last);
        if (last) {
          await this.#giveUp(batch, retryable ? `gave up after ${attempt} attempts: ${message}` : `not retryable: ${message}`, attempt);
          return;
        }
        this.#counters.retried += batch.length;
        await abortableDelay(fullJitterDelay(retry, attempt), signal);
      }
    }
  }

  /** A write the sink cannot cancel must not hold the drain past its deadline. */
  #raceAbort(write: Promise<void>, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(new Error('drain deadline reached'));
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(new Error('drain deadline reached'));
      signal.addEventListener('abort', onAbort, { once: true });
      write.then(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  async #giveUp(batch: AuditRecord[], reason: string, attempts: number): Promise<void> {
    const outcome = await this.#deadLetter.write(this.sink.name, reason, attempts, batch);
    if (outcome.written) {
      this.#counters.deadLettered += batch.length;
      this.#logger.warn({ sink: this.sink.name, events: batch.length, reason, file: this.#deadLetter.path }, 'audit events dead-lettered');
    } else {
      this.#drop(batch.length, `${reason}; ${outcome.reason}`);
    }
  }

  #drop(count: number, reason: string): void {
    this.#counters.dropped += count;
    const now = Date.now();
    const interval = this.#settings.failureLogIntervalMs ?? 10_000;
    if (now - this.#dropLog.lastAt < interval) {
      this.#dropLog.suppressed += count;
      return;
    }
    this.#logger.warn({ sink: this.sink.name, dropped: count + this.#dropLog.suppressed, droppedTotal: this.#counters.dropped, reason }, 'audit events dropped');
    this.#dropLog = { lastAt: now, suppressed: 0 };
  }

  #logFailure(message: string, attempt: number, willRetry: boolean): void {
    const now = Date.now();
    const interval = this.#settings.failureLogIntervalMs ?? 10_000;
    if (now - this.#failureLog.lastAt < interval) {
      this.#failureLog.suppressed++;
      return;
    }
    this.#logger.warn(
      { sink: this.sink.name, kind: this.sink.kind, err: message, attempt, willRetry, failures: this.#counters.failures, suppressed: this.#failureLog.suppressed },
      'audit sink write failed',
    );
    this.#failureLog = { lastAt: now, suppressed: 0 };
  }
}
