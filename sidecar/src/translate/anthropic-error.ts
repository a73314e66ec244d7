// Errors in Anthropic's shape, {"type": "error", "error": {"type", "message"}}, which the Anthropic SDKs turn
// into their typed exceptions (BadRequestError, NotFoundError, RateLimitError, …): how /v1/messages answers
// every failure, as openai-error.ts is for the OpenAI-format APIs. The status decides the SDK's exception; the
// message keeps what the gateway or the provider said.

import type { ProxyError } from '../errors.ts';
import { upstreamErrorBody, type GatewayError } from './openai-error.ts';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string };
}

/** The `type` Anthropic uses for a status. */
export function anthropicErrorType(statusCode: number): string {
  if (statusCode === 401) return 'authentication_error';
  if (statusCode === 403) return 'permission_error';
  if (statusCode === 404) return 'not_found_error';
  if (statusCode === 413) return 'request_too_large';
  if (statusCode === 429) return 'rate_limit_error';
  if (statusCode === 529) return 'overloaded_error';
  if (statusCode < 500) return 'invalid_request_error';
  return 'api_error';
}

export function anthropicErrorBody(statusCode: number, message: string): AnthropicErrorBody {
  return { type: 'error', error: { type: anthropicErrorType(statusCode), message } };
}

/** A refusal by the gateway: the parameter leads the message when the message does not name it already. */
export function anthropicRefusalBody(error: GatewayError): AnthropicErrorBody {
  const named = error.param === null || error.message.includes(error.param);
  return anthropicErrorBody(error.statusCode, named ? error.message : `${error.param}: ${error.message}`);
}

/** The engine's own failure, its stable code leading the message (Anthropic's shape has no field for it). */
export function anthropicProxyErrorBody(error: ProxyError): AnthropicErrorBody {
  return anthropicErrorBody(error.statusCode, `${error.code}: ${error.message}`);
}

/** An upstream's error, read as for OpenAI's shape (the provider's words, the route that answered), in Anthropic's. */
export function anthropicUpstreamErrorBody(route: string, statusCode: number, headers: Record<string, string | string[] | undefined>, body: Buffer): AnthropicErrorBody {
  return anthropicErrorBody(statusCode, upstreamErrorBody(route, statusCode, headers, body).error.message);
}

/** An in-stream failure: one `error` event, which the Anthropic SDKs raise as an APIError. */
export function anthropicStreamErrorEvent(route: string, message: string): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(500, `upstream ${route} stream failed: ${message}`))}\n\n`;
}
