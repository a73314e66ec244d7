// Usage extraction for an SSE response. A format-specific reader sees each event; the extractor forwards
// chunks untouched, unless it filters: then it forwards only complete events and drops those the reader
// rejects (the usage chunk the proxy asked for on the caller's behalf). Held-back bytes are one partial event,
// bounded by the decoder's event limit: an over-size event is passed through as it arrives.

import type { Logger } from 'pino';
import { SseDecoder } from '../formats/sse.ts';
import type { UsageExtractor } from './usage-extractor.ts';
import { NO_BYTES, withStreamError } from './usage-extractor.ts';
import type { UsageResult } from './usage.ts';

export interface SseUsageReader {
  /** Event types whose data the reader never needs (saves decoding it). */
  skipDataOf?: (type: string) => boolean;
  /** Sees one event; returns true to keep it from the caller (honoured only when filtering). */
  event(type: string, data: string): boolean;
  /** The usage seen; `cutMidEvent` when the stream stopped inside an event. */
  result(cutMidEvent: boolean): UsageResult;
  /** The stream's last event has been seen (UsageExtractor.sawEnd). */
  readonly sawEnd: boolean;
}

export class SseUsageExtractor implements UsageExtractor {
  readonly #reader: SseUsageReader;
  readonly #decoder: SseDecoder;
  readonly #filter: boolean;
  readonly #logger: Logger | undefined;
  /** Drop ranges [start, end) in stream offsets, found while decoding the current chunk. */
  readonly #drops: number[] = [];
  /** Stream offset of the next byte to forward. */
  #forwarded = 0;
  /** Bytes [forwarded, streamOffset) received but not forwarded yet: the start of an incomplete event. */
  #held: Buffer | null = null;
  #streamOffset = 0;
  #decoderEnded = false;
  #cutMidEvent = false;
  #events = 0;

  constructor(reader: SseUsageReader, options: { filter?: boolean; logger?: Logger; maxEventBytes?: number } = {}) {
    this.#reader = reader;
    this.#filter = options.filter ?? false;
    this.#logger = options.logger;
    this.#decoder = new SseDecoder(
      (type, data) => {
        this.#events++;
        let drop = false;
        try {
          drop = reader.event(type, data);
        } catch {
          // A reader bug must never break the caller's stream.
        }
        if (drop && this.#filter) this.#drops.push(this.#decoder.eventStart, this.#decoder.boundary);
      },
      { ...(reader.skipDataOf ? { skipDataOf: reader.skipDataOf } : {}), ...(options.maxEventBytes ? { maxEventBytes: options.maxEventBytes } : {}) },
    );
  }

  get sawEnd(): boolean {
    return this.#reader.sawEnd;
  }

  write(chunk: Buffer): Buffer {
    if (this.#decoderEnded) return chunk;
    this.#decoder.push(chunk);
    this.#streamOffset += chunk.length;
    if (!this.#filter) return chunk;
    const boundary = this.#decoder.inOversizedEvent ? this.#streamOffset : this.#decoder.boundary;
    const cut = boundary < this.#forwarded ? this.#forwarded : boundary;
    if (this.#held === null && this.#drops.length === 0 && cut === this.#streamOffset) {
      this.#forwarded = cut;
      return chunk;
    }
    return this.#release(chunk, cut);
  }

  flush(): Buffer {
    if (!this.#filter) {
      this.#finishDecoding();
      return NO_BYTES;
    }
    this.#finishDecoding();
    // The stream is over: whatever was held (an unterminated event) goes to the caller as it came.
    return this.#release(NO_BYTES, this.#streamOffset);
  }

  end(streamError?: string): UsageResult {
    this.#finishDecoding();
    if (this.#decoder.oversizedEvents > 0) {
      this.#logger?.warn({ skippedEvents: this.#decoder.oversizedEvents }, 'usage extractor skipped oversized stream events');
    }
    let result: UsageResult;
    try {
      result = this.#reader.result(this.#cutMidEvent);
    } catch (error) {
      result = { usage: null, streamError: `usage could not be read: ${(error as Error).message}` };
    }
    result.streamEvents = this.#events;
    return withStreamError(result, streamError);
  }

  #finishDecoding(): void {
    if (this.#decoderEnded) return;
    this.#decoderEnded = true;
    this.#cutMidEvent = this.#decoder.end();
  }

  /** Forwards [forwarded, cut) from the held bytes and `chunk`, minus the drop ranges; holds back the rest. */
  #release(chunk: Buffer, cut: number): Buffer {
    const held = this.#held;
    const windowStart = this.#forwarded;
    const window = held === null ? chunk : chunk.length === 0 ? held : Buffer.concat([held, chunk], held.length + chunk.length);
    const drops = this.#drops;
    const pieces: Buffer[] = [];
    let pos = windowStart;
    for (let i = 0; i < drops.length; i += 2) {
      const start = Math.max(drops[i]!, pos);
      const end = Math.min(drops[i + 1]!, cut);
      if (end <= start) continue;
      if (start > pos) pieces.push(window.subarray(pos - windowStart, start - windowStart));
      pos = end;
    }
    drops.length = 0;
    if (cut > pos) pieces.push(window.subarray(pos - windowStart, cut - windowStart));
    const windowEnd = windowStart + window.length;
    this.#held = cut < windowEnd ? Buffer.from(window.subarray(cut - windowStart)) : null;
    this.#forwarded = cut;
    if (pieces.length === 0) return NO_BYTES;
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  }
}
