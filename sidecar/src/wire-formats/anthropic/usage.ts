// Anthropic Messages API (direct, on Vertex AI, and inside Bedrock's event stream): `usage` with input_tokens
// (cache reads and writes NOT included), cache_creation_input_tokens, cache_read_input_tokens,
// cache_creation.ephemeral_5m/1h_input_tokens and output_tokens.
//
// Streams: message_start.message.usage holds the input and cache counts; message_delta.usage is cumulative and
// may repeat them. The merge starts from message_start and overwrites each field message_delta carries; it never
// adds. On Bedrock, message_stop also carries amazon-bedrock-invocationMetrics, used when no usage came.

import type { Logger } from 'pino';
import { leadingEventType } from '../../formats/bedrock-stream.ts';
import { JsonUsageExtractor } from '../../usage/json-extractor.ts';
import { errorText } from '../../usage/error-text.ts';
import { SseUsageExtractor, type SseUsageReader } from '../../usage/sse-extractor.ts';
import type { UsageExtractor } from '../../usage/usage-extractor.ts';
import { tokenCount } from '../../usage/token-count.ts';
import { isRecord } from '../../../../contracts/json-record.ts';
import type { TokenUsage, UsageResult } from '../../usage/usage.ts';

export function normaliseAnthropicUsage(usage: unknown): TokenUsage | null {
  if (!isRecord(usage)) return null;
  const uncached = tokenCount(usage.input_tokens);
  const cacheRead = tokenCount(usage.cache_read_input_tokens);
  const creation = isRecord(usage.cache_creation) ? usage.cache_creation : {};
  const write5m = tokenCount(creation.ephemeral_5m_input_tokens);
  const write1h = tokenCount(creation.ephemeral_1h_input_tokens);
  // The total and the breakdown should agree; if a gateway sends only one of them, trust the larger.
  const cacheWrite = Math.max(tokenCount(usage.cache_creation_input_tokens), write5m + write1h);
  const output = tokenCount(usage.output_tokens);
  const input = uncached + cacheWrite + cacheRead;
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    cacheWrite1hTokens: write1h,
    reasoningTokens: 0,
    totalTokens: input + output,
  };
}

/** The field names of one of Bedrock's count objects. */
export interface BedrockCountNames {
  input: string;
  output: string;
  cacheRead: string;
  cacheWrite: string;
}

const INVOCATION_METRICS: BedrockCountNames = {
  input: 'inputTokenCount',
  output: 'outputTokenCount',
  cacheRead: 'cacheReadInputTokenCount',
  cacheWrite: 'cacheWriteInputTokenCount',
};

/** Bedrock's amazon-bedrock-invocationMetrics; its input count, like Anthropic's, excludes cache tokens. */
export function normaliseBedrockMetrics(metrics: unknown): TokenUsage | null {
  return bedrockCounts(metrics, INVOCATION_METRICS);
}

/**
 * One of Bedrock's count objects (the invocation metrics, Converse's usage): its input count, like Anthropic's,
 * leaves out cache reads and writes. Null when neither the input nor the output count is there.
 */
export function bedrockCounts(counts: unknown, names: BedrockCountNames): TokenUsage | null {
  if (!isRecord(counts)) return null;
  if (counts[names.input] === undefined && counts[names.output] === undefined) return null;
  const cacheRead = tokenCount(counts[names.cacheRead]);
  const cacheWrite = tokenCount(counts[names.cacheWrite]);
  const input = tokenCount(counts[names.input]) + cacheRead + cacheWrite;
  const output = tokenCount(counts[names.output]);
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    totalTokens: input + output,
  };
}

export function readAnthropicBody(document: Record<string, unknown>): UsageResult {
  const result: UsageResult = { usage: normaliseAnthropicUsage(document.usage) };
  if (typeof document.model === 'string') result.responseModel = document.model;
  return result;
}

export const ANTHROPIC_BODY_FIELDS = { head: ['model'], tail: ['usage'] } as const;

export function anthropicJsonExtractor(): UsageExtractor {
  return new JsonUsageExtractor(ANTHROPIC_BODY_FIELDS, readAnthropicBody);
}

const BEDROCK_METRICS = 'amazon-bedrock-invocationMetrics';

/** Merges an Anthropic event stream's usage; shared by the SSE reader and the Bedrock event-stream reader. */
export class AnthropicStreamUsage {
  #usage: Record<string, unknown> | null = null;
  #metrics: unknown;
  #model: string | undefined;
  #stopped = false;
  #error: string | undefined;

  /** One event: its type ('' when unknown: then it is read from the JSON) and its JSON text. */
  event(type: string, json: string): void {
    switch (type) {
      case 'message_start':
      case 'message_delta':
      case 'error':
      case '':
        break;
      case 'message_stop':
        this.#stopped = true;
        if (!json.includes(BEDROCK_METRICS)) return;
        break;
      default:
        return; // content blocks and pings carry no usage
    }
    let document: unknown;
    try {
      document = JSON.parse(json);
    } catch {
      this.#error ??= 'malformed JSON in stream event';
      return;
    }
    if (!isRecord(document)) return;
    const kind = type === '' ? (typeof document.type === 'string' ? document.type : '') : type;
    if (kind === 'message_start') {
      const message = isRecord(document.message) ? document.message : {};
      if (typeof message.model === 'string') this.#model = message.model;
      if (isRecord(message.usage)) this.#usage = { ...message.usage };
    } else if (kind === 'message_delta') {
      if (!isRecord(document.usage)) return;
      const merged = this.#usage ?? {};
      for (const [field, value] of Object.entries(document.usage)) {
        if (value !== null && value !== undefined) merged[field] = value;
      }
      this.#usage = merged;
    } else if (kind === 'message_stop') {
      this.#stopped = true;
      if (document[BEDROCK_METRICS] !== undefined) this.#metrics = document[BEDROCK_METRICS];
    } else if (kind === 'error') {
      this.#error ??= errorText(document);
    }
  }

  /** message_stop has been seen. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** `cut` names how the transport ended early, if it did. */
  result(cut: string | undefined): UsageResult {
    const usage = normaliseAnthropicUsage(this.#usage) ?? normaliseBedrockMetrics(this.#metrics);
    const result: UsageResult = { usage };
    if (this.#model !== undefined) result.responseModel = this.#model;
    const streamError = this.#error ?? cut ?? (this.#stopped ? undefined : 'stream ended before message_stop');
    if (streamError !== undefined) result.streamError = streamError;
    return result;
  }
}

const NO_USAGE_EVENTS = new Set(['content_block_start', 'content_block_delta', 'content_block_stop', 'ping']);

class AnthropicSseReader implements SseUsageReader {
  readonly #usage = new AnthropicStreamUsage();
  skipDataOf = (type: string): boolean => NO_USAGE_EVENTS.has(type);

  get sawEnd(): boolean {
    return this.#usage.stopped;
  }

  event(type: string, data: string): boolean {
    this.#usage.event(type === '' ? leadingEventType(data) : type, data);
    return false;
  }

  result(cutMidEvent: boolean): UsageResult {
    return this.#usage.result(cutMidEvent ? 'stream ended mid-event' : undefined);
  }
}

export function anthropicSseExtractor(options: { logger?: Logger } = {}): UsageExtractor {
  return new SseUsageExtractor(new AnthropicSseReader(), options.logger ? { logger: options.logger } : {});
}
