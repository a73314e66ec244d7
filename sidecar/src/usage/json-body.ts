// Holds a non-streaming JSON response body for usage extraction, within a fixed memory budget.
//
// Bodies up to maxBytes are kept whole (as references to the chunks already received, no copies) and parsed
// once at the end. A larger body (a long generation, inline images) is not held: we keep its first headBytes,
// where OpenAI and Anthropic put `model`, and a sliding tail window, where every provider puts its usage object
// (`usage` after `choices`/`content`, `usageMetadata` and `modelVersion` after `candidates`). The fields are
// then read from those windows with findJsonValue. See docs/decisions/0200-usage-extraction-memory-bounds.md.

import { findJsonValue } from './json-scan.ts';
import { isRecord } from '../../../contracts/json-record.ts';

export const MAX_JSON_BODY_BYTES = 4 * 1024 * 1024;
export const JSON_HEAD_BYTES = 64 * 1024;
export const JSON_TAIL_BYTES = 256 * 1024;

/** Which fields to recover from an over-size body: top-level keys near the start, and near the end. */
export interface JsonFieldSpec {
  head: readonly string[];
  tail: readonly string[];
}

export class BoundedJsonBody {
  readonly #maxBytes: number;
  readonly #tailBytes: number;
  #chunks: Buffer[] = [];
  #size = 0;
  #head: Buffer | null = null;

  constructor(options: { maxBytes?: number; tailBytes?: number } = {}) {
    this.#maxBytes = options.maxBytes ?? MAX_JSON_BODY_BYTES;
    this.#tailBytes = Math.min(options.tailBytes ?? JSON_TAIL_BYTES, this.#maxBytes);
  }

  /** True when the body outgrew maxBytes and only its head and tail were kept. */
  get overflowed(): boolean {
    return this.#head !== null;
  }

  write(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#head === null) {
      if (this.#size <= this.#maxBytes) return;
      const all = Buffer.concat(this.#chunks, this.#size);
      this.#head = Buffer.from(all.subarray(0, Math.min(JSON_HEAD_BYTES, this.#maxBytes)));
      this.#chunks = [all.subarray(all.length - this.#tailBytes)];
      this.#size = this.#tailBytes;
      return;
    }
    while (this.#chunks.length > 1 && this.#size - this.#chunks[0]!.length >= this.#tailBytes) {
      this.#size -= this.#chunks.shift()!.length;
    }
  }

  /**
   * The parsed body when it was kept whole and is a JSON object; otherwise an object holding the requested
   * fields found in the kept windows (possibly none). Undefined when the body is empty.
   */
  document(fields: JsonFieldSpec): Record<string, unknown> | undefined {
    if (this.#size === 0 && this.#head === null) return undefined;
    const body = Buffer.concat(this.#chunks, this.#size);
    this.#chunks = [];
    this.#size = 0;
    if (this.#head === null) {
      const text = body.toString('utf8');
      try {
        const parsed: unknown = JSON.parse(text);
        return isRecord(parsed) ? parsed : {};
      } catch {
        // A cut or malformed body: still try to find the fields.
        return scan(text, text, fields);
      }
    }
    const tail = body.subarray(Math.max(0, body.length - this.#tailBytes)).toString('utf8');
    return scan(this.#head.toString('utf8'), tail, fields);
  }
}

function scan(head: string, tail: string, fields: JsonFieldSpec): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of fields.head) {
    const value = findJsonValue(head, key, false);
    if (value !== undefined) out[key] = value;
  }
  for (const key of fields.tail) {
    const value = findJsonValue(tail, key, true);
    if (value !== undefined) out[key] = value;
  }
  return out;
}
