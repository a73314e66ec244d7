// Format openai (route beta): the OpenAI API. Every path is forwarded; the body is read for the model, the user and to add
// stream_options.include_usage. /v1 chat, Responses and embeddings calls pass through unchanged; Messages calls are
// translated.

import { openAiEndpoint } from '../endpoint-kinds.ts';
import { OPENAI_ERRORS } from '../error-shape.ts';
import { planOpenAiNative, planOpenAiPassThrough } from '../openai-chat-route.ts';
import { defineFormat } from '../route-module.ts';
import { isFileUpload } from '../deferred-plan.ts';
import { isAudioUpload, OPENAI_AUDIO_PATHS } from '../openai-audio.ts';
import { isImageUpload, OPENAI_IMAGE_PATHS } from '../openai-images.ts';

export const openAi = defineFormat('openai', (route) => ({
  body: 'json',
  formUpload: (method: string, rest: string) => isAudioUpload(method, rest) || isImageUpload(method, rest) || isFileUpload(method, rest),
  endpoint: openAiEndpoint,
  errors: OPENAI_ERRORS,
  planNative: (call) => planOpenAiNative(route, call),
  v1: {
    modelId: (requested) => requested,
    plan: (call) => planOpenAiPassThrough(call, call.requested, '/v1/chat/completions'),
    responsesPath: '/v1/responses',
    moderationsPath: '/v1/moderations',
    embeddings: (call) => planOpenAiPassThrough(call, call.requested, '/v1/embeddings'),
    audio: OPENAI_AUDIO_PATHS,
    images: OPENAI_IMAGE_PATHS,
  },
}));
