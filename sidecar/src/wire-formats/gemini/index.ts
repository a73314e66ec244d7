// Gemini's wire format on Vertex AI: generateContent (JSON, a JSON array when streamed without alt=sse, or SSE)
// and :predict (embeddings, Imagen).

import type { WireAdapter } from '../wire-adapter.ts';
import { geminiPico } from './cost.ts';
import { geminiJsonExtractor, geminiSseExtractor } from './usage.ts';

export const geminiWire: WireAdapter = {
  extractor: (kind, { logger }) => {
    const options = logger ? { logger } : undefined;
    return kind === 'sse' ? geminiSseExtractor(options) : geminiJsonExtractor(options);
  },
  imageList: 'predictions',
  tokenPico: geminiPico,
};
