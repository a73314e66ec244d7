// Takes finished spans off the request path and hands them to the store in small batches.
// record() only stores a reference in a preallocated ring. Batches leave on a timer or, once batchSize are
// waiting, on the next turn of the event loop; one batch is in flight at a time, so memory stays bounded
// by bufferSize plus one batch. The SQLite store runs the transaction in a worker thread (ADR 0400).
// A remote store (BigQuery, Firestore) that is down fails its writes as retryable: the batch is kept and tried
// again with exponential backoff while new spans wait in the ring, so a dead warehouse costs bounded memory
// and counted drops, never a request's time (ADR 0402).

import type { Logger } from 'pino';
import type { Span } from './span.ts';
import { isRetryableWriteError, type SpanStore } from './span-store.ts';

export interface SpanWriterOptions {
  /** Spans waiting to be written; beyond this they are dropped, counted and logged. */
  bufferSize: number;
  /** Spans per store transaction. */
  batchSize: number;
  /** Longest a span waits before it is written when fewer than batchSize are buffered. */
  flushIntervalMs: number;
  /**
   * Backoff for failures the store marks retryable (SpanStoreWriteError). Any other failure is retried once at
   * the next interval, then its batch is dropped.
   */
  retry?: SpanRetryPolicy;
  /** How long close() may take to write what is left; spans still unwritten then are dropped, counted and logged. */
  closeTimeoutMs?: number;
}

export interface SpanRetryPolicy {
  /** Attempts per batch, the first included. */
  maxAttempts: number;
  /** Wait before the second attempt; doubled for each further one (with jitter), up to maxBackoffMs. */
  initialBackoffMs: number;
  maxBackoffMs: number;
}

/** For stores that say nothing about retrying: one more try at the next interval. */
const RETRY_ONCE: SpanRetryPolicy = { maxAttempts: 2, initialBackoffMs: 0, maxBackoffMs: 0 };
export const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;

export interface SpanWriterStats {
  /** Spans accepted into the buffer. */
  recorded: number;
  written: number;
  /** Spans lost: buffer full, or a batch that failed all its attempts. */
  dropped: number;
  buffered: number;
  /** Failed store writes (each retry counts). */
  writeErrors: number;
  /** Of `dropped`, the spans lost because the buffer was full (the rest were in batches that failed all their attempts). */
  droppedBufferFull: number;
  /** The store's last write attempt failed (cleared by the next one that succeeds). */
  failing: boolean;
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
  /** A batch that failed and is retried before anything newer, its attempts so far, and when to try next. */
  #retry: Span[] | null = null;
  #retryAttempts = 0;
  #retryAt = 0;
  readonly #retryPolicy: SpanRetryPolicy;
  readonly #closeTimeoutMs: number;
  #lastError: { at: string; message: string } | null = null;
  /** The batch an asynchronous store is writing, and its size. */
  #inFlight: Promise<void> | null = null;
  #inFlightCount = 0;
  /** The in-flight batch close() stopped waiting for. */
  #abandoned: Span[] | null = null;
  #inFlightBatch: Span[] | null = null;

  #recorded = 0;
  #written = 0;
  #dropped = 0;
  #writeErrors = 0;
  #bufferFullDrops = 0;
  #failing = false;
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
    // The config validator refuses this (storage.batchSize must not exceed bufferSize, as the CRD's rule says):
    // a writer is never built with a batch its buffer could not fill.
    if (opts.batchSize > opts.bufferSize) throw new RangeError(`span writer batchSize ${opts.batchSize} must not exceed bufferSize ${opts.bufferSize}`);
    this.#store = store;
    this.#logger = logger;
    this.#now = now;
    this.#capacity = opts.bufferSize;
    this.#batchSize = opts.batchSize;
    this.#ring = new Array<Span | undefined>(this.#capacity);
    this.#retryPolicy = opts.retry ?? RETRY_ONCE;
    this.#closeTimeoutMs = opts.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
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

  /**
   * Writes everything buffered now. Resolves when that is done or given up (stats() tells), and at the latest
   * after `timeoutMs`, leaving what is unwritten buffered.
   */
  async flush(timeoutMs = Infinity): Promise<void> {
    const deadline = this.#now() + timeoutMs;
    // Bounded by what is buffered now (each batch is written, or given up after its attempts), so spans
    // recorded meanwhile cannot keep it going.
    const attempts = Math.max(this.#retryPolicy.maxAttempts, RETRY_ONCE.maxAttempts);
    let passes = attempts * (Math.ceil(this.#size / this.#batchSize) + (this.#retry === null ? 0 : 1) + 1);
    while (passes-- > 0) {
      const left = deadline - this.#now();
      if (left <= 0) return;
      if (this.#inFlight !== null) {
        if (!(await settlesWithin(this.#inFlight, left))) return;
        continue;
      }
      if (this.#size === 0 && this.#retry === null) return;
      // A batch that is backing off waits for its time even here: hammering a store that is down helps nobody.
      const wait = this.#retry === null ? 0 : this.#retryAt - this.#now();
      if (wait > 0) {
        if (wait >= left) return;
        await new Promise((resolve) => setTimeout(resolve, wait));
        passes++;
        continue;
      }
      await this.#writeBatch();
    }
  }

  /**
   * Stops the timer and writes what is left, for at most closeTimeoutMs (a store that is down must not hold
   * up shutdown). Spans still unwritten then are dropped, counted and logged.
   */
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
    await this.flush(this.#closeTimeoutMs);
    const unwritten = this.#size + (this.#retry?.length ?? 0) + this.#inFlightCount;
    if (unwritten > 0) {
      this.#dropped += unwritten;
      this.#logger.error(
        { spans: unwritten, dropped: this.#dropped, writeErrors: this.#writeErrors, closeTimeoutMs: this.#closeTimeoutMs },
        'spans not written before shutdown; dropped',
      );
      this.#take(this.#size);
      this.#retry = null;
      this.#abandoned = this.#inFlightBatch;
    }
  }

  /** The last failed write, for the runtime health view; null when none failed yet. */
  lastWriteError(): { at: string; message: string } | null {
    return this.#lastError;
  }

  stats(): SpanWriterStats {
    return {
      recorded: this.#recorded,
      written: this.#written,
      dropped: this.#dropped,
      buffered: this.#size + (this.#retry?.length ?? 0) + this.#inFlightCount,
      writeErrors: this.#writeErrors,
      droppedBufferFull: this.#bufferFullDrops,
      failing: this.#failing,
    };
  }

  readonly #onImmediate = (): void => {
    this.#immediate = null;
    this.#writeSome();
  };

  /** One batch per event-loop turn, so a backlog never holds the loop for more than one batch. */
  #writeSome(): void {
    if (this.#inFlight !== null || (this.#size === 0 && this.#retry === null)) return;
    // A batch backing off waits for its time; everything newer waits behind it, in the ring.
    if (this.#retry !== null && this.#now() < this.#retryAt) return;
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
    const attempt = this.#retry === null ? 1 : this.#retryAttempts + 1;
    const batch = this.#retry ?? this.#take(this.#batchSize);
    this.#retry = null;
    let pending: void | Promise<void>;
    try {
      pending = this.#store.insertBatch(batch);
    } catch (err) {
      this.#failed(batch, attempt, err);
      return undefined;
    }
    if (pending === undefined) {
      this.#written += batch.length;
      this.#failing = false;
      return undefined;
    }
    this.#inFlightCount = batch.length;
    this.#inFlightBatch = batch;
    this.#inFlight = pending
      .then(
        () => {
          this.#written += batch.length;
          this.#failing = false;
          // close() gave up on this batch and counted it as dropped; it made it after all.
          if (this.#abandoned === batch) this.#dropped -= batch.length;
        },
        (err: unknown) => this.#failed(batch, attempt, err),
      )
      .finally(() => {
        this.#inFlight = null;
        this.#inFlightCount = 0;
        this.#inFlightBatch = null;
      });
    return this.#inFlight;
  }

  #failed(batch: Span[], attempt: number, err: unknown): void {
    this.#writeErrors++;
    this.#failing = true;
    this.#lastError = { at: new Date(this.#now()).toISOString(), message: err instanceof Error ? err.message : String(err) };
    const retryable = isRetryableWriteError(err);
    const policy = retryable ? this.#retryPolicy : RETRY_ONCE;
    if (attempt < policy.maxAttempts) {
      this.#retry = batch;
      this.#retryAttempts = attempt;
      // Exponential with jitter, so sidecars that lost the same warehouse do not come back in step.
      const cap = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** (attempt - 1));
      const backoff = Math.round(cap * (0.5 + Math.random() / 2));
      this.#retryAt = this.#now() + backoff;
      if (retryable) {
        this.#logger.error(
          { err, spans: batch.length, attempt, maxAttempts: policy.maxAttempts, retryInMs: backoff, writeErrors: this.#writeErrors },
          'failed to write spans; will retry',
        );
      } else {
        // Once: a transient fault (a lock held past busy_timeout, a disk being cleaned) gets a second chance.
        this.#logger.error({ err, spans: batch.length, writeErrors: this.#writeErrors }, 'failed to write spans; will retry once');
      }
      return;
    }
    this.#dropped += batch.length;
    this.#logger.error({ err, spans: batch.length, attempts: attempt, dropped: this.#dropped, writeErrors: this.#writeErrors }, 'failed to write spans; batch dropped');
  }

  #take(max: number): Span[] {
    const n = Math.min(this.#size, max);
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

/** True when `promise` settled within `ms`; it keeps running either way. */
export function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  if (ms === Infinity) return promise.then(() => true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const settled = () => {
      clearTimeout(timer);
      resolve(true);
    };
    promise.then(settled, settled);
  });
}
