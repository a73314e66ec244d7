// The one interface every audit sink implements, and the error that tells the worker whether to retry.

import type { TetragonEvent } from '../tetragon-protocol.ts';

/** One event as it travels through the router: the agent's bytes plus when and in what order it arrived. */
export interface AuditRecord {
  /** Per process, from 1; a gap seen by a collector is events this sender dropped. */
  sequence: number;
  receivedAt: number;
  event: TetragonEvent;
}

export interface AuditSink {
  readonly name: string;
  readonly kind: string;
  /** Largest batch the worker hands to write(). */
  readonly maxBatch: number;
  /**
   * Writes a batch, in order; resolves only once it is stored. Throws SinkWriteError (or any error, which is
   * treated as retryable). Must stop promptly when the signal aborts.
   */
  write(batch: readonly AuditRecord[], signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export class SinkWriteError extends Error {
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SinkWriteError';
    this.retryable = retryable;
  }
}

export function isRetryable(error: unknown): boolean {
  return error instanceof SinkWriteError ? error.retryable : true;
}
