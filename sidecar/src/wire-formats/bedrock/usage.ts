// AWS Bedrock: InvokeModel / InvokeModelWithResponseStream (Claude's own body and events) and Converse /
// ConverseStream (Bedrock's model-neutral API, camelCase usage).
// - JSON responses: Converse's `usage` {inputTokens, outputTokens, cacheReadInputTokens, cacheWriteInputTokens},
//   Titan Text Embeddings' `inputTextTokenCount`, else the body's Anthropic `usage`; when none is there (another
//   model family, Cohere's embeddings, a body too odd to read), the X-Amzn-Bedrock-*-Token-Count response headers.
// - Event streams: each chunk frame holds one Anthropic stream event, merged as on the direct API; the
//   message_stop event's amazon-bedrock-invocationMetrics and then the headers are the fallbacks. A ConverseStream
//   ends with a `metadata` member holding the usage.

import { BedrockStreamDecoder } from '../../formats/bedrock-stream.ts';
import { isRecord } from '../../../../contracts/json-record.ts';
// Converse puts `usage` after `output` as InvokeModel's Claude puts it after `content`: the same fields to keep.
import { ANTHROPIC_BODY_FIELDS, AnthropicStreamUsage, bedrockCounts, readAnthropicBody, type BedrockCountNames } from '../anthropic/usage.ts';
import { JsonUsageExtractor } from '../../usage/json-extractor.ts';
import type { UsageExtractor } from '../../usage/usage-extractor.ts';
import { NO_BYTES, withStreamError } from '../../usage/usage-extractor.ts';
import { headerTokenCount, tokenCount } from '../../usage/token-count.ts';
import type { TokenUsage, UsageResult } from '../../usage/usage.ts';

export type ResponseHeaders = Record<string, string | string[] | undefined>;

function header(headers: ResponseHeaders, name: string): string | string[] | undefined {
  const direct = headers[name];
  if (direct !== undefined) return direct;
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name) return headers[key];
  }
  return undefined;
}

/** Usage from Bedrock's token-count response headers; null when the input and output counts are absent. */
export function bedrockHeaderUsage(headers: ResponseHeaders): TokenUsage | null {
  const uncached = headerTokenCount(header(headers, 'x-amzn-bedrock-input-token-count'));
  const output = headerTokenCount(header(headers, 'x-amzn-bedrock-output-token-count'));
  if (uncached === undefined && output === undefined) return null;
  const cacheRead = headerTokenCount(header(headers, 'x-amzn-bedrock-cache-read-input-token-count')) ?? 0;
  const cacheWrite = headerTokenCount(header(headers, 'x-amzn-bedrock-cache-write-input-token-count')) ?? 0;
  const input = (uncached ?? 0) + cacheRead + cacheWrite;
  return {
    inputTokens: input,
    outputTokens: output ?? 0,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    totalTokens: input + (output ?? 0),
  };
}

const CONVERSE_USAGE: BedrockCountNames = { input: 'inputTokens', output: 'outputTokens', cacheRead: 'cacheReadInputTokens', cacheWrite: 'cacheWriteInputTokens' };

/**
 * Converse's TokenUsage. Its inputTokens, like Anthropic's input_tokens, leaves out the cache reads and writes;
 * null when it is not that shape (an InvokeModel body), so the Anthropic reader and the headers get their turn.
 */
export function normaliseConverseUsage(usage: unknown): TokenUsage | null {
  return bedrockCounts(usage, CONVERSE_USAGE);
}

/** Anthropic's usage fields: a `usage` with none of them is not Claude's, and says nothing. */
const ANTHROPIC_USAGE_FIELDS = ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'];

function readBedrockBody(document: Record<string, unknown>): UsageResult {
  const converse = normaliseConverseUsage(document.usage);
  if (converse !== null) return { usage: converse };
  // Titan Text Embeddings: {embedding, inputTextTokenCount}; an embedding generates no tokens.
  if (typeof document.inputTextTokenCount === 'number') {
    const input = tokenCount(document.inputTextTokenCount);
    return { usage: { inputTokens: input, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: input } };
  }
  const usage = document.usage;
  // Read as Anthropic's, a usage in another shape would be a zero usage that is not null: free, and the
  // token-count headers never consulted.
  if (!isRecord(usage) || !ANTHROPIC_USAGE_FIELDS.some((field) => usage[field] !== undefined)) {
    return typeof document.model === 'string' ? { usage: null, responseModel: document.model } : { usage: null };
  }
  return readAnthropicBody(document);
}

export function bedrockJsonExtractor(headers: ResponseHeaders): UsageExtractor {
  return new JsonUsageExtractor(ANTHROPIC_BODY_FIELDS, readBedrockBody, {
    fallback: () => ({ usage: bedrockHeaderUsage(headers) }),
  });
}

/** A ConverseStream's end: messageStop, then metadata with the usage (required there) and metrics. */
class ConverseStreamUsage {
  usage: TokenUsage | null = null;
  seen = false;
  ended = false;
  error: string | undefined;

  event(type: string, json: string): void {
    this.seen = true;
    if (type !== 'metadata') return;
    this.ended = true;
    try {
      const document = JSON.parse(json) as unknown;
      this.usage = isRecord(document) ? normaliseConverseUsage(document.usage) : null;
    } catch {
      this.error ??= 'malformed JSON in the metadata event';
    }
  }
}

export class BedrockEventStreamExtractor implements UsageExtractor {
  readonly #headers: ResponseHeaders;
  readonly #usage = new AnthropicStreamUsage();
  readonly #converse = new ConverseStreamUsage();
  readonly #decoder: BedrockStreamDecoder;
  #events = 0;

  constructor(headers: ResponseHeaders) {
    this.#headers = headers;
    this.#decoder = new BedrockStreamDecoder(
      (type, json) => {
        this.#events++;
        this.#usage.event(type, json);
      },
      {
        onConverse: (type, json) => {
          this.#events++;
          this.#converse.event(type, json);
        },
      },
    );
  }

  get sawEnd(): boolean {
    return this.#converse.seen ? this.#converse.ended : this.#usage.stopped;
  }

  write(chunk: Buffer): Buffer {
    this.#decoder.push(chunk);
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    const framing = this.#decoder.end();
    let result = this.#converse.seen ? this.#converseResult(framing) : this.#usage.result(framing);
    if (result.usage === null) {
      const fromHeaders = bedrockHeaderUsage(this.#headers);
      if (fromHeaders !== null) result = { ...result, usage: fromHeaders };
    }
    return withStreamError({ ...result, streamEvents: this.#events }, streamError);
  }

  #converseResult(framing: string | undefined): UsageResult {
    const converse = this.#converse;
    const streamError = converse.error ?? framing ?? (converse.ended ? undefined : 'stream ended before the metadata event');
    return streamError === undefined ? { usage: converse.usage } : { usage: converse.usage, streamError };
  }
}

export function bedrockEventStreamExtractor(headers: ResponseHeaders): UsageExtractor {
  return new BedrockEventStreamExtractor(headers);
}
