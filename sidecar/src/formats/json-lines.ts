// JSON Lines read as they arrive, in chunks cut anywhere: one JSON value a line, handed on as it ends. Only the
// line being read is held, up to a bound; a file of any length is never held whole.

/** What a line was: its value, or why it could not be read. */
export type JsonLine = { value: unknown } | { unreadable: 'not JSON' | 'too long' };

export class JsonLines {
  readonly #onLine: (line: JsonLine) => void;
  readonly #maxLineBytes: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #overlong = false;

  constructor(maxLineBytes: number, onLine: (line: JsonLine) => void) {
    this.#maxLineBytes = maxLineBytes;
    this.#onLine = onLine;
  }

  write(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      this.#hold(chunk.subarray(start, nl));
      this.#lineEnded();
      start = nl + 1;
    }
    if (start < chunk.length) this.#hold(chunk.subarray(start));
  }

  /** The input ended cleanly: a last line without its newline is whole. */
  end(): void {
    if (this.#pendingBytes > 0 || this.#overlong) this.#lineEnded();
  }

  #hold(bytes: Buffer): void {
    if (this.#overlong || bytes.length === 0) return;
    if (this.#pendingBytes + bytes.length > this.#maxLineBytes) {
      this.#overlong = true;
      this.#pending = [];
      this.#pendingBytes = 0;
      return;
    }
    // A copy: the chunk is written on to the caller and its memory may be reused.
    this.#pending.push(Buffer.from(bytes));
    this.#pendingBytes += bytes.length;
  }

  #lineEnded(): void {
    const overlong = this.#overlong;
    const text = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending, this.#pendingBytes);
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#overlong = false;
    if (overlong) return this.#onLine({ unreadable: 'too long' });
    if (text.every((byte) => byte === 0x20 || byte === 0x0d || byte === 0x09)) return;
    let value: unknown;
    try {
      value = JSON.parse(text.toString('utf8'));
    } catch {
      return this.#onLine({ unreadable: 'not JSON' });
    }
    this.#onLine({ value });
  }
}
