// Entry point of usage extraction: picks the extractor for a response from the route's wire format and the
// response's Content-Type. Each format's reading lives in its own folder (wire-adapters.ts lists them).

import type { Logger } from 'pino';
import type { WireFormat } from '../../../contracts/routes.ts';
import type { ResponseHeaders } from './bedrock/usage.ts';
import { bodyKindOf, sniffBodyKind, type BodyKind } from '../usage/body-kind.ts';
import { ImageAnswerExtractor } from './image-answer.ts';
import { WIRE_ADAPTERS } from './wire-adapters.ts';
import { NO_BYTES, NoUsageExtractor, type UsageExtractor } from '../usage/usage-extractor.ts';
import type { UsageResult } from '../usage/usage.ts';

export type { UsageExtractor } from '../usage/usage-extractor.ts';
export { bytesAskingForUsage, injectStreamUsage, requestNeedsInjectedUsage } from '../usage/stream-options.ts';

export interface UsageExtractorOptions {
  format: WireFormat;
  /** Picks JSON vs SSE vs JSON array vs AWS event stream; when absent the body's first byte decides. */
  contentType: string | undefined;
  /** Response headers (Bedrock's X-Amzn-Bedrock-*-Token-Count). */
  headers: ResponseHeaders;
  /**
   * OpenAI SSE: the proxy added stream_options.include_usage; remove that usage-only chunk (choices: [] plus
   * usage) so the caller gets the stream it asked for. The extractor then forwards whole events only: call
   * flush() at the end of the upstream body and send what it returns.
   */
  stripInjectedUsage?: boolean;
  /** Upstream status; 4xx/5xx responses carry no usage and are passed through unread. */
  statusCode?: number;
  /** Told about skipped over-size events. */
  logger?: Logger | undefined;
  /** The call's operation: an image API answer's images are counted as it passes (ADR 0910). */
  operation?: string | undefined;
}

/** The operations of OpenAI's image API (routes/openai-images.ts), whose answers are read by image-answer.ts. */
const IMAGE_OPERATIONS: ReadonlySet<string> = new Set(['image_generation', 'image_edit']);

export function createUsageExtractor(options: UsageExtractorOptions): UsageExtractor {
  if (options.statusCode !== undefined && options.statusCode >= 400) return new NoUsageExtractor();
  const kind = bodyKindOf(options.contentType);
  // An image answer is JSON (a streamed one is not metered): read as one whatever its Content-Type says.
  if ((kind === 'json' || kind === 'unknown') && IMAGE_OPERATIONS.has(options.operation ?? '')) return new ImageAnswerExtractor(WIRE_ADAPTERS[options.format].imageList);
  if (kind === 'unknown') return new SniffingUsageExtractor(options);
  if (kind === 'audio') return new NoUsageExtractor();
  return extractorFor(kind, options);
}

function extractorFor(kind: Exclude<BodyKind, 'unknown' | 'audio'>, options: UsageExtractorOptions): UsageExtractor {
  return WIRE_ADAPTERS[options.format].extractor(kind, options);
}

/** A response without Content-Type: the first significant byte decides, then the chosen extractor does the rest. */
class SniffingUsageExtractor implements UsageExtractor {
  readonly #options: UsageExtractorOptions;
  #inner: UsageExtractor | null = null;

  constructor(options: UsageExtractorOptions) {
    this.#options = options;
  }

  get sawEnd(): boolean {
    return this.#inner?.sawEnd ?? false;
  }

  write(chunk: Buffer): Buffer {
    if (this.#inner === null) {
      let i = 0;
      while (i < chunk.length && (chunk[i] === 0x20 || chunk[i] === 0x0a || chunk[i] === 0x0d || chunk[i] === 0x09)) i++;
      if (i === chunk.length) return chunk;
      const kind = sniffBodyKind(chunk[i]!);
      this.#inner = extractorFor(kind === 'unknown' ? 'json' : kind, this.#options);
    }
    return this.#inner.write(chunk);
  }

  flush(): Buffer {
    return this.#inner === null ? NO_BYTES : this.#inner.flush();
  }

  end(streamError?: string): UsageResult {
    return this.#inner === null ? new NoUsageExtractor().end(streamError) : this.#inner.end(streamError);
  }
}
