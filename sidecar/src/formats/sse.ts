// Incremental Server-Sent Events decoder (the WHATWG event-stream grammar), fed raw response chunks.
//
// It works on bytes: CR and LF never occur inside a multi-byte UTF-8 sequence, so lines can be cut at byte
// level and only the fields we read are decoded to strings. It tracks the stream offset of every event
// boundary (the end of the blank line that dispatches an event) so a caller can forward or drop whole events
// byte-exactly. Memory per event is bounded: an event larger than maxEventBytes is skipped and counted.

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;

/** Receives each dispatched event. `type` is the `event:` field ('' when absent), `data` the joined data lines. */
export type SseEventHandler = (type: string, data: string) => void;

export interface SseDecoderOptions {
  /** Largest event (all its lines, terminators included) kept in memory; larger ones are skipped. */
  maxEventBytes?: number;
  /**
   * Return true to skip decoding the data of events of this type (the `event:` line must come first, as
   * every provider sends it). Saves turning uninteresting payloads into strings.
   */
  skipDataOf?: (type: string) => boolean;
}

export const DEFAULT_MAX_SSE_EVENT_BYTES = 4 * 1024 * 1024;

export class SseDecoder {
  /** Stream offset just past the last event boundary (blank line) seen; inside the handler, the event's end. */
  boundary = 0;
  /** Stream offset where the event being dispatched starts; valid inside the handler. */
  eventStart = 0;
  /** Events skipped because they exceeded maxEventBytes. */
  oversizedEvents = 0;

  readonly #onEvent: SseEventHandler;
  readonly #maxEventBytes: number;
  readonly #skipDataOf: ((type: string) => boolean) | undefined;
  /** Stream offset of the first byte of the chunk being pushed. */
  #offset = 0;
  /** An unterminated line is carried over from earlier chunks. */
  #carrying = false;
  /** Content bytes of the carried line (counted even when not kept). */
  #carryBytes = 0;
  #lineParts: Buffer[] = [];
  /** The carried line ended with CR: complete, unless the next chunk starts with the LF of a CRLF. */
  #pendingCr = false;
  #type = '';
  #data: string | null = null;
  #hasData = false;
  #skipData = false;
  #eventBytes = 0;
  #oversized = false;

  constructor(onEvent: SseEventHandler, options: SseDecoderOptions = {}) {
    this.#onEvent = onEvent;
    this.#maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_SSE_EVENT_BYTES;
    this.#skipDataOf = options.skipDataOf;
  }

  /** True while the current event is being skipped for its size: its bytes are not worth holding back. */
  get inOversizedEvent(): boolean {
    return this.#oversized;
  }

  /** Bytes received after the last event boundary: a partial event. */
  get pendingBytes(): number {
    return this.#offset - this.boundary;
  }

  push(chunk: Buffer): void {
    const length = chunk.length;
    let pos = 0;
    if (this.#pendingCr && length > 0) {
      this.#pendingCr = false;
      if (chunk[0] === LF) pos = 1;
      this.#completeCarried(chunk, 0, 0, this.#offset + pos, 1 + pos);
    }
    // Cached positions of the next CR and LF, so a chunk without CRs is not rescanned for every line.
    let nextLf = -2;
    let nextCr = -2;
    while (pos < length) {
      if (nextLf !== -1 && nextLf < pos) nextLf = chunk.indexOf(LF, pos);
      if (nextCr !== -1 && nextCr < pos) nextCr = chunk.indexOf(CR, pos);
      let end: number;
      if (nextCr === -1) end = nextLf;
      else if (nextLf === -1) end = nextCr;
      else end = nextCr < nextLf ? nextCr : nextLf;
      if (end === -1) {
        this.#carry(chunk, pos, length);
        break;
      }
      let next = end + 1;
      if (chunk[end] === CR) {
        if (next === length) {
          // CR or CRLF? Decided by the next chunk (or the end of the stream).
          this.#carry(chunk, pos, end);
          this.#pendingCr = true;
          break;
        }
        if (chunk[next] === LF) next++;
      }
      if (this.#carrying) {
        this.#completeCarried(chunk, pos, end, this.#offset + next, next - end);
      } else if (end === pos) {
        this.#dispatch(this.#offset + next);
      } else {
        this.#eventBytes += next - pos;
        if (this.#eventBytes > this.#maxEventBytes) this.#markOversized();
        if (!this.#oversized) this.#field(chunk, pos, end);
      }
      pos = next;
    }
    this.#offset += length;
  }

  /** Called at end of stream. Returns true when the stream stopped in the middle of an event. */
  end(): boolean {
    if (this.#pendingCr) {
      this.#pendingCr = false;
      this.#completeCarried(EMPTY, 0, 0, this.#offset, 1);
    }
    return this.pendingBytes > 0;
  }

  #carry(chunk: Buffer, from: number, to: number): void {
    this.#carrying = true;
    const size = to - from;
    if (size === 0) return;
    this.#carryBytes += size;
    this.#eventBytes += size;
    if (this.#eventBytes > this.#maxEventBytes) this.#markOversized();
    // Copy: the tail is small, and holding a view would pin the whole chunk.
    if (!this.#oversized) this.#lineParts.push(Buffer.from(chunk.subarray(from, to)));
  }

  /** Ends the carried line with `chunk[from, contentEnd)` plus a terminator of `terminatorBytes`. */
  #completeCarried(chunk: Buffer, from: number, contentEnd: number, boundaryAfter: number, terminatorBytes: number): void {
    const empty = this.#carryBytes === 0 && contentEnd === from;
    const parts = this.#lineParts;
    this.#carrying = false;
    this.#carryBytes = 0;
    this.#lineParts = [];
    if (empty) {
      this.#dispatch(boundaryAfter);
      return;
    }
    this.#eventBytes += contentEnd - from + terminatorBytes;
    if (this.#eventBytes > this.#maxEventBytes) this.#markOversized();
    if (this.#oversized) return;
    if (contentEnd > from) parts.push(chunk.subarray(from, contentEnd));
    const line = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    this.#field(line, 0, line.length);
  }

  /** Handles one non-empty line `buf[from, to)` (terminator excluded). */
  #field(buf: Buffer, from: number, to: number): void {
    if (buf[from] === COLON) return; // comment
    let colon = buf.indexOf(COLON, from);
    if (colon === -1 || colon > to) colon = to;
    let valueStart = colon + 1;
    if (valueStart < to && buf[valueStart] === SPACE) valueStart++;
    if (valueStart > to) valueStart = to;
    const nameLength = colon - from;
    if (nameLength === 4 && buf[from] === 0x64 && buf[from + 1] === 0x61 && buf[from + 2] === 0x74 && buf[from + 3] === 0x61) {
      this.#hasData = true;
      if (this.#skipData) return;
      const value = buf.toString('utf8', valueStart, to);
      this.#data = this.#data === null ? value : `${this.#data}\n${value}`;
    } else if (nameLength === 5 && buf.toString('latin1', from, colon) === 'event') {
      this.#type = buf.toString('utf8', valueStart, to);
      if (this.#skipDataOf !== undefined && !this.#hasData) this.#skipData = this.#skipDataOf(this.#type);
    }
    // `id` and `retry` do not matter to a proxy that never reconnects; unknown fields are ignored by the grammar.
  }

  #markOversized(): void {
    if (this.#oversized) return;
    this.oversizedEvents++;
    this.#oversized = true;
    this.#data = null;
    this.#lineParts = [];
  }

  #dispatch(boundaryAfter: number): void {
    const type = this.#type;
    const data = this.#data;
    const deliver = this.#hasData && !this.#oversized;
    const skipped = this.#skipData;
    this.#type = '';
    this.#data = null;
    this.#hasData = false;
    this.#skipData = false;
    this.#oversized = false;
    this.#eventBytes = 0;
    this.eventStart = this.boundary;
    this.boundary = boundaryAfter;
    if (deliver) this.#onEvent(type, skipped ? '' : (data ?? ''));
  }
}

const EMPTY = Buffer.alloc(0);
