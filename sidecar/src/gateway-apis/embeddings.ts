// POST /v1/embeddings, OpenAI's embeddings API, for every provider that computes embeddings (ADR 0903): OpenAI,
// a local runtime and configured OpenAI-compatible routes take the request as it is; Gemini's embedding models
// on Vertex AI (:predict) and Bedrock's Titan and Cohere models (InvokeModel) get it translated, and their
// answers come back as OpenAI's list, float or base64 as asked. The span's usage is read from the upstream
// bytes by the route's usage extractor, as for every other call.

import { openAiRequestUser } from '../routes/request-user.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import { embeddingsRoute } from '../routes/v1-plan.ts';
import { openAiEmbeddingList, type EmbeddingsTranslation } from '../translate/openai-embeddings.ts';
import { upstreamErrorBody } from '../translate/openai-error.ts';
import { OPENAI_API_ERRORS, type CallerAnswer, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';

/** An upstream that speaks OpenAI's embeddings API answers the caller itself; only its errors name the route. */
const PASSED_THROUGH = passedThroughAnswer('an OpenAI-format embeddings answer');

/** A translated route's answer, read with its reader and written as OpenAI's list. */
function translatedAnswer(translation: EmbeddingsTranslation): CallerAnswer {
  return {
    json: (document, _translation, shaping) => openAiEmbeddingList(translation.read(document, shaping.headers), shaping.model, translation.encoding),
    encoder: () => {
      throw new Error('embeddings are not streamed');
    },
    upstreamError: upstreamErrorBody,
  };
}

export const embeddingsApi: GatewayApi = {
  operation: 'embeddings',
  errors: OPENAI_API_ERRORS,
  requestUser: openAiRequestUser,
  plan(call) {
    const { module, plan } = embeddingsRoute(call.target, call.config);
    const planned = plan({ request: call.request, requested: call.target.requested, entry: call.target.entry, upstream: upstreamOf(module, call.config), env: call.env });
    const { embeddings, ...rest } = planned;
    return {
      ...rest,
      route: module.name,
      provider: module.provider,
      stream: false,
      translation: embeddings === undefined ? 'passthrough' : 'embeddings',
      answer: embeddings === undefined ? PASSED_THROUGH : translatedAnswer(embeddings),
    };
  },
  routeOf(target, config) {
    try {
      return embeddingsRoute(target, config).module.name;
    } catch {
      return undefined;
    }
  },
};
