// OpenAI's image answers: `{created, data: [{b64_json | url, revised_prompt?}, …], size?, quality?, usage?}`.
// Ten base64 PNGs are tens of megabytes, past what a JSON body is held for (ADR 0200), and the count of
// images is in the middle of them: so the body is scanned as it passes and never held. The elements of the
// top-level `data` are counted; only the top-level `usage`, `size`, `quality` and `model` are kept (each
// bounded) and parsed at the end. GPT image models report tokens in `usage` (ImageGenUsage, image input tokens
// apart); DALL·E answers have no usage, and are billed per image (ADR 0910). Vertex AI's Imagen puts its images
// in `predictions` and Bedrock's image models in `images` (ADR 0915): the same scan counts that list instead.

import { isRecord } from '../../../contracts/json-record.ts';
import { normaliseOpenAiUsage } from './openai/usage.ts';
import { tokenCount } from '../usage/token-count.ts';
import { NO_BYTES, type UsageExtractor } from '../usage/usage-extractor.ts';
import type { BilledUnits, TokenUsage, UsageResult } from '../usage/usage.ts';

const KEPT = new Set(['usage', 'size', 'quality', 'model']);
/** A kept value longer than this is not one of these fields as OpenAI writes them: it is dropped, not held. */
const MAX_KEPT_BYTES = 16 * 1024;
const MAX_KEY_BYTES = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export class ImageAnswerExtractor implements UsageExtractor {
  /** A JSON body is whole only at its end. */
  readonly sawEnd = false;
  /** The top-level list whose elements are the images: OpenAI's `data`, Imagen's `predictions`, Bedrock's `images`. */
  readonly #list: string;
  #opened = false;
  #depth = 0;
  #inString = false;
  #escape = false;
  /** At depth 1: the next string is a key (after `{` and `,`), not a value. */
  #expectKey = false;
  #keyBytes: number[] | null = null;
  #key = '';
  /** At depth 1: a value has started and not yet ended. */
  #valueOpen = false;
  #capture: Buffer[] | null = null;
  #captureFrom = 0;
  #capturedBytes = 0;
  #inData = false;
  #elementExpected = false;
  #images = 0;
  /** The next quote and backslash at or after the last search in this chunk (-1: none; -2: not searched yet). */
  #nextQuote = -2;
  #nextBackslash = -2;
  readonly #kept: Record<string, unknown> = {};

  constructor(list = 'data') {
    this.#list = list;
  }

  write(chunk: Buffer): Buffer {
    this.#nextQuote = -2;
    this.#nextBackslash = -2;
    for (let i = 0; i < chunk.length; i++) {
      if (this.#inString) i = this.#string(chunk, i);
      else this.#structure(chunk, i);
    }
    if (this.#capture !== null) this.#keep(chunk.subarray(this.#captureFrom));
    this.#captureFrom = 0;
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    const result = this.#result();
    return streamError === undefined ? result : { ...result, streamError };
  }

  /**
   * Inside a string: skips to its next quote or backslash (base64 has neither); returns the last index read.
   * Each search result is kept until passed, so a chunk of many small strings is searched once, not once a string.
   */
  #string(chunk: Buffer, i: number): number {
    const key = this.#keyBytes;
    if (this.#escape) {
      this.#escape = false;
      if (key !== null && key.length < MAX_KEY_BYTES) key.push(chunk[i]!);
      return i;
    }
    let at = i;
    if (key === null) {
      if (this.#nextQuote !== -1 && this.#nextQuote < i) this.#nextQuote = chunk.indexOf(QUOTE, i);
      if (this.#nextBackslash !== -1 && this.#nextBackslash < i) this.#nextBackslash = chunk.indexOf(BACKSLASH, i);
      const quote = this.#nextQuote;
      const backslash = this.#nextBackslash;
      at = quote === -1 ? backslash : backslash === -1 ? quote : Math.min(quote, backslash);
      if (at === -1) return chunk.length - 1;
    }
    const c = chunk[at]!;
    if (c === BACKSLASH) this.#escape = true;
    else if (c === QUOTE) this.#endString();
    else if (key !== null && key.length < MAX_KEY_BYTES) key.push(c);
    return at;
  }

  #endString(): void {
    this.#inString = false;
    if (this.#keyBytes === null) return;
    this.#key = Buffer.from(this.#keyBytes).toString('utf8');
    this.#keyBytes = null;
  }

  #structure(chunk: Buffer, i: number): void {
    const c = chunk[i]!;
    switch (c) {
      case 0x20:
      case 0x0a:
      case 0x0d:
      case 0x09:
        return;
      case 0x3a: // :
        if (this.#depth === 1) this.#expectKey = false;
        return;
      case 0x2c: // ,
        if (this.#depth === 1) this.#endValue(chunk, i);
        else if (this.#depth === 2 && this.#inData) this.#elementExpected = true;
        return;
      case 0x7d: // }
      case 0x5d: // ]
        this.#depth--;
        if (this.#depth === 0) this.#endValue(chunk, i);
        else if (this.#depth === 1) this.#inData = false;
        return;
      case QUOTE:
        if (this.#depth === 1 && this.#expectKey) this.#keyBytes = [];
        else this.#valueStarts(chunk, i, c);
        this.#inString = true;
        return;
      default:
        this.#valueStarts(chunk, i, c);
        if (c === 0x7b || c === 0x5b) this.#opens(c);
    }
  }

  #opens(c: number): void {
    this.#depth++;
    if (this.#depth === 1) {
      this.#opened = true;
      this.#expectKey = true;
    } else if (this.#depth === 2 && c === 0x5b && this.#key === this.#list && this.#capture === null) {
      this.#inData = true;
      this.#elementExpected = true;
    }
  }

  #valueStarts(chunk: Buffer, i: number, c: number): void {
    if (this.#depth === 2 && this.#inData && this.#elementExpected) {
      this.#images++;
      this.#elementExpected = false;
    }
    if (this.#depth !== 1 || this.#valueOpen) return;
    this.#valueOpen = true;
    if (KEPT.has(this.#key) && c !== 0x5b) {
      this.#capture = [];
      this.#capturedBytes = 0;
      this.#captureFrom = i;
    }
  }

  #endValue(chunk: Buffer, i: number): void {
    this.#valueOpen = false;
    this.#expectKey = true;
    if (this.#capture === null) return;
    this.#keep(chunk.subarray(this.#captureFrom, i));
    const capture = this.#capture;
    this.#capture = null;
    if (capture === null) return;
    try {
      this.#kept[this.#key] = JSON.parse(Buffer.concat(capture).toString('utf8'));
    } catch {
      // Not a value this reader understands: left out, as an absent field.
    }
  }

  #keep(bytes: Buffer): void {
    if (this.#capture === null) return;
    this.#capturedBytes += bytes.length;
    if (this.#capturedBytes > MAX_KEPT_BYTES) this.#capture = null;
    else this.#capture.push(Buffer.from(bytes));
  }

  #result(): UsageResult {
    if (!this.#opened) return { usage: null };
    const kept = this.#kept;
    const units: BilledUnits = { images: this.#images };
    if (typeof kept.size === 'string') units.imageSize = kept.size;
    if (typeof kept.quality === 'string') units.imageQuality = kept.quality;
    const reported = normaliseOpenAiUsage(kept.usage);
    const details = isRecord(kept.usage) && isRecord(kept.usage.input_tokens_details) ? kept.usage.input_tokens_details : {};
    const imageTokens = tokenCount(details.image_tokens);
    if (imageTokens > 0) units.imageInputTokens = imageTokens;
    const usage: TokenUsage = reported ?? { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0 };
    const result: UsageResult = { usage: { ...usage, units } };
    if (typeof kept.model === 'string') result.responseModel = kept.model;
    return result;
  }
}
