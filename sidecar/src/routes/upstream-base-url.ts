// Where a route's upstream is: the configured base URL, else the provider's public endpoint from the route
// table, with its `{location}` (Vertex AI) or `{region}` (AWS) filled in.

import type { RouteName } from '../../../contracts/routes.ts';
import type { RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import type { RouteModule } from './route-module.ts';
import { ROUTE_MODULES } from './route-modules.ts';
import { DEFAULT_VERTEX_LOCATION } from './vertex-ai.ts';

/** A route's upstream settings: a configured route's own, or upstreams.<route> for a built-in one. */
export function upstreamOf(route: RouteModule, config: RuntimeConfig): UpstreamConfig | undefined {
  return route.upstream ?? config.upstreams[route.name as RouteName];
}

/**
 * The base URL a route's calls go to under this config: upstreams.<route>.baseUrl (a configured route's
 * baseUrl), else the route module's setting, else the table's default. `upstream` is an endpoint's settings
 * over the route's, for one of its endpoints (ADR 0008).
 */
export function routeBaseUrl(
  route: RouteName | RouteModule,
  config: RuntimeConfig,
  env: NodeJS.ProcessEnv = process.env,
  upstream: UpstreamConfig | undefined = upstreamOf(typeof route === 'string' ? ROUTE_MODULES[route] : route, config),
): string {
  const module = typeof route === 'string' ? ROUTE_MODULES[route] : route;
  if (upstream?.baseUrl) return upstream.baseUrl;
  return module.baseUrlFromConfig?.(config) ?? upstreamBaseUrl(module.spec.defaultBaseUrl, upstream, env);
}

/** A default base URL with its `{location}` and `{region}` filled in from the upstream settings. */
function upstreamBaseUrl(defaultBaseUrl: string, upstream: UpstreamConfig | undefined, env: NodeJS.ProcessEnv): string {
  const location = upstream?.location ?? DEFAULT_VERTEX_LOCATION;
  if (defaultBaseUrl.includes('{location}') && location === 'global') return 'https://aiplatform.googleapis.com';
  const region = upstream?.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1';
  return defaultBaseUrl.replace('{location}', location).replace('{region}', region);
}
