// The base-URL variables the official SDKs read, pointed at the sidecar's routes (tollgate.dev/inject-env).
// Each suffix mirrors the SDK's own default base URL, so the SDK appends the same paths it would send upstream:
//   OPENAI_BASE_URL            openai (JS, Python): default https://api.openai.com/v1, appends /chat/completions
//   ANTHROPIC_BASE_URL         @anthropic-ai/sdk, anthropic (Python): default https://api.anthropic.com, appends /v1/messages
//   ANTHROPIC_VERTEX_BASE_URL  AnthropicVertex (JS vertex-sdk, Python anthropic[vertex]): default
//                              https://{region}-aiplatform.googleapis.com/v1, appends /projects/{p}/locations/{r}/
//                              publishers/anthropic/models/{model}:rawPredict, so the suffix keeps the /v1
//   ANTHROPIC_BEDROCK_BASE_URL AnthropicBedrock (JS bedrock-sdk, Python anthropic[bedrock]): default
//                              https://bedrock-runtime.{region}.amazonaws.com, appends /model/{model}/invoke
//   GOOGLE_VERTEX_BASE_URL     google-genai (Python, JS, Go, Java) with vertexai=true: default
//                              https://{location}-aiplatform.googleapis.com/, appends v1beta1/projects/...
// See docs/decisions/0802-sdk-base-url-variables.md.

import type { V1Container, V1EnvVar } from '@kubernetes/client-node';
import { ROUTE_NAMES, ROUTES, type RouteName, type SdkBaseUrl } from '../../contracts/routes.ts';

export interface SdkBaseUrlEntry extends SdkBaseUrl {
  route: RouteName;
}

/** The table's routes that an official SDK can be pointed at, by rank. */
export const SDK_BASE_URLS: readonly SdkBaseUrlEntry[] = ROUTE_NAMES.flatMap((route) => {
  const sdkBaseUrl = ROUTES[route].sdkBaseUrl;
  return sdkBaseUrl ? [{ route, ...sdkBaseUrl }] : [];
}).sort((a, b) => a.rank - b.rank);

export function sdkBaseUrlEnv(port: number): V1EnvVar[] {
  return SDK_BASE_URLS.map((e) => ({ name: e.variable, value: `http://127.0.0.1:${port}/proxy/${e.route}${e.suffix}` }));
}

/**
 * The variables to add to one container: those it does not set itself. A container with envFrom gets none,
 * because an explicit env entry would silently win over a value from its ConfigMap or Secret, which we cannot see.
 */
export function missingSdkEnv(container: V1Container, port: number): V1EnvVar[] | 'has-env-from' {
  if ((container.envFrom ?? []).length > 0) return 'has-env-from';
  const present = new Set((container.env ?? []).map((e) => e.name));
  return sdkBaseUrlEnv(port).filter((e) => !present.has(e.name));
}
