// The usage of a batch's results, read from the JSONL as it passes through to the caller (ADR 0913): one JSON
// object a line, each a request's result with its model and usage. The file can be large, so it is never held
// whole: only the line being read is, up to MAX_RESULT_LINE_BYTES. Each line is priced on its own (a long
// prompt's tier applies to that request, not to the sum) at the batch discount, and the read's span carries the
// summed usage and the summed cost.

import { isRecord } from '../../../contracts/json-record.ts';
import { JsonLines, type JsonLine } from '../formats/json-lines.ts';
import { normaliseAnthropicUsage } from './anthropic/usage.ts';
import { normaliseOpenAiUsage } from './openai/usage.ts';
import { NO_BYTES, type UsageExtractor } from '../usage/usage-extractor.ts';
import type { TokenUsage, UsageResult } from '../usage/usage.ts';

/** A result line longer than this is not read (its usage is lost, and said so on the span). */
export const MAX_RESULT_LINE_BYTES = 16 * 1024 * 1024;

/** One billed result: the model that answered and its usage. */
export interface ResultLine {
  model: string;
  usage: TokenUsage;
}

/** Reads a line's billed result; null for a line that bills nothing (errored, cancelled, expired). */
export type ResultLineReader = (line: Record<string, unknown>) => ResultLine | null;

/** Anthropic's Message Batches results: `{"custom_id", "result": {"type": "succeeded", "message": {model, usage}}}`. */
export const anthropicBatchLine: ResultLineReader = (line) => {
  const result = line.result;
  if (!isRecord(result) || result.type !== 'succeeded' || !isRecord(result.message)) return null;
  const usage = normaliseAnthropicUsage(result.message.usage);
  const model = result.message.model;
  return usage !== null && typeof model === 'string' ? { model, usage } : null;
};

/** OpenAI's Batch API output: `{"id", "custom_id", "response": {"status_code", "body": {model, usage}}, "error"}`. */
export const openAiBatchLine: ResultLineReader = (line) => {
  const response = line.response;
  if (!isRecord(response) || response.status_code !== 200 || !isRecord(response.body)) return null;
  const usage = normaliseOpenAiUsage(response.body.usage);
  const model = response.body.model;
  return usage !== null && typeof model === 'string' ? { model, usage } : null;
};

/**
 * What a read that charges nothing reports: no tokens at no cost. Not "no usage", which a read the caller
 * left early would have estimated and charged (ADR 1305).
 */
export function nothingCharged(): UsageResult {
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0 };
  return { usage, charge: { costUsd: 0, priced: true } };
}

export interface BatchResultsOptions {
  read: ResultLineReader;
  /** A line's cost at the batch's prices, USD. */
  price: (model: string, usage: TokenUsage) => { costUsd: number; priced: boolean };
  /** Lines an earlier read of the same results already charged: read, not charged again. */
  skip: number;
  /**
   * Asked as each later line is read: whether this read charges it (false: another read of the same results,
   * running at the same time, got to it first).
   */
  claim?: (line: number) => boolean;
}

/** A batch's results being read: what the read charged, and how far it got. */
export interface BatchResultsExtractor extends UsageExtractor {
  /** Lines read to their end so far. */
  readonly lines: number;
}

export function batchResultsExtractor(options: BatchResultsOptions): BatchResultsExtractor {
  return new BatchResults(options);
}

/** Cost kept in whole 10⁻¹⁰ USD, the unit a call's cost is rounded to, so that sums do not drift. */
const COST_UNITS = 1e10;

class BatchResults implements BatchResultsExtractor {
  readonly sawEnd = false;
  readonly #o: BatchResultsOptions;
  readonly #split = new JsonLines(MAX_RESULT_LINE_BYTES, (line) => this.#line(line));
  #lines = 0;
  #unread = 0;
  #usage: TokenUsage | null = null;
  #costUnits = 0;
  #priced = true;
  #models = new Set<string>();

  constructor(options: BatchResultsOptions) {
    this.#o = options;
  }

  get lines(): number {
    return this.#lines;
  }

  write(chunk: Buffer): Buffer {
    this.#split.write(chunk);
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    // A last line without its newline is whole only when the body ended cleanly.
    if (streamError === undefined) this.#split.end();
    const result: UsageResult =
      this.#usage === null ? nothingCharged() : { usage: this.#usage, charge: { costUsd: Math.round(this.#costUnits) / COST_UNITS, priced: this.#priced } };
    result.streamEvents = this.#lines;
    if (this.#models.size === 1) result.responseModel = [...this.#models][0]!;
    const unread = this.#unread > 0 ? `${this.#unread} result line(s) not read (not JSON, or over ${MAX_RESULT_LINE_BYTES} bytes): their usage is not charged` : undefined;
    const error = [streamError, unread].filter((text) => text !== undefined).join('; ');
    if (error !== '') result.streamError = error;
    return result;
  }

  #line(line: JsonLine): void {
    this.#lines++;
    if (this.#lines <= this.#o.skip || this.#o.claim?.(this.#lines) === false) return;
    if ('unreadable' in line) {
      this.#unread++;
      return;
    }
    const billed = isRecord(line.value) ? this.#o.read(line.value) : null;
    if (billed !== null) this.#add(billed);
  }

  #add({ model, usage }: ResultLine): void {
    const cost = this.#o.price(model, usage);
    this.#costUnits += Math.round(cost.costUsd * COST_UNITS);
    if (!cost.priced) this.#priced = false;
    this.#models.add(model);
    const sum = this.#usage;
    this.#usage =
      sum === null
        ? { ...usage }
        : {
            inputTokens: sum.inputTokens + usage.inputTokens,
            outputTokens: sum.outputTokens + usage.outputTokens,
            cacheReadTokens: sum.cacheReadTokens + usage.cacheReadTokens,
            cacheWriteTokens: sum.cacheWriteTokens + usage.cacheWriteTokens,
            cacheWrite1hTokens: sum.cacheWrite1hTokens + usage.cacheWrite1hTokens,
            reasoningTokens: sum.reasoningTokens + usage.reasoningTokens,
            totalTokens: sum.totalTokens + usage.totalTokens,
          };
  }
}
