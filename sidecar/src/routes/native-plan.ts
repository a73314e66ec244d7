// How a call on /proxy/<route>/* becomes an upstream request: the checks every route's path gets, then the
// route module's own planning (path, model, body). Pure, tested without I/O.

import type { RouteName } from '../../../contracts/routes.ts';
import { ProxyError } from '../errors.ts';
import type { NativeCall, RouteModule, UpstreamRequestPlan } from './route-module.ts';
import { ROUTE_MODULES } from './route-modules.ts';

export type { UpstreamRequestPlan } from './route-module.ts';

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

/** Plans the upstream request for a call on a route (a built-in one by name). `call.body` is given only for routes that read it. */
export function planUpstreamRequest(route: RouteName | RouteModule, call: Omit<NativeCall, 'env'> & { env?: NodeJS.ProcessEnv }): UpstreamRequestPlan {
  checkPathSegments(call.rest);
  checkNoFragment(call.rest, call.query);
  const module = typeof route === 'string' ? ROUTE_MODULES[route] : route;
  return module.planNative({ ...call, env: call.env ?? process.env });
}
