// The one interface every usage extractor implements. It sits on the response path of every proxied call,
// so write() is on the hot path: it must not copy or re-encode bytes it forwards unchanged.

import type { UsageResult } from './usage.ts';

export interface UsageExtractor {
  /** Sees every response chunk on its way to the caller; returns the bytes to forward (normally the same Buffer). */
  write(chunk: Buffer): Buffer;
  /**
   * Bytes still held back when the upstream response ended, to send before ending the caller's response.
   * Only an extractor that removes injected usage holds bytes back (an SSE event not yet complete); for every
   * other one this returns an empty Buffer. Call it once, after the last write() and before end().
   */
  flush(): Buffer;
  /** Called once when the upstream response ended (or was cut: pass the reason). */
  end(streamError?: string): UsageResult;
  /**
   * The response's own last event has been read (a stream's [DONE], message_stop, finish reason): its usage
   * is final whatever the transport does next. A caller who leaves now has had the whole answer.
   */
  readonly sawEnd: boolean;
}

export const NO_BYTES: Buffer = Buffer.alloc(0);

/** For responses that carry no usage (error statuses): forwards everything, reads nothing. */
export class NoUsageExtractor implements UsageExtractor {
  /** An error body owes no usage: nothing to wait for. */
  readonly sawEnd = true;
  write(chunk: Buffer): Buffer {
    return chunk;
  }
  flush(): Buffer {
    return NO_BYTES;
  }
  end(streamError?: string): UsageResult {
    return streamError === undefined ? { usage: null } : { usage: null, streamError };
  }
}

/** Adds the proxy's own reason for a cut stream, which wins over what the extractor inferred. */
export function withStreamError(result: UsageResult, streamError: string | undefined): UsageResult {
  if (streamError === undefined) return result;
  return { ...result, streamError };
}
