// Anthropic's Messages API, on the Anthropic API and on Vertex AI (rawPredict).

import type { WireAdapter } from '../wire-adapter.ts';
import { anthropicPico } from './cost.ts';
import { anthropicJsonExtractor, anthropicSseExtractor } from './usage.ts';

export const anthropicWire: WireAdapter = {
  extractor: (kind, { logger }) => (kind === 'sse' ? anthropicSseExtractor(logger ? { logger } : undefined) : anthropicJsonExtractor()),
  imageList: 'data',
  tokenPico: anthropicPico,
};
