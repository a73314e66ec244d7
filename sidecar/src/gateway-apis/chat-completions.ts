// /v1/chat/completions, and /v1/completions passed through to a local runtime or an OpenAI-compatible route: the
// routes plan them (routes/v1-plan.ts) and the answer is the chat format itself.

import { planGatewayCall, type GatewayOperation } from '../routes/v1-plan.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { CHAT_SSE_ENCODER } from '../translate/chat-stream.ts';
import { upstreamErrorBody } from '../translate/openai-error.ts';
import { OPENAI_API_ERRORS, type CallerAnswer, type GatewayApi } from './gateway-api.ts';

/** Chat callers get the chat pivot as it is: a translated completion, chat SSE, OpenAI's error shape. */
export const CHAT_ANSWER: CallerAnswer = {
  json(document, translation, shaping) {
    if (translation === null) throw new Error('a chat answer read whole is a translated one');
    return translation.fromJson(document, shaping);
  },
  encoder: () => CHAT_SSE_ENCODER,
  upstreamError: upstreamErrorBody,
};

/** The span's operation name per OpenTelemetry's GenAI conventions. */
const OPERATION_NAMES: Record<GatewayOperation, string> = { chat: 'chat', completions: 'text_completion' };

export function chatCompletionsApi(operation: GatewayOperation): GatewayApi {
  return {
    operation: OPERATION_NAMES[operation],
    errors: OPENAI_API_ERRORS,
    requestUser: openAiRequestUser,
    plan: (call) => ({ ...planGatewayCall(call.request, call.target, call.config, call.env, operation), answer: CHAT_ANSWER }),
  };
}
