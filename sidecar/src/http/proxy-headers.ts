// Which caller headers reach the upstream and which upstream headers reach the caller. The proxy owns the
// credential and the hop-by-hop framing, so those never pass in either direction.

import type { IncomingHttpHeaders } from 'node:http';

// Hop-by-hop (RFC 9110 §7.6.1): they describe one connection, so they never cross the proxy either way.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'];

const NOT_FORWARDED_UPSTREAM = new Set([
  ...HOP_BY_HOP,
  // framing the proxy recomputes for its own request
  'host',
  'content-length',
  // answered by this hop: node's server already sent 100 Continue, and undici refuses to send Expect
  'expect',
  // every credential a caller may send: the proxy attaches the upstream's own
  'authorization',
  'proxy-authorization',
  'x-proxy-auth',
  'x-api-key',
  'x-goog-api-key',
  'api-key', // Azure OpenAI's key header
  'cookie',
  // what an identity-aware proxy in front says about the caller: for this server, not for the provider
  'x-goog-iap-jwt-assertion',
  'x-goog-authenticated-user-email',
  'x-goog-authenticated-user-id',
  // pick what the proxy's credential bills: the Google Cloud project of a Vertex call, the OpenAI organisation
  // and project of an OpenAI key. The proxy's credential decides that, not the caller.
  'x-goog-user-project',
  'openai-organization',
  'openai-project',
  // where a browser request came from: about the caller's page, not for the provider (and a cross-site call
  // never gets this far, see inbound/request-guard.ts)
  'origin',
  'referer',
  // replaced with the proxy's span
  'traceparent',
  'tracestate',
  // usage extraction reads the bytes, so ask for them uncompressed
  'accept-encoding',
]);

const NOT_FORWARDED_DOWNSTREAM = new Set([...HOP_BY_HOP, 'set-cookie']);

/**
 * Header names a message's Connection header lists: hop-by-hop for that message only (RFC 9110 §7.6.1).
 * Null in the common case (no Connection, or only keep-alive / close), so most calls allocate nothing.
 */
function connectionListed(connection: string | string[] | undefined): Set<string> | null {
  if (connection === undefined) return null;
  let listed: Set<string> | null = null;
  for (const token of (Array.isArray(connection) ? connection.join(',') : connection).split(',')) {
    const name = token.trim().toLowerCase();
    if (name === '' || name === 'keep-alive' || name === 'close') continue;
    (listed ??= new Set()).add(name);
  }
  return listed;
}

/** Headers for the upstream request. `keepContentLength` when the caller's body is passed through unchanged. */
export function upstreamRequestHeaders(incoming: IncomingHttpHeaders, keepContentLength: boolean): Record<string, string> {
  const hop = connectionListed(incoming.connection);
  const out: Record<string, string> = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined) continue;
    // HTTP/2's pseudo-headers (:method, :path, :authority, :scheme) describe this hop's request, not a header
    if (NOT_FORWARDED_UPSTREAM.has(name) || name.startsWith(':') || name.startsWith('x-tollgate-') || name.startsWith('sec-fetch-') || hop?.has(name)) {
      if (!(keepContentLength && name === 'content-length')) continue;
    }
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  out['accept-encoding'] = 'identity';
  return out;
}

/** Headers for the caller's response; `dropContentLength` when the proxy changes the body's length. */
export function downstreamResponseHeaders(upstream: Record<string, string | string[] | undefined>, dropContentLength: boolean): Record<string, string | string[]> {
  const hop = connectionListed(upstream.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in upstream) {
    const value = upstream[name];
    // The upstream's CORS answer is about its own origin; the proxy's origin answers for itself (request-guard.ts).
    if (value === undefined || NOT_FORWARDED_DOWNSTREAM.has(name) || name.startsWith('access-control-') || hop?.has(name)) continue;
    if (dropContentLength && name === 'content-length') continue;
    out[name] = value;
  }
  return out;
}
