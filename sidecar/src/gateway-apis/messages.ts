// POST /v1/messages, the Anthropic Messages API, and /v1/messages/count_tokens, for every provider: Claude's
// routes speak it and the request passes through in the route's envelope (Vertex AI's rawPredict, Bedrock's
// InvokeModel, its stream re-framed as SSE); OpenAI, Gemini and a local runtime are reached through the chat
// pivot and answer as a `message` or the Messages event stream. Errors in Anthropic's shape, so the
// Anthropic SDKs raise their typed exceptions.

import { randomId } from './gateway-ids.ts';
import { anthropicRequestUser } from '../routes/request-user.ts';
import type { MessagesOperation } from '../routes/route-module.ts';
import { v1Surface } from '../routes/v1-plan.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import { anthropicUpstreamErrorBody } from '../translate/anthropic-error.ts';
import { OPENAI_CHAT_RESPONSE } from '../translate/chat-responses.ts';
import { messagesToChat } from '../translate/messages-request.ts';
import { messageFromCompletion, MessagesStreamEncoder } from '../translate/messages-output.ts';
import { GatewayError } from '../translate/openai-error.ts';
import { tokenCount } from '../usage/token-count.ts';
import { ANTHROPIC_API_ERRORS, type ApiCall, type ApiPlan, type CallerAnswer, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';
import { inCallerTerms, planThroughChat } from './through-chat.ts';

/** Chat parameter names as a Messages caller knows them. */
const NAMES: Readonly<Record<string, string>> = { max_completion_tokens: 'max_tokens', stop: 'stop_sequences', response_format: 'output_config.format' };

const newMessageId = (): string => `msg_${randomId(24)}`;

/** Claude answers in the Messages API itself; only its errors are rewritten, to name the route. */
const NATIVE_ANSWER = passedThroughAnswer('a native Messages answer', anthropicUpstreamErrorBody);

/** Another provider's answer, through the chat pivot. */
const TRANSLATED_ANSWER: CallerAnswer = {
  json: (document, translation, shaping) => messageFromCompletion((translation ?? OPENAI_CHAT_RESPONSE).fromJson(document, shaping), newMessageId()),
  encoder: (model) => new MessagesStreamEncoder(newMessageId(), model),
  upstreamError: anthropicUpstreamErrorBody,
};

/** A provider's own token count (Gemini's totalTokens, Bedrock's inputTokens) as Messages' count_tokens answer. */
function countAnswer(field: string): CallerAnswer {
  return {
    json: (document) => ({ input_tokens: tokenCount(document[field]) }),
    encoder: () => {
      throw new Error('a token count is not streamed');
    },
    upstreamError: anthropicUpstreamErrorBody,
  };
}

/** The anthropic-beta flags a caller sent. */
function betas(call: ApiCall): string[] {
  const header = call.headers['anthropic-beta'];
  const values = Array.isArray(header) ? header : header === undefined ? [] : [header];
  return values
    .flatMap((value) => value.split(','))
    .map((flag) => flag.trim())
    .filter((flag) => flag !== '');
}

function nativePlan(call: ApiCall, operation: MessagesOperation): ApiPlan | undefined {
  const { route, module, surface } = v1Surface(call.target, call.config);
  if (surface.messages === undefined) return undefined;
  const plan = surface.messages(
    { request: call.request, requested: call.target.requested, entry: call.target.entry, upstream: upstreamOf(module, call.config), env: call.env, betas: betas(call) },
    operation,
  );
  if (plan === undefined) return undefined;
  if (plan.tokenCountField !== undefined)
    return { ...plan, route, provider: module.provider, stream: false, translation: 'count_tokens', answer: countAnswer(plan.tokenCountField) };
  return { ...plan, route, provider: module.provider, stream: call.request.stream === true, translation: 'passthrough', answer: NATIVE_ANSWER };
}

export const messagesApi: GatewayApi = {
  operation: 'chat',
  errors: ANTHROPIC_API_ERRORS,
  requestUser: anthropicRequestUser,
  plan(call) {
    const native = nativePlan(call, 'messages');
    if (native !== undefined) return native;
    const { module, surface } = v1Surface(call.target, call.config);
    return planThroughChat(call, module, surface, { ...messagesToChat(call.request), names: NAMES }, TRANSLATED_ANSWER);
  },
};

export const countTokensApi: GatewayApi = {
  operation: 'count_tokens',
  free: true,
  errors: ANTHROPIC_API_ERRORS,
  requestUser: anthropicRequestUser,
  plan(call) {
    const native = nativePlan(call, 'count_tokens');
    if (native !== undefined) return native;
    const { route, module, surface } = v1Surface(call.target, call.config);
    if (surface.countTokens === undefined) {
      throw new GatewayError(
        400,
        `model ${call.target.requested} (provider ${call.target.provider}) cannot count tokens here: only Claude (on the Anthropic API, Vertex AI and Bedrock) and Gemini count a prompt without answering it`,
        { code: 'unsupported_operation' },
      );
    }
    // A token count has no max_tokens; the translation wants one, which countTokens does not send.
    const translated = messagesToChat({ ...call.request, max_tokens: 1 });
    let plan;
    try {
      plan = surface.countTokens({
        request: translated.chat,
        requested: call.target.requested,
        entry: call.target.entry,
        upstream: upstreamOf(module, call.config),
        env: call.env,
        extensions: translated.extensions,
      });
    } catch (error) {
      throw error instanceof GatewayError ? inCallerTerms(error, { ...translated, names: NAMES }) : error;
    }
    return { ...plan, route, provider: module.provider, stream: false, translation: 'count_tokens', answer: countAnswer(plan.tokenCountField ?? 'totalTokens') };
  },
};
