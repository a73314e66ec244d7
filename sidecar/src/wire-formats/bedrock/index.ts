// AWS Bedrock: InvokeModel and Converse, their AWS event streams, and the token counts in its response headers.
// Its models are billed as Anthropic bills Claude: input, cache writes and reads, output.

import { anthropicPico } from '../anthropic/cost.ts';
import { anthropicSseExtractor } from '../anthropic/usage.ts';
import type { WireAdapter } from '../wire-adapter.ts';
import { bedrockEventStreamExtractor, bedrockJsonExtractor } from './usage.ts';

export const bedrockWire: WireAdapter = {
  extractor: (kind, { headers, logger }) => {
    if (kind === 'aws-eventstream') return bedrockEventStreamExtractor(headers);
    return kind === 'sse' ? anthropicSseExtractor(logger ? { logger } : undefined) : bedrockJsonExtractor(headers);
  },
  imageList: 'images',
  tokenPico: anthropicPico,
};
