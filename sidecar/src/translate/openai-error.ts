// Errors in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, which every OpenAI SDK turns into
// its typed exceptions (BadRequestError, NotFoundError, RateLimitError, …). The gateway answers every failure
// this way: its own refusals, the engine's ProxyErrors, and the upstreams' errors in their own shapes.

import type { ProxyError } from '../errors.ts';
import { isRecord } from '../../../contracts/json-record.ts';

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** A refusal by the gateway itself (a parameter a provider cannot honour, an unknown model, bad JSON). */
export class GatewayError extends Error {
  readonly statusCode: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;

  constructor(statusCode: number, message: string, opts: { type?: string; param?: string | null; code?: string | null } = {}) {
    super(message);
    this.name = 'GatewayError';
    this.statusCode = statusCode;
    this.type = opts.type ?? errorType(statusCode);
    this.param = opts.param ?? null;
    this.code = opts.code ?? null;
  }

  toJSON(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A request parameter the target cannot honour: 400, naming the parameter. */
export function unsupportedParameter(param: string, message: string): GatewayError {
  return new GatewayError(400, message, { param, code: 'unsupported_parameter' });
}

export function invalidParameter(param: string, message: string): GatewayError {
  return new GatewayError(400, message, { param, code: 'invalid_value' });
}

/** The `type` OpenAI uses for a status. */
export function errorType(statusCode: number): string {
  if (statusCode === 401) return 'authentication_error';
  if (statusCode === 403) return 'permission_error';
  if (statusCode === 404) return 'not_found_error';
  if (statusCode === 429) return 'rate_limit_error';
  if (statusCode < 500) return 'invalid_request_error';
  return 'server_error';
}

/** The engine's own errors keep their status (502 for every upstream failure, 413, 503 …) and stable code. */
export function proxyErrorBody(error: ProxyError): OpenAiErrorBody {
  return { error: { message: error.message, type: errorType(error.statusCode), param: null, code: error.code } };
}

/**
 * An upstream's error response in OpenAI's shape. The status is kept (the same the native routes pass on, so
 * SDK retry rules see a 429 or a 5xx as such); the message keeps the provider's words and says which route
 * answered. Reads Google's {"error":{"code","message","status"}}, Anthropic's {"type":"error","error":{"type",
 * "message"}}, Bedrock's {"message"} with x-amzn-errortype, and OpenAI's own shape (kept as it is).
 */
export function upstreamErrorBody(route: string, statusCode: number, headers: Record<string, string | string[] | undefined>, body: Buffer): OpenAiErrorBody {
  let document: unknown;
  try {
    document = JSON.parse(body.toString('utf8'));
  } catch {
    document = undefined;
  }
  const type = errorType(statusCode);
  const described = (message: string, code: string | null, param: string | null = null): OpenAiErrorBody => ({
    error: { message: `upstream ${route} answered ${statusCode}: ${message}`, type, param, code },
  });
  if (isRecord(document) && isRecord(document.error)) {
    const inner = document.error;
    const message = typeof inner.message === 'string' ? inner.message : JSON.stringify(inner);
    if (typeof inner.status === 'string') return described(message, inner.status.toLowerCase()); // Google
    if (typeof inner.type === 'string' && document.type === 'error') return described(message, inner.type); // Anthropic
    // OpenAI's own shape (the OpenAI-compatible surfaces): keep type, param and code.
    return {
      error: {
        message: `upstream ${route} answered ${statusCode}: ${message}`,
        type: typeof inner.type === 'string' ? inner.type : type,
        param: typeof inner.param === 'string' ? inner.param : null,
        code: typeof inner.code === 'string' ? inner.code : null,
      },
    };
  }
  if (isRecord(document) && (typeof document.message === 'string' || typeof document.Message === 'string')) {
    const amznType = headers['x-amzn-errortype'];
    const rawType = Array.isArray(amznType) ? amznType[0] : amznType;
    const code = rawType ? rawType.split(':')[0]! : null;
    return described(String(document.message ?? document.Message), code); // Bedrock
  }
  const text = body.toString('utf8').trim();
  return described(text.length > 0 ? (text.length > 500 ? `${text.slice(0, 500)}…` : text) : 'no error body', null);
}

/** The error object of an in-stream failure: sent as one SSE event, which OpenAI SDKs raise as an APIError. */
export function streamErrorBody(route: string, message: string, code: string | null): OpenAiErrorBody {
  return { error: { message: `upstream ${route} stream failed: ${message}`, type: 'server_error', param: null, code } };
}
