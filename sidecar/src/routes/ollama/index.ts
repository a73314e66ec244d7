// Format ollama (route local): the developer's local model runtime (Ollama). Its OpenAI-compatible /v1 paths are planned
// like the OpenAI API's (the model and user from the body, stream usage asked for so it can be counted);
// its native /api/* paths (NDJSON streams) are forwarded as they are. Its upstream is local.runtime.baseUrl,
// the same address the runtime endpoints (/_local/api/pull, /start) use. Calls cost 0 (provider `local`).
//
// On /v1 the gateway sends it chat calls for the runtime's models, and passes /v1/embeddings and
// /v1/completions through, which Ollama's OpenAI-compatible API serves as well.

import { ollamaEndpoint } from '../endpoint-kinds.ts';
import { OPENAI_ERRORS } from '../error-shape.ts';
import { bodyModel, forwardedAsIs, parseRouteJson } from '../native-request.ts';
import { planOpenAiNative, planOpenAiPassThrough } from '../openai-chat-route.ts';
import { defineFormat } from '../route-module.ts';

export const ollama = defineFormat('ollama', (route) => ({
  body: 'json',
  endpoint: ollamaEndpoint,
  errors: OPENAI_ERRORS,
  planNative: (call) => {
    if (call.rest.startsWith('/v1/')) return planOpenAiNative(route, call);
    const model = call.body && call.body.length > 0 ? bodyModel(parseRouteJson(call.body, route), route, false) : 'unknown';
    return forwardedAsIs(call.rest + call.query, call.body, model, 'chat');
  },
  baseUrlFromConfig: (config) => config.local.runtime.baseUrl,
  v1: {
    modelId: (requested) => requested,
    plan(call) {
      // Ollama's OpenAI-compatible API reads max_tokens only; the newer name would be ignored.
      const max = call.request.max_completion_tokens;
      const request =
        max !== undefined && max !== null && call.request.max_tokens === undefined ? { ...call.request, max_tokens: max, max_completion_tokens: undefined } : call.request;
      return planOpenAiPassThrough({ ...call, request }, call.requested, '/v1/chat/completions');
    },
    passThrough: { completions: '/v1/completions' },
    embeddings: (call) => planOpenAiPassThrough(call, call.requested, '/v1/embeddings'),
  },
}));
