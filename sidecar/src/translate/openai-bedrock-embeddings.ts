// OpenAI's embeddings request and answer ↔ the embedding models of Bedrock's InvokeModel:
// - Titan Text Embeddings V2 (amazon.titan-embed-text-v2:0): `{inputText, dimensions, normalize}` →
//   `{embedding, inputTextTokenCount}`; V1 (amazon.titan-embed-text-v1) takes `{inputText}` only. One text a call.
// - Cohere Embed v3 (cohere.embed-english-v3, cohere.embed-multilingual-v3): `{texts, input_type}` →
//   `{embeddings, id, response_type, texts}`, the token count only in the X-Amzn-Bedrock-Input-Token-Count header.

import { bedrockHeaderUsage } from '../wire-formats/bedrock/usage.ts';
import { tokenCount } from '../usage/token-count.ts';
import { checkDimensions, checkTextCount, recordOf, vectorOf, type EmbeddingsReader, type EmbeddingsRequest } from './openai-embeddings.ts';

export interface BedrockEmbedder {
  body(model: string, request: EmbeddingsRequest): Record<string, unknown>;
  read: EmbeddingsReader;
}

const readTitan: EmbeddingsReader = (document, headers) => ({
  vectors: [vectorOf(document.embedding, 'embedding')],
  promptTokens: document.inputTextTokenCount !== undefined ? tokenCount(document.inputTextTokenCount) : (bedrockHeaderUsage(headers)?.inputTokens ?? 0),
});

const TITAN_V2: BedrockEmbedder = {
  body(model, request) {
    checkTextCount(request.texts, 1, model);
    checkDimensions(request.dimensions, [1024, 512, 256], model);
    // normalize: OpenAI's vectors have length 1, and so do these then.
    return { inputText: request.texts[0], normalize: true, ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {}) };
  },
  read: readTitan,
};

const TITAN_V1: BedrockEmbedder = {
  body(model, request) {
    checkTextCount(request.texts, 1, model);
    checkDimensions(request.dimensions, [1536], model);
    return { inputText: request.texts[0] };
  },
  read: readTitan,
};

const COHERE_V3: BedrockEmbedder = {
  body(model, request) {
    checkTextCount(request.texts, 96, model);
    checkDimensions(request.dimensions, [1024], model);
    // Cohere's v3 models require an input_type; OpenAI's request has none. Embeddings made to be stored and
    // searched are what an OpenAI caller gets, so: search_document (as LiteLLM defaults it too).
    return { texts: request.texts, input_type: 'search_document' };
  },
  read(document, headers) {
    // With embedding_types the vectors are keyed by type; the body above asks for the plain float list.
    const embeddings = Array.isArray(document.embeddings) ? document.embeddings : recordOf(document.embeddings, 'embeddings').float;
    if (!Array.isArray(embeddings)) throw new Error('embeddings is not a list of vectors');
    return { vectors: embeddings.map((vector, i) => vectorOf(vector, `embeddings[${i}]`)), promptTokens: bedrockHeaderUsage(headers)?.inputTokens ?? 0 };
  },
};

/** A geography prefix (us., eu.) may come before the provider, as in Bedrock's inference profiles. */
const EMBEDDERS: readonly [RegExp, BedrockEmbedder][] = [
  [/^(?:[a-z]{2,6}\.)?amazon\.titan-embed-text-v2(?::\d+)?$/, TITAN_V2],
  [/^(?:[a-z]{2,6}\.)?amazon\.titan-embed-text-v1(?::\d+)?$/, TITAN_V1],
  [/^(?:[a-z]{2,6}\.)?cohere\.embed-(?:english|multilingual)-v3(?::\d+)?$/, COHERE_V3],
];

/** The embedding model a Bedrock id names, or undefined when it names none this gateway translates. */
export function bedrockEmbedder(model: string): BedrockEmbedder | undefined {
  return EMBEDDERS.find(([id]) => id.test(model))?.[1];
}
