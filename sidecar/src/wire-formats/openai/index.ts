// OpenAI's wire format: chat completions, the Responses API and every OpenAI-compatible server's answers.

import type { WireAdapter } from '../wire-adapter.ts';
import { openAiPico } from './cost.ts';
import { openAiJsonExtractor, openAiSseExtractor } from './usage.ts';

export const openAiWire: WireAdapter = {
  extractor: (kind, { stripInjectedUsage, logger }) => (kind === 'sse' ? openAiSseExtractor({ stripInjectedUsage, ...(logger ? { logger } : {}) }) : openAiJsonExtractor()),
  imageList: 'data',
  tokenPico: openAiPico,
};
