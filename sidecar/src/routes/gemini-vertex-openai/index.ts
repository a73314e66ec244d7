// Format gemini-vertex-openai (route alpha-compat): Vertex AI's OpenAI-compatible chat completions surface. It speaks OpenAI's format, so
// /v1 calls pass through with the model as that surface names it (`google/<id>`).

import { vertexOpenAiEndpoint } from '../endpoint-kinds.ts';
import { OPENAI_ERRORS } from '../error-shape.ts';
import { planOpenAiNative, planOpenAiPassThrough } from '../openai-chat-route.ts';
import { defineFormat } from '../route-module.ts';
import { geminiModelId, vertexLocationPath } from '../vertex-ai.ts';

const modelId = (requested: string): string => `google/${geminiModelId(requested)}`;

export const geminiVertexOpenAi = defineFormat('gemini-vertex-openai', (route) => ({
  body: 'json',
  endpoint: vertexOpenAiEndpoint,
  errors: OPENAI_ERRORS,
  planNative: (call) => planOpenAiNative(route, call),
  v1: {
    modelId,
    plan: (call) => planOpenAiPassThrough(call, modelId(call.requested), `${vertexLocationPath(route, call.upstream, call.env)}/endpoints/openapi/chat/completions`),
  },
}));
