// OpenAI's wire format: chat completions, the Responses API and every OpenAI-compatible server's answers.

import type { WireAdapter } from '../wire-adapter.ts';
import { openAiPico } from './cost.ts';
import { openAiJsonExtractor, openAiSseExtractor } from './usage.ts';

export const openAiWire: WireAdapter = {
  extractor: (kind, { stripInjectedUsage = false, logger }) =>
    kind !== 'sse' ? openAiJsonExtractor() : openAiSseExtractor(logger ? { stripInjectedUsage, logger } : { stripInjectedUsage }),
  imageList: 'data',
  tokenPico: openAiPico,
};
