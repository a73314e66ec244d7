// Gemini on Vertex AI: `usageMetadata` with promptTokenCount (cached tokens included),
// cachedContentTokenCount, candidatesTokenCount (thoughts NOT included), thoughtsTokenCount and
// toolUsePromptTokenCount; `modelVersion` names the model that answered.
//
// Streams repeat usageMetadata cumulatively (early chunks may carry zeros), so only the last one counts.
// Rather than parsing every chunk, the readers keep the last chunk that mentions usageMetadata and parse
// that one when the stream ends.
//
// The text embedding models' :predict answers have no usageMetadata: each prediction's
// statistics.token_count is summed as the body passes (prediction-tokens.ts).

import type { Logger } from 'pino';
import { JsonArrayStreamParser } from '../../formats/json-array-stream.ts';
import { JsonUsageExtractor } from '../../usage/json-extractor.ts';
import { errorText } from '../../usage/error-text.ts';
import { SseUsageExtractor, type SseUsageReader } from '../../usage/sse-extractor.ts';
import type { UsageExtractor } from '../../usage/usage-extractor.ts';
import { NO_BYTES, withStreamError } from '../../usage/usage-extractor.ts';
import { tokenCount } from '../../usage/token-count.ts';
import { PredictionTokenCounter } from '../../usage/prediction-tokens.ts';
import { isRecord } from '../../../../contracts/json-record.ts';
import type { TokenUsage, UsageResult } from '../../usage/usage.ts';

export function normaliseGeminiUsage(metadata: unknown): TokenUsage | null {
  if (!isRecord(metadata)) return null;
  const prompt = tokenCount(metadata.promptTokenCount);
  // Tool-use prompts (grounding, code execution results) are fed to the model and billed as input.
  const toolPrompt = tokenCount(metadata.toolUsePromptTokenCount);
  const cached = tokenCount(metadata.cachedContentTokenCount);
  const candidates = tokenCount(metadata.candidatesTokenCount);
  const thoughts = tokenCount(metadata.thoughtsTokenCount);
  const input = prompt + toolPrompt;
  const output = candidates + thoughts;
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: Math.min(cached, input),
    cacheWriteTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: thoughts,
    totalTokens: input + output,
  };
}

export function readGeminiBody(document: Record<string, unknown>): UsageResult {
  const result: UsageResult = { usage: normaliseGeminiUsage(document.usageMetadata) };
  if (typeof document.modelVersion === 'string') result.responseModel = document.modelVersion;
  return result;
}

const FIELDS = { head: [], tail: ['usageMetadata', 'modelVersion'] } as const;
const ERROR_FIRST = /^\s*\{\s*"error"\s*:/;

/** What a stream showed: the last chunk holding usageMetadata, the first chunk, a finish, an error. */
interface GeminiStreamState {
  lastWithUsage: string | null;
  first: string | null;
  finished: boolean;
  error: string | undefined;
}

function errorOf(json: string): string {
  try {
    return errorText(JSON.parse(json));
  } catch {
    return errorText(undefined);
  }
}

function geminiStreamResult(state: GeminiStreamState, cut: string | undefined): UsageResult {
  let result: UsageResult = { usage: null };
  const source = state.lastWithUsage ?? state.first;
  let malformed = false;
  if (source !== null) {
    try {
      const document: unknown = JSON.parse(source);
      if (isRecord(document)) result = readGeminiBody(document);
    } catch {
      malformed = true;
    }
  }
  const streamError = state.error ?? cut ?? (malformed ? 'malformed JSON in stream chunk' : state.finished ? undefined : 'stream ended before a finishReason');
  if (streamError !== undefined) result.streamError = streamError;
  return result;
}

class GeminiSseReader implements SseUsageReader {
  readonly #state: GeminiStreamState = { lastWithUsage: null, first: null, finished: false, error: undefined };

  get sawEnd(): boolean {
    return this.#state.finished;
  }

  event(_type: string, data: string): boolean {
    const state = this.#state;
    if (ERROR_FIRST.test(data)) {
      state.error ??= errorOf(data);
      return false;
    }
    state.first ??= data;
    if (data.includes('"usageMetadata"')) state.lastWithUsage = data;
    // A blocked prompt ends with promptFeedback.blockReason and no candidate.
    if (!state.finished && (data.includes('"finishReason"') || data.includes('"blockReason"'))) state.finished = true;
    return false;
  }

  result(cutMidEvent: boolean): UsageResult {
    return geminiStreamResult(this.#state, cutMidEvent ? 'stream ended mid-event' : undefined);
  }
}

export function geminiSseExtractor(options: { logger?: Logger } = {}): UsageExtractor {
  return new SseUsageExtractor(new GeminiSseReader(), options.logger ? { logger: options.logger } : {});
}

const USAGE_NEEDLE = Buffer.from('"usageMetadata"');
const ERROR_NEEDLE = Buffer.from('"error"');
const FINISH_NEEDLE = Buffer.from('"finishReason"');
const BLOCK_NEEDLE = Buffer.from('"blockReason"');

/**
 * `application/json` from Gemini is either one object (generateContent) or, from streamGenerateContent
 * without alt=sse, an array written progressively. The first significant byte tells which.
 */
export class GeminiJsonExtractor implements UsageExtractor {
  readonly #logger: Logger | undefined;
  #decided = false;
  #object: JsonUsageExtractor | null = null;
  #predictions: PredictionTokenCounter | null = null;
  #array: JsonArrayStreamParser | null = null;
  // Elements are kept as bytes (views, no copies) and decoded only at the end.
  #lastWithUsage: Buffer | null = null;
  #first: Buffer | null = null;
  #errorElement: Buffer | null = null;
  #finished = false;
  #elements = 0;

  constructor(options: { logger?: Logger } = {}) {
    this.#logger = options.logger;
  }

  /** A progressive array's finishing element was read; a single object is only whole at its end. */
  get sawEnd(): boolean {
    return this.#finished;
  }

  write(chunk: Buffer): Buffer {
    if (!this.#decided) {
      const first = firstSignificantByte(chunk);
      if (first === -1) return chunk;
      this.#decided = true;
      if (first === 0x5b) this.#array = new JsonArrayStreamParser((element) => this.#element(element));
      else {
        this.#object = new JsonUsageExtractor(FIELDS, readGeminiBody);
        this.#predictions = new PredictionTokenCounter();
      }
    }
    if (this.#array !== null) this.#array.push(chunk);
    else {
      this.#object!.write(chunk);
      this.#predictions!.write(chunk);
    }
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    if (this.#object !== null) {
      const result = this.#object.end(streamError);
      const predicted = result.usage === null ? this.#predictions!.usage() : null;
      return predicted === null ? result : { ...result, usage: predicted };
    }
    if (this.#array === null) return withStreamError({ usage: null }, streamError);
    const cut = this.#array.end();
    if (this.#array.oversizedElements > 0) {
      this.#logger?.warn({ skippedElements: this.#array.oversizedElements }, 'usage extractor skipped oversized stream events');
    }
    const state: GeminiStreamState = {
      lastWithUsage: this.#lastWithUsage?.toString('utf8') ?? null,
      first: this.#first?.toString('utf8') ?? null,
      finished: this.#finished,
      error: this.#errorElement === null ? undefined : errorOf(this.#errorElement.toString('utf8')),
    };
    return withStreamError({ ...geminiStreamResult(state, cut), streamEvents: this.#elements }, streamError);
  }

  #element(element: Buffer): void {
    this.#elements++;
    // Cheap byte searches per element; only the elements that matter are decoded, at the end.
    if (element.indexOf(ERROR_NEEDLE) !== -1 && ERROR_FIRST.test(element.toString('latin1', 0, 64))) {
      this.#errorElement ??= element;
      return;
    }
    this.#first ??= element;
    if (element.indexOf(USAGE_NEEDLE) !== -1) this.#lastWithUsage = element;
    if (!this.#finished && (element.indexOf(FINISH_NEEDLE) !== -1 || element.indexOf(BLOCK_NEEDLE) !== -1)) this.#finished = true;
  }
}

function firstSignificantByte(chunk: Buffer): number {
  for (let i = 0; i < chunk.length; i++) {
    const byte = chunk[i]!;
    if (byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09) return byte;
  }
  return -1;
}

export function geminiJsonExtractor(options: { logger?: Logger } = {}): UsageExtractor {
  return new GeminiJsonExtractor(options);
}
