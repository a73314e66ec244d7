// Errors the engine turns into HTTP answers. Each has a stable code that appears in the JSON body, the
// span's error field and the log line, so an operator can grep for it and a client can branch on it.

export type ProxyErrorCode =
  | 'unknown_route'
  | 'invalid_request'
  | 'host_not_allowed'
  | 'origin_not_allowed'
  | 'unsupported_media_type'
  | 'unmetered_endpoint'
  | 'stored_objects_admin_only'
  | 'client_timeout'
  | 'client_aborted'
  | 'headers_too_large'
  | 'body_too_large'
  | 'upstream_misconfigured'
  | 'credential_unavailable'
  | 'circuit_open'
  | 'upstream_unreachable'
  | 'upstream_timeout'
  | 'upstream_stream_error'
  | 'shutting_down';

const STATUS: Record<ProxyErrorCode, number> = {
  unknown_route: 404,
  invalid_request: 400,
  host_not_allowed: 403,
  origin_not_allowed: 403,
  unsupported_media_type: 415,
  // a path the route's format cannot meter (or sign): refused before any upstream call
  unmetered_endpoint: 403,
  // a server's callers share its provider key: another user's stored completions, responses, files, batches
  stored_objects_admin_only: 403,
  client_timeout: 408,
  // never sent (the caller is gone); the status nginx logs for it, kept so the code stays a client error
  client_aborted: 499,
  headers_too_large: 431,
  body_too_large: 413,
  upstream_misconfigured: 502,
  credential_unavailable: 502,
  circuit_open: 502,
  upstream_unreachable: 502,
  upstream_timeout: 502,
  upstream_stream_error: 502,
  shutting_down: 503,
};

export class ProxyError extends Error {
  readonly code: ProxyErrorCode;
  readonly statusCode: number;
  constructor(code: ProxyErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProxyError';
    this.code = code;
    this.statusCode = STATUS[code];
  }

  /** True when the request never reached the caller's provider, i.e. the proxy is at fault or refused it. */
  get isClientError(): boolean {
    return this.statusCode < 500;
  }

  toJSON(): { error: { code: ProxyErrorCode; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}
