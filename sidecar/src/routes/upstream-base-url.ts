// Where a route's upstream is: the configured base URL, else the provider's public endpoint from the route
// table, with its `{location}` (Vertex AI) or `{region}` (AWS) filled in.

import type { RouteName } from '../../../contracts/routes.ts';
import { ROUTES } from '../../../contracts/routes.ts';
import type { UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { DEFAULT_VERTEX_LOCATION } from './vertex-ai.ts';

export function upstreamBaseUrl(route: RouteName, upstream: UpstreamConfig | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (upstream?.baseUrl) return upstream.baseUrl;
  const spec = ROUTES[route];
  const location = upstream?.location ?? DEFAULT_VERTEX_LOCATION;
  if (spec.defaultBaseUrl.includes('{location}') && location === 'global') return 'https://aiplatform.googleapis.com';
  const region = upstream?.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1';
  return spec.defaultBaseUrl.replace('{location}', location).replace('{region}', region);
}
