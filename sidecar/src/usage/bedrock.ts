// Claude on AWS Bedrock (InvokeModel / InvokeModelWithResponseStream).
// - JSON responses: the body's Anthropic `usage`; when it has none (another model family, a body too odd to
//   read), the X-Amzn-Bedrock-*-Token-Count response headers.
// - Event streams: each chunk frame holds one Anthropic stream event, merged as on the direct API; the
//   message_stop event's amazon-bedrock-invocationMetrics and then the headers are the fallbacks.

import { BedrockStreamDecoder } from '../formats/bedrock-stream.ts';
import { ANTHROPIC_BODY_FIELDS, AnthropicStreamUsage, readAnthropicBody } from './anthropic.ts';
import { JsonUsageExtractor } from './json-extractor.ts';
import type { UsageExtractor } from './usage-extractor.ts';
import { NO_BYTES, withStreamError } from './usage-extractor.ts';
import { headerTokenCount } from './token-count.ts';
import type { TokenUsage, UsageResult } from './usage.ts';

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

export function bedrockJsonExtractor(headers: ResponseHeaders): UsageExtractor {
  return new JsonUsageExtractor(ANTHROPIC_BODY_FIELDS, readAnthropicBody, {
    fallback: () => ({ usage: bedrockHeaderUsage(headers) }),
  });
}

export class BedrockEventStreamExtractor implements UsageExtractor {
  readonly #headers: ResponseHeaders;
  readonly #usage = new AnthropicStreamUsage();
  readonly #decoder: BedrockStreamDecoder;
  #events = 0;

  constructor(headers: ResponseHeaders) {
    this.#headers = headers;
    this.#decoder = new BedrockStreamDecoder((type, json) => {
      this.#events++;
      this.#usage.event(type, json);
    });
  }

  get sawEnd(): boolean {
    return this.#usage.stopped;
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
    let result = this.#usage.result(framing);
    if (result.usage === null) {
      const fromHeaders = bedrockHeaderUsage(this.#headers);
      if (fromHeaders !== null) result = { ...result, usage: fromHeaders };
    }
    return withStreamError({ ...result, streamEvents: this.#events }, streamError);
  }
}

export function bedrockEventStreamExtractor(headers: ResponseHeaders): UsageExtractor {
  return new BedrockEventStreamExtractor(headers);
}
