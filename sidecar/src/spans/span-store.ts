import type { Span } from './span.ts';
import type { SpendQuery, SpendReport } from './spend.ts';

/**
 * Where finished spans are kept: SQLite, DuckDB, BigQuery, Firestore or memory (storage.kind). Only the
 * SpanWriter calls insertBatch, one batch at a time, so no request ever waits on a store. Reads may be
 * synchronous (an embedded file) or asynchronous (a remote store); callers await either.
 */
export interface SpanStore {
  /**
   * Stores all spans or none (one transaction or one request). A store may write elsewhere (a worker thread,
   * a remote service) and return a promise; failure is a throw or a rejection, a SpanStoreWriteError when the
   * store knows whether trying again can help. Must not keep the array after it returns or settles.
   */
  insertBatch(spans: readonly Span[]): void | Promise<void>;
  /** The newest spans first (by start time), at most `limit`. */
  recent(limit: number): Span[] | Promise<Span[]>;
  count(): number | Promise<number>;
  /** Cost, calls and tokens per group over a window, computed by the store (spend.ts). */
  spend(query: SpendQuery): SpendReport | Promise<SpendReport>;
  /** Call after the SpanWriter is closed; resolves once the file or client is closed. */
  close(): void | Promise<void>;
}

/** The span file (or its folder) cannot be created or opened: a setting to fix, so start-up reports it as one. */
export class SpanStoreOpenError extends Error {
  readonly path: string;
  constructor(path: string, cause: unknown) {
    super(`cannot open span store ${path}: ${(cause as Error).message}`, { cause });
    this.name = 'SpanStoreOpenError';
    this.path = path;
  }
}

/**
 * A failed write that says whether trying again can help: a remote store that is unreachable, overloaded or
 * timing out is retryable (the writer backs off and tries again), a row the store refuses is not.
 */
export class SpanStoreWriteError extends Error {
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SpanStoreWriteError';
    this.retryable = retryable;
  }
}

export function isRetryableWriteError(error: unknown): boolean {
  return error instanceof SpanStoreWriteError && error.retryable;
}

/** A store that reads on the calling thread (SQLite's reads, memory): recent() and count() answer at once. */
export interface LocalSpanStore extends SpanStore {
  recent(limit: number): Span[];
  count(): number;
}
