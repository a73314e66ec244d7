// The last lines a child process wrote, kept in fixed memory: at most `maxLines` lines of at most
// `maxLineChars` characters each (a longer line is cut, and the rest of it until its newline is dropped).

export class LogRing {
  readonly #maxLines: number;
  readonly #maxLineChars: number;
  readonly #lines: string[] = [];
  #partial = '';
  #dropping = false;
  /** Lines that were pushed out of the ring, so a reader knows the tail is not the whole log. */
  dropped = 0;

  constructor(maxLines = 500, maxLineChars = 2_000) {
    this.#maxLines = maxLines;
    this.#maxLineChars = maxLineChars;
  }

  /** Adds a chunk of output; calls `onLine` for each line it completes. */
  write(chunk: string, onLine?: (line: string) => void): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf('\n', start);
      const piece = chunk.slice(start, nl === -1 ? undefined : nl);
      if (!this.#dropping) {
        this.#partial += piece;
        if (this.#partial.length > this.#maxLineChars) {
          this.#partial = `${this.#partial.slice(0, this.#maxLineChars)}…`;
          this.#dropping = true;
        }
      }
      if (nl === -1) return;
      this.#push(this.#partial.replace(/\r$/, ''), onLine);
      this.#partial = '';
      this.#dropping = false;
      start = nl + 1;
    }
  }

  /** The child ended: a last line without its newline still counts. */
  end(onLine?: (line: string) => void): void {
    if (this.#partial !== '') this.#push(this.#partial, onLine);
    this.#partial = '';
    this.#dropping = false;
  }

  tail(count = this.#maxLines): string[] {
    return this.#lines.slice(-count);
  }

  #push(line: string, onLine?: (line: string) => void): void {
    this.#lines.push(line);
    if (this.#lines.length > this.#maxLines) {
      this.#lines.shift();
      this.dropped++;
    }
    onLine?.(line);
  }
}
