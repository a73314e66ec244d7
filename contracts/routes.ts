// The route table: every /proxy/<route>/* prefix with the facts other components need about it as data —
// its provider and the service that runs its models, credential kind, response wire format, default upstream,
// which SDK base-URL variable the webhook points at it, and whether the OpenAI-compatible /v1 gateway may send a
// provider's models there.
// The behaviour of each route (request planning, model ids, translation, error shape) lives in its own
// module, sidecar/src/routes/<route>/; nothing outside the two branches on a route name.

export const ROUTE_NAMES = ['alpha', 'alpha-compat', 'beta', 'gamma', 'gamma-cloud', 'gamma-direct', 'gamma-cloudb', 'local'] as const;
export type RouteName = (typeof ROUTE_NAMES)[number];

/** Provider names as they appear in spans, logs and pricing entries. */
export const PROVIDERS = ['google', 'openai', 'anthropic', 'local'] as const;
export type Provider = (typeof PROVIDERS)[number];

import type { BuiltInCredentialId } from './credential-kinds.ts';

/** Response wire format: decides which usage extractor reads the response. */
export type WireFormat = 'gemini' | 'openai' | 'anthropic' | 'bedrock';

/** What a built-in provider's calls cost and how /v1 finds its models (ADR 1700). */
export interface ProviderFacts {
  /** The wire format whose cost formula prices its calls, or `free`: nothing bills them (the local runtime). */
  readonly pricing: WireFormat | 'free';
  /** When several providers price one model id, /v1 takes the lowest rank's entry; configured routes' providers come after. */
  readonly v1Rank: number;
  /** `gen_ai.provider.name` of its /v1 spans: `tollgate` where the gateway answers through its translation. */
  readonly genAiOnV1: string;
}

/** One line per provider: tsc refuses a provider of PROVIDERS without its facts. */
export const PROVIDER_FACTS = {
  google: { pricing: 'gemini', v1Rank: 2, genAiOnV1: 'tollgate' },
  openai: { pricing: 'openai', v1Rank: 0, genAiOnV1: 'tollgate' },
  anthropic: { pricing: 'anthropic', v1Rank: 1, genAiOnV1: 'tollgate' },
  // A local model is free, and its runtime answers /v1 in OpenAI's format itself.
  local: { pricing: 'free', v1Rank: 3, genAiOnV1: 'local' },
} as const satisfies Record<Provider, ProviderFacts>;

export function isBuiltInProvider(value: string): value is Provider {
  return Object.hasOwn(PROVIDER_FACTS, value);
}

/** Which upstream settings a format's routes take besides the base URL: Vertex AI's project and location, AWS's region. */
export type UpstreamShape = 'vertex' | 'aws' | 'direct';

export interface FormatSpec {
  /** The usage extractor that reads its responses. */
  wire: WireFormat;
  upstream: UpstreamShape;
  description: string;
  /** Its module has no /v1 surface: routes of it serve /proxy only, never /v1 or a model alias's targets. */
  proxyOnly?: true;
}

/**
 * The API formats the engine speaks, each one module in sidecar/src/routes/<format>/: what a caller sends on
 * /proxy/<route>/*, how /v1 calls are translated for it, and which usage extractor reads its answers. A route,
 * built-in or configured, names one.
 */
export const ROUTE_FORMATS = {
  'gemini-vertex': { wire: 'gemini', upstream: 'vertex', description: "Gemini's native generateContent API on Vertex AI" },
  'gemini-vertex-openai': { wire: 'openai', upstream: 'vertex', description: "Vertex AI's OpenAI-compatible chat completions surface" },
  openai: { wire: 'openai', upstream: 'direct', description: 'the OpenAI API: chat completions, the Responses API, embeddings' },
  'openai-chat': {
    wire: 'openai',
    upstream: 'direct',
    description: 'an OpenAI-compatible chat completions API (/v1/chat/completions; /v1/embeddings and /v1/completions passed through)',
  },
  anthropic: { wire: 'anthropic', upstream: 'direct', description: 'the Anthropic Messages API (/v1/messages)' },
  'anthropic-vertex': { wire: 'anthropic', upstream: 'vertex', description: 'the Anthropic Messages API, sent to Claude on Vertex AI as rawPredict' },
  'anthropic-vertex-raw': { wire: 'anthropic', upstream: 'vertex', description: "Claude on Vertex AI's own rawPredict / streamRawPredict paths", proxyOnly: true },
  bedrock: { wire: 'bedrock', upstream: 'aws', description: 'AWS Bedrock InvokeModel (and its event stream), SigV4-signed' },
  ollama: { wire: 'openai', upstream: 'direct', description: "Ollama's HTTP API and its OpenAI-compatible /v1" },
} as const satisfies Record<string, FormatSpec>;

export type RouteFormat = keyof typeof ROUTE_FORMATS;
export const ROUTE_FORMAT_NAMES = Object.keys(ROUTE_FORMATS) as RouteFormat[];

/** The base-URL variable an official SDK reads, pointed at this route by the webhook (tollgate.dev/inject-env). */
export interface SdkBaseUrl {
  variable: string;
  /** Path after /proxy/<route>, matching the SDK's default base URL path. */
  suffix: string;
  sdk: string;
  /** Position among the injected variables: fixed, so a new route does not reorder the env of pods injected before. */
  rank: number;
}

/** How the /v1 gateway may use a route for its provider's models. */
export interface V1Choice {
  /** The route /v1 uses for the provider unless the gateway config picks another. */
  default: boolean;
  /** Named in the gateway settings' documentation: `gamma (Vertex AI)`. */
  label: string;
}

/**
 * One route's facts as data. The built-in routes are the entries of the table below; a route added in the
 * config (`routes`) becomes an entry of the same shape when the config is loaded (sidecar/src/routes/route-catalog.ts).
 */
export interface RouteSpec {
  /** Provider name in spans, logs and price entries: one of PROVIDERS for a built-in route, any name for a configured one. */
  readonly provider: string;
  /** The service that runs the model, as OpenTelemetry's GenAI conventions spell it (`gen_ai.provider.name`). */
  readonly genAiProvider: string;
  /** The built-in credential it uses (contracts/credential-kinds.ts); a configured route carries its own. */
  readonly credential: BuiltInCredentialId;
  readonly format: RouteFormat;
  /** Default upstream base URL; `{location}`/`{region}` are filled from the upstream config. */
  readonly defaultBaseUrl: string;
  readonly description: string;
  readonly sdkBaseUrl?: SdkBaseUrl;
  /** Absent: /v1 never routes here. */
  readonly v1?: V1Choice;
  /** Headers sent upstream when the caller sent none. */
  readonly headers?: Readonly<Record<string, string>>;
}

const TABLE = {
  alpha: {
    provider: 'google',
    genAiProvider: 'gcp.vertex_ai',
    credential: 'google-adc',
    format: 'gemini-vertex',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Gemini on Vertex AI, native generateContent API',
    sdkBaseUrl: { variable: 'GOOGLE_VERTEX_BASE_URL', suffix: '', sdk: 'Google Gen AI (Gemini on Vertex AI)', rank: 5 },
    v1: { default: true, label: 'native generateContent, translated' },
  },
  'alpha-compat': {
    provider: 'google',
    genAiProvider: 'gcp.vertex_ai',
    credential: 'google-adc',
    format: 'gemini-vertex-openai',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Vertex AI OpenAI-compatible chat completions surface',
    v1: { default: false, label: 'Vertex AI chat completions' },
  },
  beta: {
    provider: 'openai',
    genAiProvider: 'openai',
    credential: 'openai-api-key',
    format: 'openai',
    defaultBaseUrl: 'https://api.openai.com',
    description: 'OpenAI API',
    sdkBaseUrl: { variable: 'OPENAI_BASE_URL', suffix: '/v1', sdk: 'OpenAI', rank: 1 },
    v1: { default: true, label: 'OpenAI API' },
  },
  gamma: {
    provider: 'anthropic',
    genAiProvider: 'gcp.vertex_ai',
    credential: 'google-adc',
    format: 'anthropic-vertex',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Claude on Vertex AI, reached with the Anthropic Messages API (translated to rawPredict)',
    v1: { default: false, label: 'Vertex AI' },
  },
  'gamma-cloud': {
    provider: 'anthropic',
    genAiProvider: 'gcp.vertex_ai',
    credential: 'google-adc',
    format: 'anthropic-vertex-raw',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Claude on Vertex AI, native rawPredict / streamRawPredict paths',
    sdkBaseUrl: { variable: 'ANTHROPIC_VERTEX_BASE_URL', suffix: '/v1', sdk: 'Anthropic on Vertex AI', rank: 3 },
  },
  'gamma-direct': {
    provider: 'anthropic',
    genAiProvider: 'anthropic',
    credential: 'anthropic-api-key',
    format: 'anthropic',
    defaultBaseUrl: 'https://api.anthropic.com',
    description: 'Anthropic API',
    sdkBaseUrl: { variable: 'ANTHROPIC_BASE_URL', suffix: '', sdk: 'Anthropic', rank: 2 },
    v1: { default: true, label: 'Anthropic API' },
  },
  'gamma-cloudb': {
    provider: 'anthropic',
    genAiProvider: 'aws.bedrock',
    credential: 'aws-sigv4',
    format: 'bedrock',
    defaultBaseUrl: 'https://bedrock-runtime.{region}.amazonaws.com',
    description: 'Claude on AWS Bedrock (InvokeModel), SigV4-signed',
    sdkBaseUrl: { variable: 'ANTHROPIC_BEDROCK_BASE_URL', suffix: '', sdk: 'Anthropic on Bedrock', rank: 4 },
    v1: { default: false, label: 'Bedrock' },
  },
  local: {
    provider: 'local',
    genAiProvider: 'local',
    credential: 'none',
    format: 'ollama',
    // local.runtime.baseUrl, when set, is the route's upstream (routes/local)
    defaultBaseUrl: 'http://127.0.0.1:11434',
    description: "A local model runtime (Ollama's HTTP API and its OpenAI-compatible /v1)",
    v1: { default: true, label: 'the local runtime' },
  },
} as const satisfies Record<RouteName, RouteSpec>;

export const ROUTES: Readonly<Record<RouteName, RouteSpec>> = TABLE;

export function isRouteName(value: string): value is RouteName {
  return Object.hasOwn(ROUTES, value);
}

/** A configured route's name: a DNS label, so it fits a URL path segment, a metric label and a snapshot credential name. */
export const CONFIGURED_ROUTE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Names a configured route may not take: the built-in routes, and `v1`, which spans use for the /v1 gateway. */
export function reservedRouteName(name: string): boolean {
  return isRouteName(name) || name === 'v1';
}

/** The routes /v1 may use for provider P's models, as a type: `V1Route<'anthropic'>` is `'gamma-direct' | 'gamma' | 'gamma-cloudb'`. */
export type V1Route<P extends Provider = Provider> = {
  [R in RouteName]: (typeof TABLE)[R] extends { provider: P; v1: V1Choice } ? R : never;
}[RouteName];

/** The routes /v1 may use for a provider's models, its default first. */
export function v1Routes<P extends Provider>(provider: P): V1Route<P>[] {
  const candidates = ROUTE_NAMES.filter((route) => ROUTES[route].provider === provider && ROUTES[route].v1 !== undefined);
  return [...candidates.filter((route) => ROUTES[route].v1?.default), ...candidates.filter((route) => !ROUTES[route].v1?.default)] as V1Route<P>[];
}

/** The route /v1 uses for a provider when the gateway config names none. */
export function defaultV1Route<P extends Provider>(provider: P): V1Route<P> | undefined {
  return v1Routes(provider)[0];
}

/** `gamma-direct (Anthropic API), gamma (Vertex AI) or gamma-cloudb (Bedrock)`: the choices for a provider, in prose. */
export function describeV1Routes(provider: Provider): string {
  const items = v1Routes(provider).map((route) => `${route} (${ROUTES[route].v1?.label})`);
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}

/** `alpha, alpha-compat, … or gamma-cloudb`: every route, for messages that list them. */
export function listRouteNames(): string {
  return `${ROUTE_NAMES.slice(0, -1).join(', ')} or ${ROUTE_NAMES.at(-1)}`;
}
