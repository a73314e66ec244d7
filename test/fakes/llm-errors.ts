// Error replies in each provider's own shape.

import { randomBytes } from 'node:crypto';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { writeJson } from './llm-reply-writer.ts';
import type { FakeBehaviour } from './llm-upstream.ts';

export type ErrorFormat = 'google' | 'openai' | 'anthropic' | 'bedrock';

const googleStatus: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/** `{"error": {"code", "message", "status"}}` as Google APIs send it. */
export function sendGoogleError(res: ServerResponse, status: number, message: string): void {
  writeJson(res, status, { error: { code: status, message, status: googleStatus[status] ?? 'UNKNOWN' } });
}

const openAiTypes: Record<number, [string, string | null]> = {
  400: ['invalid_request_error', null],
  401: ['invalid_request_error', 'invalid_api_key'],
  404: ['invalid_request_error', 'model_not_found'],
  429: ['requests', 'rate_limit_exceeded'],
};

/** `{"error": {"message", "type", "param", "code"}}` as OpenAI sends it. */
export function sendOpenAiError(res: ServerResponse, status: number, message: string, opts: { type?: string; code?: string | null; param?: string | null } = {}): void {
  const [type, code] = openAiTypes[status] ?? ['server_error', null];
  const error = { message, type: opts.type ?? type, param: opts.param ?? null, code: opts.code === undefined ? code : opts.code };
  writeJson(res, status, { error }, { 'x-request-id': `req_${randomBytes(16).toString('hex')}` });
}

const anthropicTypes: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

export function anthropicErrorType(status: number): string {
  return anthropicTypes[status] ?? 'api_error';
}

/** `{"type": "error", "error": {"type", "message"}}` as Anthropic sends it. */
export function sendAnthropicError(res: ServerResponse, status: number, message: string): void {
  writeJson(res, status, { type: 'error', error: { type: anthropicErrorType(status), message }, request_id: anthropicRequestId() }, { 'request-id': anthropicRequestId() });
}

export function anthropicRequestId(): string {
  return `req_${randomBytes(12).toString('base64url')}`;
}

const bedrockTypes: Record<number, string> = {
  400: 'ValidationException',
  403: 'AccessDeniedException',
  404: 'ResourceNotFoundException',
  408: 'ModelTimeoutException',
  424: 'ModelErrorException',
  429: 'ThrottlingException',
  500: 'InternalServerException',
  503: 'ServiceUnavailableException',
};

/** `{"message"}` with the error type in `x-amzn-ErrorType`, as AWS JSON services send it. */
export function sendBedrockError(res: ServerResponse, status: number, message: string, errorType?: string): void {
  const type = errorType ?? bedrockTypes[status] ?? 'InternalServerException';
  const headers: OutgoingHttpHeaders = {
    'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
    'x-amzn-requestid': crypto.randomUUID(),
  };
  writeJson(res, status, { message }, headers);
}

/** The error a test asked for with `status`, in `format`; `errorBody` replaces the body verbatim. */
export function sendBehaviourError(res: ServerResponse, b: FakeBehaviour, format: ErrorFormat): void {
  const status = b.status ?? 500;
  if (b.errorHeaders !== undefined) for (const [name, value] of Object.entries(b.errorHeaders)) res.setHeader(name, value);
  if (b.errorBody !== undefined) return writeJson(res, status, b.errorBody);
  const message = `Fake upstream error ${status}.`;
  if (format === 'google') return sendGoogleError(res, status, message);
  if (format === 'openai') return sendOpenAiError(res, status, message);
  if (format === 'anthropic') return sendAnthropicError(res, status, message);
  return sendBedrockError(res, status, message);
}
