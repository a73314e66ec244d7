// What one wire format owns (ADR 1700): how its answers are read for usage, where an image answer lists its
// images, and the formula that turns its usage into a cost. The registry of them is wire-adapters.ts; a
// format without every part does not compile.

import type { Logger } from 'pino';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import type { BodyKind } from '../usage/body-kind.ts';
import type { UsageExtractor } from '../usage/usage-extractor.ts';
import type { TokenUsage } from '../usage/usage.ts';
import type { TokenRates } from './token-rates.ts';
import type { ResponseHeaders } from './bedrock/usage.ts';

/** What an extractor of one answer is told besides its bytes (extractor.ts's options, passed as they are: no copy per call). */
export interface ExtractorSettings {
  /** Response headers (Bedrock's X-Amzn-Bedrock-*-Token-Count). */
  headers: ResponseHeaders;
  /** OpenAI SSE: remove the usage-only chunk the proxy asked for (stream-options.ts). */
  stripInjectedUsage?: boolean;
  /** Told about skipped over-size events. */
  logger?: Logger | undefined;
}

export interface WireAdapter {
  /** The usage extractor for an answer of this format framed as `kind` (the Content-Type, or sniffed). */
  extractor(kind: Exclude<BodyKind, 'unknown' | 'audio'>, settings: ExtractorSettings): UsageExtractor;
  /** The field of an image answer that lists its images (ADR 0910, 0915). */
  readonly imageList: string;
  /**
   * The token part of a call's cost in pico-dollars, at the request's `rates` (docs/spans-and-pricing.md, "Cost
   * formulas"): which of the normalised counts are billed at which rate is the format's.
   */
  tokenPico(usage: TokenUsage, rates: TokenRates, entry: PriceEntry): bigint;
}
