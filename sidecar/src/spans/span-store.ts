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
