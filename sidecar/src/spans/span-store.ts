import type { Span } from './span.ts';

/**
 * Where finished spans are kept. Only the SpanWriter calls insertBatch, one batch at a time, so no request
 * ever waits on a store.
 */
export interface SpanStore {
  /**
   * Stores all spans or none (one transaction). A store may write elsewhere (a worker thread) and return a
   * promise; failure is a throw or a rejection. Must not keep the array after it returns or settles.
   */
  insertBatch(spans: readonly Span[]): void | Promise<void>;
  /** The newest spans first (by start time), at most `limit`. */
  recent(limit: number): Span[];
  count(): number;
  /** Call after the SpanWriter is closed; resolves once the file is closed. */
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
