// POST /v1/responses/input_tokens, the Responses API's count of a request's input tokens, which no provider bills
// (ADR 0912). OpenAI's passes through. For Claude and Gemini the request is translated into chat as /v1/responses
// translates it, then counted by the provider's own count (Anthropic's count_tokens, Vertex AI's count-tokens,
// Bedrock's CountTokens, Gemini's countTokens) and answered as OpenAI answers: {object: "response.input_tokens",
// input_tokens}.

import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan, type V1Call, type V1RoutePlan, type V1Surface } from '../routes/route-module.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import { v1Surface } from '../routes/v1-plan.ts';
import { toAnthropicRequest } from '../translate/openai-anthropic.ts';
import { GatewayError, invalidParameter, upstreamErrorBody } from '../translate/openai-error.ts';
import { responsesToChat } from '../translate/responses-request.ts';
import { tokenCount } from '../usage/token-count.ts';
import { OPENAI_API_ERRORS, type CallerAnswer, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';
import { inCallerTerms } from './through-chat.ts';

/** Chat parameter names as a Responses caller knows them. */
const NAMES: Readonly<Record<string, string>> = { max_completion_tokens: 'max_output_tokens', response_format: 'text.format' };

/** What a Messages token count takes of a Messages request. */
const COUNTED_FIELDS = ['messages', 'system', 'tools', 'tool_choice', 'thinking'] as const;

/** OpenAI answers in its own shape; only its errors name the route. */
const PASSED_THROUGH = passedThroughAnswer("OpenAI's input token count");

/** A provider's own count (`field` of its answer) as OpenAI's answer. */
function countAnswer(field: string): CallerAnswer {
  return {
    json: (document) => ({ object: 'response.input_tokens', input_tokens: tokenCount(document[field]) }),
    encoder: () => {
      throw new Error('a token count is not streamed');
    },
    upstreamError: upstreamErrorBody,
  };
}

/** The provider's count of the translated request: a Messages count for Claude, else the route's own count. */
function providerCount(surface: V1Surface, call: V1Call, route: string, provider: string): V1RoutePlan {
  if (surface.messages !== undefined) {
    const { body } = toAnthropicRequest(call.request, { imageUrls: false, route, extensions: call.extensions });
    const counted: Record<string, unknown> = { model: call.requested };
    for (const field of COUNTED_FIELDS) if (body[field] !== undefined) counted[field] = body[field];
    const plan: V1RoutePlan | undefined = surface.messages({ ...call, request: counted }, 'count_tokens');
    if (plan !== undefined) return { ...plan, tokenCountField: plan.tokenCountField ?? 'input_tokens' };
  }
  if (surface.countTokens !== undefined) return surface.countTokens(call);
  throw new GatewayError(
    400,
    `model ${call.requested} (provider ${provider}) cannot count input tokens here: only OpenAI, Claude and Gemini count a request without answering it`,
    { param: 'model', code: 'unsupported_operation' },
  );
}

export const inputTokensApi: GatewayApi = {
  operation: 'count_tokens',
  free: true,
  errors: OPENAI_API_ERRORS,
  requestUser: openAiRequestUser,
  plan(call) {
    const { target } = call;
    const { route, module, surface } = v1Surface(target, call.config);
    // OpenAI counts what a stored response or conversation holds: one stored under a server's key, which its
    // users share, is for its admins only (ADR 1007), as /v1/responses keeps it.
    for (const name of ['previous_response_id', 'conversation'] as const) {
      if (!call.storedObjects && surface.responsesPath !== undefined && call.request[name] !== undefined && call.request[name] !== null) {
        throw invalidParameter(name, `${name} names what OpenAI stores under this server's key, which its users share: only server.auth.admins may count it; send the whole input`);
      }
    }
    if (surface.responsesPath !== undefined) {
      const model = surface.modelId(target.requested, target.entry);
      const plan = nativePlan(model, `${surface.responsesPath}/input_tokens`, { ...call.request, model });
      return { ...plan, route, provider: module.provider, stream: false, translation: 'passthrough', answer: PASSED_THROUGH };
    }
    for (const name of ['previous_response_id', 'conversation'] as const) {
      if (call.request[name] !== undefined && call.request[name] !== null) {
        throw invalidParameter(name, `${name} is not counted for models other than OpenAI's: send the whole input`);
      }
    }
    const translated = responsesToChat(call.request, []);
    const v1Call: V1Call = {
      request: translated.chat,
      requested: target.requested,
      entry: target.entry,
      upstream: upstreamOf(module, call.config),
      env: call.env,
      extensions: translated.extensions,
    };
    let plan: V1RoutePlan;
    try {
      plan = providerCount(surface, v1Call, route, module.provider);
    } catch (error) {
      throw error instanceof GatewayError ? inCallerTerms(error, { ...translated, names: NAMES }) : error;
    }
    return { ...plan, route, provider: module.provider, stream: false, translation: 'count_tokens', answer: countAnswer(plan.tokenCountField ?? 'totalTokens') };
  },
};
