// The /v1 side the Claude routes share (gamma-direct, gamma, gamma-cloudb): a chat request translated to the
// Anthropic Messages API; each route then wraps it in its own envelope (model in the body or the path, its
// anthropic_version, how streaming is asked for).

import type { ChatResponseTranslation } from '../translate/chat-responses.ts';
import { toAnthropicRequest, type AnthropicRequest } from '../translate/openai-anthropic.ts';
import type { V1Call, V1RoutePlan } from './route-module.ts';

export function chatToMessages(call: V1Call, route: string, imageUrls: boolean): AnthropicRequest {
  return toAnthropicRequest(call.request, { imageUrls, route, extensions: call.extensions });
}

/** The plan of a translated Claude call, once the route has set its envelope. */
export function claudePlan(
  translated: AnthropicRequest,
  envelope: { model: string; path: string; headers?: Record<string, string> },
  response: ChatResponseTranslation,
): V1RoutePlan {
  return {
    model: envelope.model,
    path: envelope.path,
    body: Buffer.from(JSON.stringify(translated.body)),
    headers: { accept: translated.stream ? 'text/event-stream' : 'application/json', ...envelope.headers },
    response,
    includeUsage: translated.includeUsage,
    jsonMode: translated.jsonMode,
    stripInjectedUsage: false,
  };
}
