// The one span lookup: a call's span read back from the engine's management API, as a user would
// (GET /_local/api/traces), by the X-Proxy-Span-Id it answered with or the x-request-id it was sent. The
// caller can have read the last byte before the proxy has finished the call and recorded its span, so the
// lookup waits for it.

import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { waitFor } from './wait-for.ts';

/** The most recent spans of the engine at `baseUrl`, newest first (at most 200: the API's limit). */
export async function recentSpans(baseUrl: string, limit = 200): Promise<SpanJson[]> {
  const res = await fetch(`${baseUrl}/_local/api/traces?limit=${limit}`);
  if (res.status !== 200) throw new Error(`GET /_local/api/traces answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { spans: SpanJson[] }).spans;
}

export type SpanKey = { spanId: string | null } | { requestId: string };

/** The span of one call; fails naming the call when it does not appear within `timeoutMs`. */
export function findSpan(baseUrl: string, key: SpanKey, timeoutMs = 5_000): Promise<SpanJson> {
  const [field, value, label] =
    'spanId' in key ? (['span_id', key.spanId, `span ${key.spanId}`] as const) : (['request_id', key.requestId, `the span with request_id ${key.requestId}`] as const);
  if (value === null) throw new Error('the response carried no X-Proxy-Span-Id');
  return waitFor(`${label} in /_local/api/traces`, async () => (await recentSpans(baseUrl)).find((s) => s[field] === value), { timeoutMs, intervalMs: 20 });
}
