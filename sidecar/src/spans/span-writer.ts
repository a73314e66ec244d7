// Takes finished spans off the request path and hands them to the store in small batches.
// record() only stores a reference in a preallocated ring. Batches leave on a timer or, once batchSize are
// waiting, on the next turn of the event loop; one batch is in flight at a time, so memory stays bounded
// by bufferSize plus one batch. The SQLite store runs the transaction in a worker thread (ADR 0400).

import type { Logger } from 'pino';
import type { Span } from './span.ts';
import type { SpanStore } from './span-store.ts';

export interface SpanWriterOptions {
  /** Spans waiting to be written; beyond this they are dropped, counted and logged. */
  bufferSize: number;
  /** Spans per store transaction. */
  batchSize: number;
  /** Longest a span waits before it is written when fewer than batchSize are buffered. */
  flushIntervalMs: number;
}

export interface SpanWriterStats {
  /** Spans accepted into the buffer. */
  recorded: number;
  written: number;
  /** Spans lost: buffer full, or a batch that failed twice. */
  dropped: number;
  buffered: number;
  /** Failed store writes (each retry counts). */
  writeErrors: number;
}

/**
 * At most one `span processor buffer full` line per this interval. The first drop after a quiet spell is
 * reported at the end of its event-loop turn (so a burst is counted in one line), later ones by the writer's
 * timer once the interval has passed, and the rest at close: every drop is in some line's count.
 */
export const DROP_LOG_INTERVAL_MS = 10_000;

export class SpanWriter {
  readonly #store: SpanStore;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #capacity: number;
  readonly #batchSize: number;
  readonly #ring: (Span | undefined)[];
  #head = 0; // oldest buffered span
  #size = 0;
  /** A batch that failed once and is retried before anything newer. */
  #retry: Span[] | null = null;
  /** The batch an asynchronous store is writing, and its size. */
  #inFlight: Promise<void> | null = null;
  #inFlightCount = 0;

  #recorded = 0;
  #written = 0;
  #dropped = 0;
  #writeErrors = 0;
  #bufferFullDrops = 0;
  #lastDropLog = -Infinity;
  #dropsAtLastLog = 0;

  #timer: NodeJS.Timeout | null;
  #immediate: NodeJS.Immediate | null = null;
  #dropReport: NodeJS.Immediate | null = null;
  #closed = false;

  constructor(store: SpanStore, opts: SpanWriterOptions, logger: Logger, now: () => number = Date.now) {
    for (const key of ['bufferSize', 'batchSize', 'flushIntervalMs'] as const) {
      if (!Number.isInteger(opts[key]) || opts[key] < 1) {
        throw new RangeError(`span writer ${key} must be a positive integer, got ${opts[key]}`);
      }
    }
    this.#store = store;
    this.#logger = logger;
    this.#now = now;
    this.#capacity = opts.bufferSize;
    this.#batchSize = Math.min(opts.batchSize, opts.bufferSize);
    this.#ring = new Array<Span | undefined>(this.#capacity);
    this.#timer = setInterval(() => {
      this.#reportDrops(false);
      this.#writeSome();
    }, opts.flushIntervalMs);
    // Spans alone never keep the process alive; shutdown calls flush().
    this.#timer.unref();
  }

  /** Never blocks, never throws. A full buffer drops the span (counted and logged). */
  record(span: Span): void {
    if (this.#size === this.#capacity || this.#closed) {
      this.#drop();
      return;
    }
    let slot = this.#head + this.#size;
    if (slot >= this.#capacity) slot -= this.#capacity;
    this.#ring[slot] = span;
    this.#size++;
    this.#recorded++;
    if (this.#size >= this.#batchSize && this.#immediate === null) {
      this.#immediate = setImmediate(this.#onImmediate);
    }
  }

  /** Writes everything buffered now (SIGTERM). Resolves even when the store fails; stats() tells. */
  async flush(): Promise<void> {
    // Bounded by what is buffered now (each batch is written, or retried once and dropped), so spans
    // recorded meanwhile cannot keep it going.
    let passes = 2 * (Math.ceil(this.#size / this.#batchSize) + (this.#retry === null ? 0 : 1) + 1);
    while (passes-- > 0) {
      if (this.#inFlight !== null) {
        await this.#inFlight;
        continue;
      }
      if (this.#size === 0 && this.#retry === null) return;
      await this.#writeBatch();
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    if (this.#immediate !== null) clearImmediate(this.#immediate);
    this.#immediate = null;
    if (this.#dropReport !== null) clearImmediate(this.#dropReport);
    this.#dropReport = null;
    this.#reportDrops(true);
    await this.flush();
  }

  stats(): SpanWriterStats {
    return {
      recorded: this.#recorded,
      written: this.#written,
      dropped: this.#dropped,
      buffered: this.#size + (this.#retry?.length ?? 0) + this.#inFlightCount,
      writeErrors: this.#writeErrors,
    };
  }

  readonly #onImmediate = (): void => {
    this.#immediate = null;
    this.#writeSome();
  };

  /** One batch per event-loop turn, so a backlog never holds the loop for more than one batch. */
  #writeSome(): void {
    if (this.#inFlight !== null || (this.#size === 0 && this.#retry === null)) return;
    const done = this.#writeBatch();
    if (done === undefined) this.#scheduleMore();
    else void done.then(() => this.#scheduleMore());
  }

  #scheduleMore(): void {
    // A failed batch waits for the next interval: retrying at once would likely meet the same fault.
    if (this.#size >= this.#batchSize && this.#retry === null && this.#immediate === null && !this.#closed) {
      this.#immediate = setImmediate(this.#onImmediate);
    }
  }

  /** Hands one batch to the store; returns a promise when the store writes asynchronously. Never rejects. */
  #writeBatch(): Promise<void> | undefined {
    const retrying = this.#retry !== null;
    const batch = this.#retry ?? this.#take();
    this.#retry = null;
    let pending: void | Promise<void>;
    try {
      pending = this.#store.insertBatch(batch);
    } catch (err) {
      this.#failed(batch, retrying, err);
      return undefined;
    }
    if (pending === undefined) {
      this.#written += batch.length;
      return undefined;
    }
    this.#inFlightCount = batch.length;
    this.#inFlight = pending
      .then(
        () => {
          this.#written += batch.length;
        },
        (err: unknown) => this.#failed(batch, retrying, err),
      )
      .finally(() => {
        this.#inFlight = null;
        this.#inFlightCount = 0;
      });
    return this.#inFlight;
  }

  #failed(batch: Span[], retrying: boolean, err: unknown): void {
    this.#writeErrors++;
    if (!retrying) {
      // Once: a transient fault (a lock held past busy_timeout, a disk being cleaned) gets a second chance.
      this.#retry = batch;
      this.#logger.error({ err, spans: batch.length, writeErrors: this.#writeErrors }, 'failed to write spans; will retry once');
      return;
    }
    this.#dropped += batch.length;
    this.#logger.error({ err, spans: batch.length, dropped: this.#dropped, writeErrors: this.#writeErrors }, 'failed to write spans; batch dropped');
  }

  #take(): Span[] {
    const n = Math.min(this.#size, this.#batchSize);
    const batch = new Array<Span>(n);
    for (let i = 0; i < n; i++) {
      batch[i] = this.#ring[this.#head] as Span;
      this.#ring[this.#head] = undefined;
      this.#head = this.#head + 1 === this.#capacity ? 0 : this.#head + 1;
    }
    this.#size -= n;
    return batch;
  }

  #drop(): void {
    this.#dropped++;
    this.#bufferFullDrops++;
    if (this.#closed) {
      // No timer runs any more: say so at once, at most once per interval.
      this.#reportDrops(false, 'span recorded after the span writer closed; dropped');
      return;
    }
    if (this.#dropReport === null && this.#now() - this.#lastDropLog >= DROP_LOG_INTERVAL_MS) {
      this.#dropReport = setImmediate(() => {
        this.#dropReport = null;
        this.#reportDrops(false);
      });
    }
  }

  /** Logs the drops not yet reported, unless one was logged less than an interval ago (and this is not the last word). */
  #reportDrops(final: boolean, message = 'span processor buffer full'): void {
    const unreported = this.#bufferFullDrops - this.#dropsAtLastLog;
    if (unreported === 0) return;
    const now = this.#now();
    if (!final && now - this.#lastDropLog < DROP_LOG_INTERVAL_MS) return;
    this.#logger.warn({ dropped: this.#bufferFullDrops, droppedSinceLastLog: unreported, bufferSize: this.#capacity }, message);
    this.#lastDropLog = now;
    this.#dropsAtLastLog = this.#bufferFullDrops;
  }
}
