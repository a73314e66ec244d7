// Format openai-chat: any OpenAI-compatible chat completions API (Mistral, DeepSeek, Groq, Together, Azure
// OpenAI's v1 API, vLLM, llama.cpp's server, …). The route's base URL is what comes before `/v1`. Native calls
// are planned like the OpenAI API's; on /v1, chat calls pass through with the route's model id, the Responses
// and Messages APIs arrive translated into chat (such servers do not speak them), and /v1/embeddings and
// /v1/completions pass through.

import { openAiCompatibleEndpoint } from '../endpoint-kinds.ts';
import { OPENAI_ERRORS } from '../error-shape.ts';
import { planOpenAiNative, planOpenAiPassThrough } from '../openai-chat-route.ts';
import { defineFormat } from '../route-module.ts';
import { isAudioUpload, OPENAI_AUDIO_PATHS } from '../openai-audio.ts';
import { isImageUpload, OPENAI_IMAGE_PATHS } from '../openai-images.ts';

export const openAiChat = defineFormat('openai-chat', (route) => ({
  body: 'json',
  formUpload: (method: string, rest: string) => isAudioUpload(method, rest) || isImageUpload(method, rest),
  endpoint: openAiCompatibleEndpoint,
  errors: OPENAI_ERRORS,
  planNative: (call) => planOpenAiNative(route, call),
  v1: {
    modelId: (requested) => requested,
    plan: (call) => planOpenAiPassThrough(call, call.requested, '/v1/chat/completions'),
    passThrough: { completions: '/v1/completions' },
    moderationsPath: '/v1/moderations',
    embeddings: (call) => planOpenAiPassThrough(call, call.requested, '/v1/embeddings'),
    audio: OPENAI_AUDIO_PATHS,
    images: OPENAI_IMAGE_PATHS,
  },
}));
