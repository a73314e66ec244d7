// Incremental reader for a JSON array written progressively, as Gemini's streamGenerateContent does without
// `alt=sse`: `[{...}\n,\r\n{...}\n]`. It hands over each element's bytes as soon as the element is complete.
//
// It only tracks nesting depth and string state, skipping string contents with indexOf: quotes, brackets and
// backslashes are ASCII and never occur inside a multi-byte UTF-8 sequence. Element contents are not
// validated (the consumer parses the ones it cares about). An element larger than maxElementBytes is skipped and counted, so memory stays bounded.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Receives one complete element: a view into the pushed chunk when it fit in one (the parser never writes to it). */
export type JsonElementHandler = (element: Buffer) => void;

export const DEFAULT_MAX_JSON_ELEMENT_BYTES = 4 * 1024 * 1024;

const BEFORE_ARRAY = 0;
const EXPECT_FIRST = 1; // after '[': an element or ']'
const EXPECT_ELEMENT = 2; // after ',': an element
const IN_ELEMENT = 3;
const AFTER_ELEMENT = 4; // ',' or ']'
const DONE = 5;
const FAILED = 6;

function isWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function isDelimiter(byte: number): boolean {
  return byte === COMMA || byte === CLOSE_BRACKET || isWhitespace(byte);
}

export class JsonArrayStreamParser {
  /** Elements skipped because they exceeded maxElementBytes. */
  oversizedElements = 0;
  /** Set when the input is not a JSON array; parsing stops there. */
  error: string | undefined;

  readonly #onElement: JsonElementHandler;
  readonly #maxElementBytes: number;
  #state = BEFORE_ARRAY;
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** The element is a bare scalar (number, true, null…), which ends at the next delimiter. */
  #scalar = false;
  #parts: Buffer[] = [];
  #elementBytes = 0;
  #oversized = false;
  #offset = 0;
  /** Where the element being read starts in the chunk being pushed (0: it started in an earlier one). */
  #start = -1;
  // Next quote and backslash positions in the chunk being pushed, so string contents are skipped with indexOf.
  #nextQuote = -1;
  #nextBackslash = -1;

  constructor(onElement: JsonElementHandler, options: { maxElementBytes?: number } = {}) {
    this.#onElement = onElement;
    this.#maxElementBytes = options.maxElementBytes ?? DEFAULT_MAX_JSON_ELEMENT_BYTES;
  }

  /** True once the closing `]` was read. */
  get complete(): boolean {
    return this.#state === DONE;
  }

  push(chunk: Buffer): void {
    const length = chunk.length;
    let pos = 0;
    this.#start = this.#state === IN_ELEMENT ? 0 : -1;
    this.#nextQuote = -1;
    this.#nextBackslash = -1;
    while (pos < length && this.#state !== FAILED) {
      pos = this.#state === IN_ELEMENT && this.#inString ? this.#inStringAt(chunk, pos) : this.#byteAt(chunk, pos);
    }
    if (this.#state === IN_ELEMENT && this.#start !== -1) this.#keep(chunk, this.#start, length);
    this.#offset += length;
  }

  /** Inside a string: skips to its next quote or backslash with indexOf; returns where to read on. */
  #inStringAt(chunk: Buffer, from: number): number {
    if (this.#escaped) {
      this.#escaped = false;
      return from + 1;
    }
    const length = chunk.length;
    if (this.#nextQuote < from) {
      this.#nextQuote = chunk.indexOf(QUOTE, from);
      if (this.#nextQuote === -1) this.#nextQuote = length;
    }
    if (this.#nextBackslash < from) {
      this.#nextBackslash = chunk.indexOf(BACKSLASH, from);
      if (this.#nextBackslash === -1) this.#nextBackslash = length;
    }
    const pos = this.#nextQuote < this.#nextBackslash ? this.#nextQuote : this.#nextBackslash;
    if (pos >= length) return length;
    if (pos === this.#nextBackslash) {
      this.#escaped = true;
    } else {
      this.#inString = false;
      if (this.#depth === 0) this.#emit(chunk, this.#start, pos + 1);
    }
    return pos + 1;
  }

  /** One byte outside a string; returns where to read on. */
  #byteAt(chunk: Buffer, pos: number): number {
    const byte = chunk[pos]!;
    switch (this.#state) {
      case IN_ELEMENT:
        return this.#elementByte(chunk, pos, byte);
      case BEFORE_ARRAY:
        if (byte === OPEN_BRACKET) this.#state = EXPECT_FIRST;
        else if (!isWhitespace(byte)) this.#fail(`expected '[' at byte ${this.#offset + pos}`);
        break;
      case EXPECT_FIRST:
      case EXPECT_ELEMENT:
        this.#elementStart(byte, pos);
        break;
      case AFTER_ELEMENT:
        if (byte === COMMA) this.#state = EXPECT_ELEMENT;
        else if (byte === CLOSE_BRACKET) this.#state = DONE;
        else if (!isWhitespace(byte)) this.#fail(`expected ',' or ']' at byte ${this.#offset + pos}`);
        break;
      case DONE:
        if (!isWhitespace(byte)) this.#fail(`unexpected data after the closing ']' at byte ${this.#offset + pos}`);
        break;
    }
    return pos + 1;
  }

  /** A byte of an element outside its strings: nesting, a string's start, a scalar's end. */
  #elementByte(chunk: Buffer, pos: number, byte: number): number {
    if (this.#scalar) {
      if (isDelimiter(byte)) {
        this.#emit(chunk, this.#start, pos);
        return pos; // the delimiter is read in AFTER_ELEMENT
      }
    } else if (byte === QUOTE) {
      this.#inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      this.#depth++;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      this.#depth--;
      if (this.#depth === 0) this.#emit(chunk, this.#start, pos + 1);
    }
    return pos + 1;
  }

  /** Where an element (or the array's end) is expected. */
  #elementStart(byte: number, pos: number): void {
    if (isWhitespace(byte)) return;
    if (byte === CLOSE_BRACKET && this.#state === EXPECT_FIRST) {
      this.#state = DONE;
      return;
    }
    if (byte === COMMA || byte === CLOSE_BRACKET) {
      this.#fail(`unexpected '${String.fromCharCode(byte)}' at byte ${this.#offset + pos}`);
      return;
    }
    this.#state = IN_ELEMENT;
    this.#start = pos;
    this.#elementBytes = 0;
    this.#inString = byte === QUOTE;
    this.#scalar = byte !== QUOTE && byte !== OPEN_BRACE && byte !== OPEN_BRACKET;
    this.#depth = byte === OPEN_BRACE || byte === OPEN_BRACKET ? 1 : 0;
  }

  /** Called at end of input. Returns an error text when the array was not complete. */
  end(): string | undefined {
    if (this.error) return this.error;
    if (this.#state === IN_ELEMENT && this.#scalar) {
      // A scalar can only be terminated by a delimiter; the input ended right after it.
      this.#emit(EMPTY, 0, 0);
    }
    if (this.#state !== DONE) return this.#state === BEFORE_ARRAY && this.#offset === 0 ? 'empty response' : 'JSON array ended before its closing ]';
    return undefined;
  }

  #keep(chunk: Buffer, from: number, to: number): void {
    this.#elementBytes += to - from;
    if (this.#elementBytes > this.#maxElementBytes && !this.#oversized) {
      this.#oversized = true;
      this.oversizedElements++;
      this.#parts = [];
    }
    // Copy: a partial element is held across chunks, and a view would pin each whole chunk.
    if (!this.#oversized && to > from) this.#parts.push(Buffer.from(chunk.subarray(from, to)));
  }

  #emit(chunk: Buffer, from: number, to: number): void {
    this.#state = AFTER_ELEMENT;
    const oversized = this.#oversized || this.#elementBytes + (to - from) > this.#maxElementBytes;
    if (oversized && !this.#oversized) this.oversizedElements++;
    this.#oversized = false;
    const parts = this.#parts;
    this.#parts = [];
    this.#elementBytes = 0;
    if (oversized) return;
    if (parts.length === 0) {
      this.#onElement(chunk.subarray(from, to));
      return;
    }
    if (to > from) parts.push(chunk.subarray(from, to));
    this.#onElement(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  #fail(message: string): void {
    this.error = message;
    this.#state = FAILED;
    this.#parts = [];
  }
}

const EMPTY = Buffer.alloc(0);
