// The error shapes callers' SDKs turn into their typed exceptions, one per request format. A refusal the
// engine makes on a route's behalf (today /v1's; next, a budget) answers in the shape of the route's callers:
// OpenAI's on OpenAI-format routes and /v1, Anthropic's on the Claude routes, Google's on Gemini.

import { anthropicErrorBody } from '../translate/anthropic-error.ts';
import { errorType } from '../translate/openai-error.ts';

export type ErrorFormat = 'openai' | 'anthropic' | 'google';

export interface ErrorShape {
  readonly format: ErrorFormat;
  /**
   * The JSON body of a refusal: `code` is the engine's stable code (`budget_exceeded`), kept where the format
   * has a field for it (OpenAI's `code`) and otherwise leading the message, so it can still be grepped.
   */
  body(statusCode: number, code: string, message: string): Record<string, unknown>;
}

/** {"error": {"message", "type", "param", "code"}}: openai SDKs raise BadRequestError, RateLimitError, … */
export const OPENAI_ERRORS: ErrorShape = {
  format: 'openai',
  body: (statusCode, code, message) => ({ error: { message, type: errorType(statusCode), param: null, code } }),
};

/** {"type": "error", "error": {"type", "message"}}: the Anthropic SDKs (direct, Vertex AI, Bedrock). */
export const ANTHROPIC_ERRORS: ErrorShape = {
  format: 'anthropic',
  body: (statusCode, code, message) => ({ ...anthropicErrorBody(statusCode, `${code}: ${message}`) }),
};

/**
 * Anthropic's body for the Anthropic Bedrock SDK, with `message` and `__type` at the top as Bedrock's own errors
 * carry them, so the AWS SDK raises ThrottlingException and the like with the proxy's message, not UnknownError.
 */
export const BEDROCK_ERRORS: ErrorShape = {
  format: 'anthropic',
  body: (statusCode, code, message) => ({ ...ANTHROPIC_ERRORS.body(statusCode, code, message), message: `${code}: ${message}`, __type: awsErrorType(statusCode) }),
};

function awsErrorType(statusCode: number): string {
  if (statusCode === 429) return 'ThrottlingException';
  if (statusCode === 403) return 'AccessDeniedException';
  if (statusCode === 404) return 'ResourceNotFoundException';
  if (statusCode === 503) return 'ServiceUnavailableException';
  if (statusCode < 500) return 'ValidationException';
  return 'InternalServerException';
}

/** {"error": {"code", "message", "status"}}: Google's API error, which google-genai raises as APIError. */
export const GOOGLE_ERRORS: ErrorShape = {
  format: 'google',
  body: (statusCode, code, message) => ({ error: { code: statusCode, message: `${code}: ${message}`, status: googleStatus(statusCode) } }),
};

function googleStatus(statusCode: number): string {
  if (statusCode === 401) return 'UNAUTHENTICATED';
  if (statusCode === 403) return 'PERMISSION_DENIED';
  if (statusCode === 404) return 'NOT_FOUND';
  if (statusCode === 429) return 'RESOURCE_EXHAUSTED';
  if (statusCode === 503) return 'UNAVAILABLE';
  if (statusCode < 500) return 'INVALID_ARGUMENT';
  return 'INTERNAL';
}
