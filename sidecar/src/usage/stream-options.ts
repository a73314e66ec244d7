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

const ASK_FOR_USAGE = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The request's bytes asking for the usage chunk (`body` is those bytes parsed). A body without
 * stream_options, the usual one, gets the member spliced in after its opening brace: the caller's bytes pass
 * on as they came, and a long conversation is not serialised again on every streamed call. A body with other
 * stream_options is rebuilt with them kept.
 */
export function bytesAskingForUsage(bytes: Buffer, body: Record<string, unknown>): Buffer {
  if (!('stream_options' in body)) {
    // `body` parsed as an object, so only JSON whitespace comes before its brace, and stream: true follows it.
    const open = bytes.indexOf(0x7b);
    if (open !== -1) return Buffer.concat([bytes.subarray(0, open + 1), ASK_FOR_USAGE, bytes.subarray(open + 1)], bytes.length + ASK_FOR_USAGE.length);
  }
  return Buffer.from(JSON.stringify(injectStreamUsage(body)));
}
