// Where a ProxyConfig's providers are, as host and port: every base URL its configured routes and their
// endpoints name (routes[]), the built-in routes it sets up (an upstreams.<route> entry, or the credential the
// route uses under credentials), and provenance.bypass.extraHosts. A built-in route it does not set up is left
// out: providers' addresses are shared front-ends (a CDN's anycast, a cloud's ranges), and a policy that stops
// them stops unrelated sites too (ADR 1602). A connection from the pod to one of these that does not come from
// the sidecar goes around the meter. Pure.

import { BUILT_IN_CREDENTIALS } from '../../../contracts/credential-kinds.ts';
import { ROUTE_NAMES, ROUTES } from '../../../contracts/routes.ts';
import type { CredentialsSpec, ProxyConfigSpec } from '../../../crds/index.ts';

export interface ProviderEndpoint {
  host: string;
  port: number;
}

export interface ProviderEndpoints {
  endpoints: ProviderEndpoint[];
  /** Base URLs whose host depends on a setting the ProxyConfig leaves to the sidecar (a Vertex location, an AWS region). */
  unknown: string[];
}

interface UpstreamLike {
  baseUrl?: string | undefined;
  location?: string | undefined;
  region?: string | undefined;
  endpoints?: readonly UpstreamLike[] | undefined;
}

function parse(url: string): ProviderEndpoint | undefined {
  try {
    const u = new URL(url);
    const port = u.port ? Number(u.port) : u.protocol === 'http:' ? 80 : 443;
    // URL keeps the brackets of an IPv6 literal.
    return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port };
  } catch {
    return undefined;
  }
}

/** One route's base URLs: its own (or the table's default, filled from its settings) and each endpoint's. */
function routeUrls(upstream: UpstreamLike | undefined, defaultBaseUrl: string | undefined): string[] {
  const fill = (u: UpstreamLike | undefined): string | undefined => {
    if (u?.baseUrl) return u.baseUrl;
    if (u?.location === 'global' && defaultBaseUrl?.includes('{location}')) return 'https://aiplatform.googleapis.com';
    let url = defaultBaseUrl;
    if (u?.location) url = url?.replace('{location}', u.location);
    if (u?.region) url = url?.replace('{region}', u.region);
    return url;
  };
  const own = fill(upstream);
  // An endpoint's settings over the route's (ADR 0008): its own base URL, else the route's, else the default filled in.
  const endpoints = (upstream?.endpoints ?? []).map((e) => fill({ baseUrl: upstream?.baseUrl, location: upstream?.location, region: upstream?.region, ...e }));
  return [own, ...endpoints].filter((u): u is string => u !== undefined);
}

export function providerEndpoints(spec: ProxyConfigSpec | undefined): ProviderEndpoints {
  const upstreams = (spec?.upstreams ?? {}) as Readonly<Record<string, UpstreamLike | undefined>>;
  const setUp = ROUTE_NAMES.filter((route) => {
    const key = (BUILT_IN_CREDENTIALS[ROUTES[route].credential] as { crdField?: keyof CredentialsSpec }).crdField;
    return upstreams[route] !== undefined || (key !== undefined && spec?.credentials?.[key] !== undefined);
  });
  const urls = [
    ...setUp.flatMap((route) => routeUrls(upstreams[route], ROUTES[route].defaultBaseUrl)),
    ...(spec?.routes ?? []).flatMap((r) => routeUrls(r as UpstreamLike, undefined)),
  ];
  const seen = new Set<string>();
  const endpoints: ProviderEndpoint[] = [];
  const unknown: string[] = [];
  const add = (e: ProviderEndpoint) => {
    const key = `${e.host}:${e.port}`;
    if (seen.has(key)) return;
    seen.add(key);
    endpoints.push(e);
  };
  for (const url of urls) {
    if (url.includes('{')) {
      if (!unknown.includes(url)) unknown.push(url);
      continue;
    }
    const e = parse(url);
    if (e) add(e);
  }
  for (const hostPort of spec?.provenance?.bypass?.extraHosts ?? []) {
    const at = hostPort.lastIndexOf(':');
    add({ host: hostPort.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port: Number(hostPort.slice(at + 1)) });
  }
  return { endpoints, unknown };
}
