// Facts about Vertex AI that every Vertex route shares (alpha, alpha-compat, gamma, gamma-cloud): where a
// project and location are named, how a model id travels in a path, which Messages API version Claude on
// Vertex takes. One copy, read by the native and the /v1 planning alike.

import type { UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { ProxyError } from '../errors.ts';

export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

/** The location when none is configured; the same default names the host (upstreamBaseUrl), so host and path agree. */
export const DEFAULT_VERTEX_LOCATION = 'us-central1';

/** The variable every Google SDK reads for the project. */
const GOOGLE_PROJECT_VARIABLES = ['GOOGLE_CLOUD_PROJECT'] as const;

/** `/v1/projects/<project>/locations/<location>`: the prefix of every Vertex AI model path. */
export function vertexLocationPath(
  route: string,
  upstream: UpstreamConfig | undefined,
  env: NodeJS.ProcessEnv,
  projectVariables: readonly string[] = GOOGLE_PROJECT_VARIABLES,
): string {
  const project = upstream?.project ?? projectVariables.map((name) => env[name]).find((value) => value);
  if (!project) {
    throw new ProxyError('upstream_misconfigured', `route ${route} needs a Google Cloud project: set upstreams.${route}.project or GOOGLE_CLOUD_PROJECT`);
  }
  const location = upstream?.location ?? DEFAULT_VERTEX_LOCATION;
  return `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}`;
}

const LOCATION_PATH = /^(\/v1(?:beta1)?\/projects\/)([^/?#]+)(\/locations\/)([^/?#]+)/;

/**
 * A path under `/v1/projects/<project>/locations/<location>` moved to another project or location: an endpoint
 * of a Vertex AI route that names its own (ADR 0008), whatever the plan or the caller's SDK put there. Other paths
 * are returned as they are.
 */
export function vertexPathAt(path: string, project: string | undefined, location: string | undefined): string {
  const match = LOCATION_PATH.exec(path);
  if (match === null) return path;
  const [whole, head, ownProject, middle, ownLocation] = match as unknown as [string, string, string, string, string];
  const at = `${head}${project === undefined ? ownProject : encodeURIComponent(project)}${middle}${location === undefined ? ownLocation : encodeURIComponent(location)}`;
  return at + path.slice(whole.length);
}

/** A Vertex model id as a path segment: '@' (claude-sonnet-4@20250514) is a legal path character and stays as is, as the SDKs send it. */
export function vertexModelSegment(model: string): string {
  return encodeURIComponent(model).replaceAll('%40', '@');
}

const VERTEX_MODEL = /\/models\/([^/:?]+):([A-Za-z-]+)/;

/** The model a native Vertex path names (`…/models/<id>:generateContent`), else `unknown`. */
export function vertexPathModel(rest: string): string {
  const match = VERTEX_MODEL.exec(rest);
  return match ? decodeURIComponent(match[1]!) : 'unknown';
}

/** Gemini ids on Vertex have no publisher prefix; callers may send `google/<id>` as the OpenAI-compatible surface names it. */
export function geminiModelId(requested: string): string {
  const slash = requested.lastIndexOf('/');
  return slash === -1 ? requested : requested.slice(slash + 1);
}
