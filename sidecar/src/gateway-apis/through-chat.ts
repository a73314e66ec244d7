// The Responses and Messages APIs on a route that does not speak them: the request, already translated into a
// chat request and its extensions, is planned by the route as a chat call would be, and the route's answer
// (its own format, or OpenAI's chat format) comes back through the chat pivot to the caller's API.

import type { RouteModule, V1RoutePlan, V1Surface } from '../routes/route-module.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import type { ChatExtensions } from '../translate/chat-extensions.ts';
import type { ChatRequestJson } from '../translate/chat-request-json.ts';
import { OPENAI_CHAT_RESPONSE } from '../translate/chat-responses.ts';
import { GatewayError } from '../translate/openai-error.ts';
import type { ApiCall, ApiPlan, CallerAnswer } from './gateway-api.ts';

export interface TranslatedRequest {
  chat: ChatRequestJson;
  extensions: ChatExtensions;
  /** For each chat message, the caller's field it came from. */
  origins: readonly string[];
  /** Chat parameter names in the caller's API (`max_completion_tokens` → `max_output_tokens`). */
  names: Readonly<Record<string, string>>;
}

export function planThroughChat(call: ApiCall, route: RouteModule, surface: V1Surface, translated: TranslatedRequest, answer: CallerAnswer): ApiPlan {
  const { target, config, env } = call;
  const v1Call = { request: translated.chat, requested: target.requested, entry: target.entry, upstream: upstreamOf(route, config), env, extensions: translated.extensions };
  let plan: V1RoutePlan;
  try {
    plan = surface.plan(v1Call);
  } catch (error) {
    throw error instanceof GatewayError ? inCallerTerms(error, translated) : error;
  }
  const response = plan.response ?? OPENAI_CHAT_RESPONSE;
  return {
    ...plan,
    response,
    // The answer's usage is the caller's to read (response.completed, message_delta): always asked for.
    includeUsage: true,
    route: route.name,
    provider: route.provider,
    stream: translated.chat.stream === true,
    translation: response.name,
    extensions: translated.extensions,
    answer,
  };
}

const MESSAGE_PATH = /^messages\[(\d+)\]/;

/** A route's refusal of the chat request, naming the field the caller sent (`input[2]` for `messages[3]`). */
export function inCallerTerms(error: GatewayError, translated: Pick<TranslatedRequest, 'origins' | 'names'>): GatewayError {
  const param = error.param;
  if (param === null) return error;
  let renamed = param;
  const message = MESSAGE_PATH.exec(param);
  if (message) {
    const origin = translated.origins[Number(message[1])];
    if (origin !== undefined) renamed = origin + param.slice(message[0].length);
  } else {
    const head = /^[a-z_]+/.exec(param)?.[0] ?? param;
    const name = translated.names[head];
    if (name !== undefined) renamed = name + param.slice(head.length);
  }
  if (renamed === param) return error;
  return new GatewayError(error.statusCode, error.message.split(param).join(renamed), { type: error.type, param: renamed, code: error.code });
}
