// Vertex AI's text embedding models answer :predict with one token count per text,
// `predictions[i].embeddings.statistics.token_count`, spread through a body that can be megabytes of vectors
// (250 texts of 768 values, pretty-printed): more than the JSON body a usage reader holds (json-body.ts). So
// the counts are summed as the bytes pass, found by their key: inside a JSON string every quote is escaped, so
// `"token_count"` followed by `:` is always a key. A key and its value cut between two chunks are found across
// the cut from the last bytes of the one before.

import type { TokenUsage } from './usage.ts';

const KEY = Buffer.from('"token_count"');
/** Bytes of one chunk kept for the next: more than a key, its colon, spacing and a count take. */
const CARRY_BYTES = 64;

const isSpace = (byte: number): boolean => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
const isDigit = (byte: number): boolean => byte >= 0x30 && byte <= 0x39;

/** The count after a key ending at `from`: its value, null when the bytes end before it does, NaN when it is not a count. */
function countAfter(bytes: Buffer, from: number): number | null {
  let at = from;
  while (at < bytes.length && isSpace(bytes[at]!)) at++;
  if (at === bytes.length) return null;
  if (bytes[at] !== 0x3a) return NaN; // ':'
  at++;
  while (at < bytes.length && isSpace(bytes[at]!)) at++;
  const start = at;
  while (at < bytes.length && isDigit(bytes[at]!)) at++;
  if (at === bytes.length) return null;
  return at === start ? NaN : Number(bytes.toString('latin1', start, at));
}

export class PredictionTokenCounter {
  #carry: Buffer = Buffer.alloc(0);
  /** Stream offset of the current chunk's first byte. */
  #offset = 0;
  /** Stream offset of the last key read whole (counted, or found not to be a count): never read twice. */
  #lastRead = -1;
  #total = 0;
  #found = false;

  /** Some prediction carried a token count. */
  get found(): boolean {
    return this.#found;
  }

  write(chunk: Buffer): void {
    if (this.#carry.length > 0) {
      // Keys that begin in the last chunk's tail and end in this one.
      const joint = Buffer.concat([this.#carry, chunk.subarray(0, CARRY_BYTES)]);
      this.#scan(joint, this.#offset - this.#carry.length, this.#carry.length);
    }
    this.#scan(chunk, this.#offset, chunk.length);
    const tail = chunk.length >= CARRY_BYTES ? chunk.subarray(chunk.length - CARRY_BYTES) : Buffer.concat([this.#carry, chunk]).subarray(-CARRY_BYTES);
    this.#carry = Buffer.from(tail);
    this.#offset += chunk.length;
  }

  /** The usage the counts make: input tokens only (an embedding generates none); null when none was found. */
  usage(): TokenUsage | null {
    if (!this.#found) return null;
    const input = this.#total;
    return { inputTokens: input, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: input };
  }

  /** Reads the keys of `bytes` (whose first byte is at stream offset `base`) that begin before `startsBefore`. */
  #scan(bytes: Buffer, base: number, startsBefore: number): void {
    for (let at = bytes.indexOf(KEY); at !== -1 && at < startsBefore; at = bytes.indexOf(KEY, at + 1)) {
      if (base + at <= this.#lastRead) continue;
      const count = countAfter(bytes, at + KEY.length);
      if (count === null) return; // cut: read again with the next chunk
      this.#lastRead = base + at;
      if (Number.isNaN(count)) continue;
      this.#found = true;
      this.#total += count;
    }
  }
}
