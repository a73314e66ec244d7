// OpenAI-format streams report usage only when the request sets stream_options.include_usage. To cost a
// streamed call whose caller did not ask for it, the proxy sets it and later removes the extra usage chunk.

import { isRecord } from '../../../contracts/json-record.ts';

/** True for an OpenAI-format body with `stream: true` that does not already ask for usage. */
export function requestNeedsInjectedUsage(body: unknown): boolean {
  if (!isRecord(body) || body.stream !== true) return false;
  const options = body.stream_options;
  return !(isRecord(options) && options.include_usage === true);
}

/** A copy of the body asking for the usage chunk; other stream_options the caller set are kept. */
export function injectStreamUsage(body: Record<string, unknown>): Record<string, unknown> {
  const options = isRecord(body.stream_options) ? body.stream_options : {};
  return { ...body, stream_options: { ...options, include_usage: true } };
}
