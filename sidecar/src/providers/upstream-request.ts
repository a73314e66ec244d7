// How a call on each route becomes an upstream request: the upstream path, the model it is for, and — for
// the routes where the body must be read — the body to send. Pure functions, tested without I/O.

import { ProxyError } from '../errors.ts';
import type { UpstreamConfig } from '../config/runtime-config.ts';
import { requestNeedsInjectedUsage, injectStreamUsage } from '../usage/extractor.ts';
import { ROUTES, type RouteName } from './routes.ts';

/** Routes whose request body the proxy must read: the model or stream flag is in it, or it is rewritten or signed. */
export function routeReadsBody(route: RouteName): boolean {
  return route !== 'alpha' && route !== 'gamma-cloud';
}

/** Routes that parse the body as JSON (gamma-cloudb reads it only to sign it); it must be sent as JSON. */
export function routeParsesJsonBody(route: RouteName): boolean {
  return route === 'beta' || route === 'alpha-compat' || route === 'gamma-direct' || route === 'gamma';
}

export interface UpstreamRequestPlan {
  /** Path and query to send upstream (the base URL's own path prefix is added by the client). */
  path: string;
  /** Body to send; null means pass the caller's body stream through unread. */
  body: Buffer | null;
  model: string;
  operation: string;
  /** The proxy added stream_options.include_usage; the extra usage chunk must not reach the caller. */
  stripInjectedUsage: boolean;
  /** User id found in the body (OpenAI `user`, Anthropic `metadata.user_id`), when the caller set no header. */
  bodyUserId: string | null;
}

const VERTEX_MODEL = /\/models\/([^/:?]+):([A-Za-z-]+)/;
const BEDROCK_MODEL = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream|converse|converse-stream)$/;
export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

function parseJsonBody(body: Buffer, route: RouteName): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new ProxyError('invalid_request', `request body on route ${route} is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ProxyError('invalid_request', `request body on route ${route} must be a JSON object`);
  }
  return parsed as Record<string, unknown>;
}

function bodyModel(json: Record<string, unknown>, route: RouteName, required: boolean): string {
  const model = json.model;
  if (typeof model === 'string' && model.length > 0) return model;
  if (required) throw new ProxyError('invalid_request', `request body on route ${route} must have a string "model"`);
  return 'unknown';
}

function bodyUser(json: Record<string, unknown>): string | null {
  if (typeof json.user === 'string' && json.user) return json.user;
  const metadata = json.metadata;
  if (typeof metadata === 'object' && metadata !== null) {
    const id = (metadata as Record<string, unknown>).user_id;
    if (typeof id === 'string' && id) return id;
  }
  return null;
}

/**
 * Refuses a path with a `.` or `..` segment, raw or percent-encoded, or hidden behind an encoded slash or a
 * backslash: URL parsers, SigV4's re-encoding and many servers normalise those away, and the result would
 * leave the base path the route's upstream is configured with (a tenant or gateway prefix).
 */
export function checkPathSegments(rest: string): void {
  if (DOT_SEGMENT.test(rest) || (rest.includes('%') && hasEncodedDotSegment(rest))) {
    throw new ProxyError('invalid_request', `path ${JSON.stringify(rest)} has a . or .. segment (perhaps percent-encoded); send the path without them`);
  }
}

/**
 * Refuses a raw `#` in the request target. A client never sends a fragment, so one there was written by hand;
 * and the URL the upstream request is built from would cut it off, leaving what precedes it as the last
 * segment: `/..#` becomes `/..` and climbs above the base path like any other dot segment.
 */
export function checkNoFragment(rest: string, query: string): void {
  if (rest.includes('#') || query.includes('#')) {
    throw new ProxyError('invalid_request', `request target ${JSON.stringify(rest + query)} has a raw "#"; send it percent-encoded (%23)`);
  }
}

const DOT_SEGMENT = /(?:^|[/\\])\.{1,2}(?:[/\\]|$)/;

function hasEncodedDotSegment(rest: string): boolean {
  for (const segment of rest.split('/')) {
    if (!segment.includes('%')) continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      continue; // not a dot segment in any encoding; the upstream judges the rest
    }
    if (DOT_SEGMENT.test(decoded)) return true;
  }
  return false;
}

/**
 * Plans the upstream request for a call. `rest` is the path after `/proxy/<route>` (starting with `/`),
 * `query` the raw query string including its `?` (or empty). `body` is given only for routes that read it.
 */
export function planUpstreamRequest(
  route: RouteName,
  method: string,
  rest: string,
  query: string,
  body: Buffer | null,
  upstream: UpstreamConfig | undefined,
): UpstreamRequestPlan {
  checkPathSegments(rest);
  checkNoFragment(rest, query);
  switch (route) {
    case 'alpha':
    case 'gamma-cloud': {
      const match = VERTEX_MODEL.exec(rest);
      const operation = route === 'alpha' ? 'generate_content' : 'chat';
      return { path: rest + query, body: null, model: match ? decodeURIComponent(match[1]!) : 'unknown', operation, stripInjectedUsage: false, bodyUserId: null };
    }
    case 'beta':
    case 'alpha-compat': {
      if (!body || body.length === 0) {
        return { path: rest + query, body, model: 'unknown', operation: 'chat', stripInjectedUsage: false, bodyUserId: null };
      }
      const json = parseJsonBody(body, route);
      const chatCompletions = method === 'POST' && rest.endsWith('/chat/completions');
      const model = bodyModel(json, route, chatCompletions);
      // Only chat completions need asking for stream usage; the Responses API always ends its stream with it
      // and refuses stream_options.include_usage (Codex streams through /v1/responses).
      if (chatCompletions && requestNeedsInjectedUsage(json)) {
        const rewritten = Buffer.from(JSON.stringify(injectStreamUsage(json)));
        return { path: rest + query, body: rewritten, model, operation: 'chat', stripInjectedUsage: true, bodyUserId: bodyUser(json) };
      }
      return { path: rest + query, body, model, operation: 'chat', stripInjectedUsage: false, bodyUserId: bodyUser(json) };
    }
    case 'gamma-direct': {
      if (!body || body.length === 0) {
        return { path: rest + query, body, model: 'unknown', operation: 'chat', stripInjectedUsage: false, bodyUserId: null };
      }
      const json = parseJsonBody(body, route);
      return { path: rest + query, body, model: bodyModel(json, route, false), operation: 'chat', stripInjectedUsage: false, bodyUserId: bodyUser(json) };
    }
    case 'gamma':
      return planVertexMessages(method, rest, query, body, upstream);
    case 'gamma-cloudb': {
      const path = canonicalBedrockPath(rest);
      const match = BEDROCK_MODEL.exec(path);
      return { path: path + query, body, model: match ? decodeURIComponent(match[1]!) : 'unknown', operation: 'chat', stripInjectedUsage: false, bodyUserId: null };
    }
  }
}

/** Bedrock model ids contain ':'; send every path segment percent-encoded the way AWS SDKs do. */
export function canonicalBedrockPath(rest: string): string {
  return rest
    .split('/')
    .map((segment) => encodeURIComponent(safeDecode(segment)))
    .join('/');
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ProxyError('invalid_request', `path segment ${JSON.stringify(segment)} is not valid percent-encoding`);
  }
}

/** Route gamma: an Anthropic Messages API call becomes Vertex AI rawPredict / streamRawPredict. */
function planVertexMessages(
  method: string,
  rest: string,
  query: string,
  body: Buffer | null,
  upstream: UpstreamConfig | undefined,
): UpstreamRequestPlan {
  const countTokens = rest === '/v1/messages/count_tokens';
  if (method !== 'POST' || (rest !== '/v1/messages' && !countTokens)) {
    throw new ProxyError('invalid_request', `route gamma serves POST /v1/messages and /v1/messages/count_tokens, not ${method} ${rest}`);
  }
  const project = upstream?.project ?? process.env.GOOGLE_CLOUD_PROJECT ?? process.env.ANTHROPIC_VERTEX_PROJECT_ID;
  if (!project) {
    throw new ProxyError('upstream_misconfigured', 'route gamma needs a Google Cloud project: set upstreams.gamma.project or GOOGLE_CLOUD_PROJECT');
  }
  // the same default as the host in upstreamBaseUrl, so host and path always name one region
  const location = upstream?.location ?? 'us-central1';
  if (!body || body.length === 0) throw new ProxyError('invalid_request', 'route gamma needs a JSON request body');
  const json = parseJsonBody(body, 'gamma');
  const model = bodyModel(json, 'gamma', true);
  const base = `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}/publishers/anthropic/models/`;
  const out: Record<string, unknown> = { ...json };
  if (out.anthropic_version === undefined) out.anthropic_version = VERTEX_ANTHROPIC_VERSION;
  let path: string;
  if (countTokens) {
    // count-tokens takes the model in the body, unlike rawPredict
    path = `${base}count-tokens:rawPredict`;
  } else {
    delete out.model;
    path = `${base}${vertexModelSegment(model)}:${out.stream === true ? 'streamRawPredict' : 'rawPredict'}`;
  }
  return {
    path: path + query,
    body: Buffer.from(JSON.stringify(out)),
    model,
    operation: countTokens ? 'count_tokens' : 'chat',
    stripInjectedUsage: false,
    bodyUserId: bodyUser(json),
  };
}

/** Vertex model ids carry a version after '@', which Google's and Anthropic's SDKs send unencoded. */
function vertexModelSegment(model: string): string {
  return encodeURIComponent(model).replaceAll('%40', '@');
}

/** The upstream base URL for a route: the configured one, else the provider's public endpoint. */
export function upstreamBaseUrl(route: RouteName, upstream: UpstreamConfig | undefined): string {
  if (upstream?.baseUrl) return upstream.baseUrl;
  const spec = ROUTES[route];
  const location = upstream?.location ?? 'us-central1';
  if (spec.defaultBaseUrl.includes('{location}') && location === 'global') return 'https://aiplatform.googleapis.com';
  const region = upstream?.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  return spec.defaultBaseUrl.replace('{location}', location).replace('{region}', region);
}
