// Appends text to a file in pieces of about PIECE_BYTES, so what a batch costs in memory is one piece and
// not the whole batch: a batch of large events built as one string can pass the longest string V8 holds
// (~512 Mi characters) and throw `RangeError: Invalid string length`, and on a small heap it is too much
// memory long before that.

import type { FileHandle } from 'node:fs/promises';

export const PIECE_BYTES = 1024 * 1024;
/** Raw bytes per base64 piece: a multiple of 3, so the pieces concatenate to the base64 of the whole. */
const BASE64_RAW_PIECE = 3 * 256 * 1024;

/** Length in bytes of the base64 text of `rawBytes` bytes (with padding). */
export function base64Length(rawBytes: number): number {
  return 4 * Math.ceil(rawBytes / 3);
}

export class PiecewiseAppend {
  #file: FileHandle;
  #pending: string[] = [];
  #pendingBytes = 0;
  #pendingRecords = 0;
  #committed = 0;

  constructor(file: FileHandle) {
    this.#file = file;
  }

  /** Records (lines) whose last piece is in the file. */
  get committed(): number {
    return this.#committed;
  }

  /**
   * Queues text of `bytes` UTF-8 bytes; appends the queued pieces once they reach PIECE_BYTES. `endsRecord`:
   * this piece is the last of a record, which counts as committed once it is appended.
   */
  async add(text: string, bytes = Buffer.byteLength(text), endsRecord = false): Promise<void> {
    if (bytes >= PIECE_BYTES && !endsRecord) {
      // A large piece (one event's JSON) is written as it is: joining it to the others would copy it.
      await this.flush();
      await this.#file.appendFile(text);
      return;
    }
    this.#pending.push(text);
    this.#pendingBytes += bytes;
    if (endsRecord) this.#pendingRecords++;
    if (this.#pendingBytes >= PIECE_BYTES) await this.flush();
  }

  /** Queues the base64 text of `raw`, a piece at a time. */
  async addBase64(raw: Buffer): Promise<void> {
    for (let at = 0; at < raw.length; at += BASE64_RAW_PIECE) {
      const piece = raw.subarray(at, at + BASE64_RAW_PIECE).toString('base64');
      await this.add(piece, piece.length);
    }
  }

  async flush(): Promise<void> {
    if (this.#pending.length === 0) return;
    const text = this.#pending.join('');
    const records = this.#pendingRecords;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#pendingRecords = 0;
    await this.#file.appendFile(text);
    this.#committed += records;
  }
}
