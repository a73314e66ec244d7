// OpenAI's embeddings request and answer ↔ Vertex AI's text embeddings (`:predict` on a Google publisher model):
// `{"instances": [{"content"}], "parameters": {"autoTruncate", "outputDimensionality"}}` → `{"predictions":
// [{"embeddings": {"values", "statistics": {"token_count", "truncated"}}}], "metadata": {"billableCharacterCount"}}`.

import { tokenCount } from '../usage/token-count.ts';
import { checkTextCount, recordOf, vectorOf, type EmbeddingsReader, type EmbeddingsRequest } from './openai-embeddings.ts';
import { unsupportedParameter } from './openai-error.ts';

interface VertexEmbedder {
  /** Texts one :predict takes (gemini-embedding-001: one; the text-embedding models: 250). */
  most: number;
  /** The longest vector it gives (outputDimensionality up to this). */
  dimensions: number;
}

/** Vertex AI's text embedding models, by id; undefined for a model that does not embed text this way. */
export function vertexEmbedder(model: string): VertexEmbedder | undefined {
  if (/^gemini-embedding-/.test(model)) return { most: 1, dimensions: 3072 };
  if (/^(text-embedding|text-multilingual-embedding)-\d+$/.test(model)) return { most: 250, dimensions: 768 };
  return undefined;
}

/**
 * The :predict body. autoTruncate is off: OpenAI refuses a text over its model's limit rather than embedding
 * part of it, and so does Vertex AI then (its default would cut the text silently).
 */
export function vertexEmbeddingsBody(model: string, embedder: VertexEmbedder, request: EmbeddingsRequest): Record<string, unknown> {
  checkTextCount(request.texts, embedder.most, model);
  const { dimensions } = request;
  if (dimensions !== undefined && dimensions > embedder.dimensions) {
    throw unsupportedParameter('dimensions', `dimensions ${dimensions} is not supported for model ${model}: it gives at most ${embedder.dimensions}`);
  }
  return {
    instances: request.texts.map((content) => ({ content })),
    parameters: { autoTruncate: false, ...(dimensions !== undefined ? { outputDimensionality: dimensions } : {}) },
  };
}

/** The vectors in instance order; the prompt tokens are the sum of each prediction's statistics.token_count. */
export const readVertexEmbeddings: EmbeddingsReader = (document) => {
  const predictions = document.predictions;
  if (!Array.isArray(predictions)) throw new Error('the answer has no predictions');
  let promptTokens = 0;
  const vectors = predictions.map((prediction, i) => {
    const embeddings = recordOf(recordOf(prediction, `predictions[${i}]`).embeddings, `predictions[${i}].embeddings`);
    const statistics = embeddings.statistics;
    promptTokens += tokenCount(typeof statistics === 'object' && statistics !== null ? (statistics as Record<string, unknown>).token_count : undefined);
    return vectorOf(embeddings.values, `predictions[${i}].embeddings.values`);
  });
  return { vectors, promptTokens };
};
