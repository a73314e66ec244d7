// One sink's bounded queue and the worker that empties it: batches in arrival order, retries with capped
// exponential backoff and full jitter, and the dead-letter file after the last attempt. Nothing waits on a
// sink: offer() never blocks, and a full queue drops (drop_newest or drop_oldest) and counts.
//
// The queue is bounded twice: by events (maxEvents, queued) and by bytes (maxBytes, the agent's bytes of
// the events queued and in flight together), so a burst of large events cannot take the memory that the
// event count alone would allow (10,000 events of up to 10 MiB).
//
// A sink that failed a whole batch's retries is down (ADR 1103): its batches then go to the dead-letter file
// as they come, without attempts, so a long outage costs no drops while the file has room; one batch is
// tried now and then (a probe), and the first that is stored brings the sink back. A batch being retried
// while its queue fills past half gives up early and marks the sink down for the same reason.
//
// Every event offered is counted once, at the end, as delivered, dropped or dead-lettered; until then it is
// queued or in flight. So received = delivered + dropped + deadLettered + queueDepth + inFlight at any time.
// Nothing a sink or the dead-letter file does can end the worker's loop, or the process.

import type { Logger } from 'pino';
import type { DeadLetterFile } from './dead-letter.ts';
import { abortableDelay, type BackoffSettings, fullJitterDelay } from './full-jitter.ts';
import { type AuditRecord, type AuditSink, isRetryable } from './sinks/audit-sink.ts';

export type WhenFull = 'drop_newest' | 'drop_oldest';

export interface SinkWorkerSettings {
  maxEvents: number;
  /** Bytes of events (as the agent sent them) queued and in flight together. */
  maxBytes: number;
  whenFull: WhenFull;
  retry: BackoffSettings & { maxAttempts: number };
  /** At most one `audit sink write failed` line per sink per this interval; the others are counted into it. */
  failureLogIntervalMs?: number;
}

/** While a sink is down, one batch is tried at most this long after the previous try (else maxBackoffMs if lower). */
export const PROBE_MAX_INTERVAL_MS = 5_000;

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
  /** The agent's bytes of the events queued, and of those in flight; together at most maxBytes. */
  queueBytes: number;
  inFlightBytes: number;
  /** Down: batches go to the dead-letter file as they come, with a probe now and then. */
  down: boolean;
  downSince?: string;
  /** While down: the first batch that arrives after this time is tried (a probe); earlier ones are dead-lettered. */
  nextProbeAt?: string;
  lastError?: string;
  lastErrorAt?: string;
  lastDeliveredAt?: string;
}

function sizeOf(record: AuditRecord): number {
  return record.event.raw.length;
}

/** A ring buffer: O(1) at both ends, fixed memory; keeps the byte total of what it holds. */
class BoundedQueue {
  #items: (AuditRecord | undefined)[];
  #head = 0;
  #size = 0;
  #bytes = 0;
  constructor(capacity: number) {
    this.#items = new Array<AuditRecord | undefined>(capacity);
  }
  get size(): number {
    return this.#size;
  }
  get bytes(): number {
    return this.#bytes;
  }
  get capacity(): number {
    return this.#items.length;
  }
  get full(): boolean {
    return this.#size === this.#items.length;
  }
  push(item: AuditRecord): void {
    this.#items[(this.#head + this.#size) % this.#items.length] = item;
    this.#size++;
    this.#bytes += sizeOf(item);
  }
  shift(): AuditRecord | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head]!;
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.#items.length;
    this.#size--;
    this.#bytes -= sizeOf(item);
    return item;
  }
  take(max: number): AuditRecord[] {
    const out: AuditRecord[] = [];
    while (out.length < max && this.#size > 0) out.push(this.shift()!);
    return out;
  }
}

interface DownState {
  since: number;
  /** When the next batch may be tried. */
  probeAt: number;
  failedProbes: number;
  deadLettered: number;
}

export class SinkWorker {
  readonly sink: AuditSink;
  #settings: SinkWorkerSettings;
  #logger: Logger;
  #deadLetter: DeadLetterFile;
  #queue: BoundedQueue;
  #counters: SinkCounters = { received: 0, delivered: 0, retried: 0, dropped: 0, deadLettered: 0, queueDepth: 0, inFlight: 0, failures: 0 };
  #inFlightBytes = 0;
  /** The batch in flight has been counted (delivered, dead-lettered or dropped). */
  #settled = true;
  #down: DownState | undefined;
  #lastError: string | undefined;
  #lastErrorAt: number | undefined;
  #lastDeliveredAt: number | undefined;
  #wake: (() => void) | undefined;
  /** Set while a failed batch waits for its retry: ends the wait when the queue fills past half. */
  #onPressure: (() => void) | undefined;
  #draining = false;
  /** Aborted at the drain deadline: backoff waits end and the write in flight is cancelled. */
  #abort = new AbortController();
  #loop: Promise<void>;
  #failureLog = { lastAt: 0, suppressed: 0 };
  #dropLog = { lastAt: 0, suppressed: 0 };
  #deadLetterLog = { lastAt: 0, suppressed: 0 };

  constructor(sink: AuditSink, settings: SinkWorkerSettings, deadLetter: DeadLetterFile, logger: Logger) {
    this.sink = sink;
    this.#settings = settings;
    this.#deadLetter = deadLetter;
    this.#logger = logger;
    this.#queue = new BoundedQueue(settings.maxEvents);
    this.#loop = this.#run().catch((error: unknown) => {
      // #run catches per batch; reaching this is a bug, and it must still not end the process.
      this.#logger.error({ sink: sink.name, err: (error as Error).message }, 'audit sink worker stopped');
    });
  }

  /** Takes an event for this sink; never waits. */
  offer(record: AuditRecord): void {
    this.#counters.received++;
    if (this.#draining) {
      this.#drop(1, 'shutting down');
      return;
    }
    const { maxBytes, maxEvents, whenFull } = this.#settings;
    const size = sizeOf(record);
    if (size > maxBytes) {
      this.#drop(1, `event of ${size} bytes is larger than queue.maxBytes (${maxBytes})`);
      return;
    }
    if (!this.#fits(size)) {
      const reason = `queue full (${maxEvents} events or ${maxBytes} bytes, ${whenFull})`;
      if (whenFull === 'drop_oldest') {
        let dropped = 0;
        while (this.#queue.size > 0 && !this.#fits(size)) {
          this.#queue.shift();
          dropped++;
        }
        if (dropped > 0) this.#drop(dropped, reason);
      }
      // drop_newest, or the batch in flight alone leaves no room for this event
      if (!this.#fits(size)) {
        this.#drop(1, reason);
        return;
      }
    }
    this.#queue.push(record);
    if (this.#onPressure && this.#underPressure()) this.#onPressure();
    this.#wake?.();
  }

  #fits(size: number): boolean {
    return !this.#queue.full && this.#queue.bytes + this.#inFlightBytes + size <= this.#settings.maxBytes;
  }

  status(): SinkStatus {
    return {
      name: this.sink.name,
      kind: this.sink.kind,
      ...this.#counters,
      queueDepth: this.#queue.size,
      queueBytes: this.#queue.bytes,
      inFlightBytes: this.#inFlightBytes,
      down: this.#down !== undefined,
      ...(this.#down ? { downSince: new Date(this.#down.since).toISOString(), nextProbeAt: new Date(this.#down.probeAt).toISOString() } : {}),
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
      const batch = this.#queue.take(this.sink.maxBatch);
      this.#counters.inFlight = batch.length;
      this.#inFlightBytes = batch.reduce((n, r) => n + sizeOf(r), 0);
      this.#settled = false;
      try {
        // Past the drain deadline what is still queued goes to the dead-letter file, in order.
        if (this.#abort.signal.aborted) await this.#giveUp(batch, 'drain deadline reached before delivery', 0);
        else await this.#deliver(batch);
      } catch (error) {
        // A fault in a sink or in the dead-letter file costs this batch (counted), never the loop.
        if (!this.#settled) this.#drop(batch.length, `audit sink worker fault: ${(error as Error).message}`);
        this.#logger.error({ sink: this.sink.name, kind: this.sink.kind, err: (error as Error).message, events: batch.length }, 'audit sink worker fault');
      }
      this.#counters.inFlight = 0;
      this.#inFlightBytes = 0;
    }
  }

  async #deliver(batch: AuditRecord[]): Promise<void> {
    const down = this.#down;
    if (down && Date.now() < down.probeAt) {
      await this.#giveUp(batch, `sink down since ${new Date(down.since).toISOString()}: ${this.#lastError ?? 'unknown error'}`, 0);
      return;
    }
    for (let attempt = 1; ; attempt++) {
      const signal = this.#abort.signal;
      try {
        if (signal.aborted) throw new Error('drain deadline reached');
        await this.#raceAbort(this.sink.write(batch, signal), signal);
        this.#counters.delivered += batch.length;
        this.#settled = true;
        this.#lastDeliveredAt = Date.now();
        this.#markUp();
        return;
      } catch (error) {
        if ((await this.#afterFailure(batch, error, attempt, signal)) === 'settled') return;
        this.#counters.retried += batch.length;
      }
    }
  }

  /** A failed attempt: gives the batch up (dead letter or drop) or waits to try again. */
  async #afterFailure(batch: AuditRecord[], error: unknown, attempt: number, signal: AbortSignal): Promise<'settled' | 'retry'> {
    const message = error instanceof Error ? error.message : String(error);
    this.#counters.failures++;
    this.#lastError = message;
    this.#lastErrorAt = Date.now();
    const down = this.#down;
    const last = attempt >= this.#settings.retry.maxAttempts;
    let reason: string | null = null;
    if (signal.aborted) reason = `drain deadline reached: ${message}`;
    else if (!isRetryable(error)) {
      // The sink answered, so it is reachable: it refused this batch.
      this.#markUp();
      reason = `not retryable: ${message}`;
    } else if (down) {
      // A probe gets one attempt; its batch then goes where the others go while the sink is down.
      down.failedProbes++;
      down.probeAt = Date.now() + this.#probeInterval(down.failedProbes);
      reason = `sink down, probe failed: ${message}`;
    } else if (last) {
      this.#markDown(message);
      reason = `gave up after ${attempt} attempts: ${message}`;
    }
    this.#logFailure(message, attempt, reason === null);
    if (reason !== null) {
      await this.#giveUp(batch, reason, attempt);
      return 'settled';
    }
    if (!this.#underPressure()) await this.#backoff(fullJitterDelay(this.#settings.retry, attempt), signal);
    if (this.#underPressure() && !signal.aborted) {
      this.#markDown(message);
      await this.#giveUp(batch, `gave up after ${attempt} attempts, queue half full: ${message}`, attempt);
      return 'settled';
    }
    return 'retry';
  }

  /** Waits out a retry's backoff; ends early at the drain deadline or when the queue fills past half. */
  async #backoff(ms: number, signal: AbortSignal): Promise<void> {
    const pressure = new AbortController();
    this.#onPressure = () => pressure.abort();
    try {
      await abortableDelay(ms, AbortSignal.any([signal, pressure.signal]));
    } finally {
      this.#onPressure = undefined;
    }
  }

  /** Half the queue's events, or half the bytes the batch in flight leaves, are taken. */
  #underPressure(): boolean {
    const { maxEvents, maxBytes } = this.#settings;
    return this.#queue.size * 2 >= maxEvents || this.#queue.bytes * 2 >= maxBytes - this.#inFlightBytes;
  }

  #probeInterval(failedProbes: number): number {
    const { retry } = this.#settings;
    return Math.min(PROBE_MAX_INTERVAL_MS, retry.maxMs, retry.initialMs * 2 ** Math.min(failedProbes, 30));
  }

  #markDown(message: string): void {
    if (this.#down) return;
    const now = Date.now();
    this.#down = { since: now, probeAt: now + this.#probeInterval(0), failedProbes: 0, deadLettered: 0 };
    this.#logger.warn(
      { sink: this.sink.name, kind: this.sink.kind, err: message, file: this.#deadLetter.path },
      'audit sink down: its batches go to the dead-letter file until a probe is delivered',
    );
  }

  #markUp(): void {
    const down = this.#down;
    if (!down) return;
    this.#down = undefined;
    this.#logger.info({ sink: this.sink.name, kind: this.sink.kind, downForMs: Date.now() - down.since, deadLetteredWhileDown: down.deadLettered }, 'audit sink delivering again');
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
    this.#counters.deadLettered += outcome.written;
    if (this.#down) this.#down.deadLettered += outcome.written;
    const lost = batch.length - outcome.written;
    if (lost > 0) this.#drop(lost, `${reason}; ${outcome.reason ?? 'not written'}`);
    this.#settled = true;
    if (outcome.written > 0) this.#logDeadLetter(outcome.written, reason);
  }

  #logDeadLetter(count: number, reason: string): void {
    // While a sink is down its batches are dead-lettered at the event rate: one line per interval, with the count.
    if (!this.#due(this.#deadLetterLog, count)) return;
    this.#logger.warn(
      { sink: this.sink.name, events: count + this.#deadLetterLog.suppressed, deadLetteredTotal: this.#counters.deadLettered, reason, file: this.#deadLetter.path },
      'audit events dead-lettered',
    );
    this.#deadLetterLog = { lastAt: Date.now(), suppressed: 0 };
  }

  #drop(count: number, reason: string): void {
    this.#counters.dropped += count;
    if (!this.#due(this.#dropLog, count)) return;
    this.#logger.warn({ sink: this.sink.name, dropped: count + this.#dropLog.suppressed, droppedTotal: this.#counters.dropped, reason }, 'audit events dropped');
    this.#dropLog = { lastAt: Date.now(), suppressed: 0 };
  }

  #logFailure(message: string, attempt: number, willRetry: boolean): void {
    if (!this.#due(this.#failureLog, 1)) return;
    this.#logger.warn(
      { sink: this.sink.name, kind: this.sink.kind, err: message, attempt, willRetry, failures: this.#counters.failures, suppressed: this.#failureLog.suppressed },
      'audit sink write failed',
    );
    this.#failureLog = { lastAt: Date.now(), suppressed: 0 };
  }

  /** Whether a rate-limited line may be logged now; if not, counts `count` into it as suppressed. */
  #due(log: { lastAt: number; suppressed: number }, count: number): boolean {
    if (Date.now() - log.lastAt >= (this.#settings.failureLogIntervalMs ?? 10_000)) return true;
    log.suppressed += count;
    return false;
  }
}
