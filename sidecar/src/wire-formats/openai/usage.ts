// OpenAI chat completions (api.openai.com and Vertex AI's OpenAI-compatible surface): `usage` with
// prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens (a subset of the prompt) and
// completion_tokens_details.reasoning_tokens (a subset of the completion). The Responses API shape
// (input_tokens / output_tokens with *_details) is read too, since /proxy/beta forwards every path, and so are
// the audio API's: a transcription's `usage` of type `tokens` (that same shape) or `duration` (seconds).
//
// Streams carry usage only when the request set stream_options.include_usage: one chunk with `choices: []`
// just before `data: [DONE]`. When the proxy added that option itself, the reader asks for that chunk to be
// dropped so the caller gets exactly the stream it asked for.

import type { Logger } from 'pino';
import { JsonUsageExtractor } from '../../usage/json-extractor.ts';
import { SseUsageExtractor, type SseUsageReader } from '../../usage/sse-extractor.ts';
import type { UsageExtractor } from '../../usage/usage-extractor.ts';
import { errorText } from '../../usage/error-text.ts';
import { tokenCount } from '../../usage/token-count.ts';
import { isRecord } from '../../../../contracts/json-record.ts';
import type { TokenUsage, UsageResult } from '../../usage/usage.ts';

export function normaliseOpenAiUsage(usage: unknown): TokenUsage | null {
  if (!isRecord(usage)) return null;
  // A whisper-1 transcription bills seconds of audio, not tokens (ADR 0911).
  if (usage.type === 'duration') return audioUsage(usage.seconds);
  if (usage.prompt_tokens === undefined && usage.completion_tokens === undefined && usage.input_tokens !== undefined) {
    // Responses API
    const input = tokenCount(usage.input_tokens);
    const output = tokenCount(usage.output_tokens);
    const inputDetails = isRecord(usage.input_tokens_details) ? usage.input_tokens_details : {};
    const outputDetails = isRecord(usage.output_tokens_details) ? usage.output_tokens_details : {};
    return build(input, output, tokenCount(inputDetails.cached_tokens), tokenCount(outputDetails.reasoning_tokens));
  }
  const prompt = tokenCount(usage.prompt_tokens);
  const completion = tokenCount(usage.completion_tokens);
  const promptDetails = isRecord(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const completionDetails = isRecord(usage.completion_tokens_details) ? usage.completion_tokens_details : {};
  return build(prompt, completion, tokenCount(promptDetails.cached_tokens), tokenCount(completionDetails.reasoning_tokens));
}

/** Seconds of input audio as the usage of a call billed per second; null when they are not a plausible count. */
function audioUsage(seconds: unknown): TokenUsage | null {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) return null;
  return { ...build(0, 0, 0, 0), units: { audioSeconds: seconds } };
}

function build(input: number, output: number, cached: number, reasoning: number): TokenUsage {
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: Math.min(cached, input),
    cacheWriteTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: Math.min(reasoning, output),
    totalTokens: input + output,
  };
}

function modelOf(document: Record<string, unknown>): string | undefined {
  if (typeof document.model === 'string') return document.model;
  const response = document.response;
  return isRecord(response) && typeof response.model === 'string' ? response.model : undefined;
}

function usageOf(document: Record<string, unknown>): unknown {
  if (document.usage !== undefined && document.usage !== null) return document.usage;
  const response = document.response;
  return isRecord(response) ? response.usage : undefined;
}

export function readOpenAiBody(document: Record<string, unknown>): UsageResult {
  const model = modelOf(document);
  // A verbose translation reports no usage, only the `duration` of the audio it translated (ADR 0911).
  const translated = document.usage === undefined && document.task === 'translate' ? audioUsage(document.duration) : null;
  const result: UsageResult = { usage: translated ?? normaliseOpenAiUsage(usageOf(document)) };
  if (model !== undefined) result.responseModel = model;
  return result;
}

export function openAiJsonExtractor(): UsageExtractor {
  return new JsonUsageExtractor({ head: ['model', 'task', 'duration'], tail: ['usage'] }, readOpenAiBody);
}

// A `usage` key holding an object; in content, quotes are escaped, so this only matches a real key.
const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const ERROR_FIRST = /^\s*\{\s*"error"\s*:/;
const TERMINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

export class OpenAiSseReader implements SseUsageReader {
  readonly #dropInjected: boolean;
  #usage: TokenUsage | null = null;
  #model: string | undefined;
  #first = true;
  #done = false;
  #error: string | undefined;

  constructor(dropInjected: boolean) {
    this.#dropInjected = dropInjected;
  }

  get sawEnd(): boolean {
    return this.#done;
  }

  event(type: string, data: string): boolean {
    if (data === '[DONE]') {
      this.#done = true;
      return false;
    }
    if (TERMINAL_RESPONSE_EVENTS.has(type)) this.#done = true;
    const isError = type === 'error' || ERROR_FIRST.test(data);
    const hasUsage = USAGE_OBJECT.test(data);
    if (!this.#first && !hasUsage && !isError) return false;
    this.#first = false;
    let document: unknown;
    try {
      document = JSON.parse(data);
    } catch {
      this.#error ??= 'malformed JSON in stream event';
      return false;
    }
    if (!isRecord(document)) return false;
    if (isError) {
      this.#error ??= errorText(document);
      return false;
    }
    this.#model ??= modelOf(document);
    if (!hasUsage) return false;
    const usage = normaliseOpenAiUsage(usageOf(document));
    if (usage === null) return false;
    this.#usage = usage;
    const model = modelOf(document);
    if (model !== undefined) this.#model = model;
    return this.#dropInjected && Array.isArray(document.choices) && document.choices.length === 0;
  }

  result(cutMidEvent: boolean): UsageResult {
    const result: UsageResult = { usage: this.#usage };
    if (this.#model !== undefined) result.responseModel = this.#model;
    const streamError = this.#error ?? (this.#done ? undefined : cutMidEvent ? 'stream ended mid-event' : 'stream ended before data: [DONE]');
    if (streamError !== undefined) result.streamError = streamError;
    return result;
  }
}

export function openAiSseExtractor(options: { stripInjectedUsage: boolean; logger?: Logger }): UsageExtractor {
  return new SseUsageExtractor(new OpenAiSseReader(options.stripInjectedUsage), {
    filter: options.stripInjectedUsage,
    ...(options.logger ? { logger: options.logger } : {}),
  });
}
