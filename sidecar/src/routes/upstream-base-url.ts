// Where a route's upstream is: the configured base URL, else the provider's public endpoint from the route
// table, with its `{location}` (Vertex AI) or `{region}` (AWS) filled in.

import type { RouteName } from '../../../contracts/routes.ts';
import { ROUTES } from '../../../contracts/routes.ts';
import type { RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { ROUTE_MODULES } from './route-modules.ts';
import { DEFAULT_VERTEX_LOCATION } from './vertex-ai.ts';

/** The base URL a route's calls go to under this config: upstreams.<route>.baseUrl, else the route module's setting, else the table's default. */
export function routeBaseUrl(route: RouteName, config: RuntimeConfig, env: NodeJS.ProcessEnv = process.env): string {
  const upstream = config.upstreams[route];
  if (upstream?.baseUrl) return upstream.baseUrl;
  return ROUTE_MODULES[route].baseUrlFromConfig?.(config) ?? upstreamBaseUrl(route, upstream, env);
}

export function upstreamBaseUrl(route: RouteName, upstream: UpstreamConfig | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (upstream?.baseUrl) return upstream.baseUrl;
  const spec = ROUTES[route];
  const location = upstream?.location ?? DEFAULT_VERTEX_LOCATION;
  if (spec.defaultBaseUrl.includes('{location}') && location === 'global') return 'https://aiplatform.googleapis.com';
  const region = upstream?.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1';
  return spec.defaultBaseUrl.replace('{location}', location).replace('{region}', region);
}
