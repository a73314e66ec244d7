// The runtime config every Tollgate engine runs on: the sidecar, the central server and the local proxy.
// It has no Kubernetes imports: the operator renders ProxyConfig resources into this shape, the config
// file is parsed into it, and POST /_local/api/config merges into it.

import type { ModelAliasesConfig } from './model-aliases.ts';
import type { CacheSettings, PriceEntry } from './price-entry.ts';
import type { AuditConfig } from './audit-config.ts';
import type { ProvenanceConfig } from './provenance-config.ts';
import type { BudgetsConfig } from './budget-config.ts';
import type { Provider, RouteFormat, RouteName } from './routes.ts';
import type { BreakerSpec, GatewaySpec, OtlpSpec, PerUserMetricsSpec, TracingSpec } from './generated/runtime-config-types.ts';
import type { CredentialDefinition, CredentialFileSetting } from './credential-kinds.ts';
import type { BigQueryStorageConfig, DuckDbStorageConfig, FirestoreStorageConfig, StorageKind } from './storage-config.ts';
import type { EngineMode, ServerAuthConfig } from './server-auth-config.ts';
import type { EndpointStrategy, RouteEndpoint } from './route-endpoints.ts';

export interface UpstreamConfig {
  /** Overrides the route's default base URL (regional or private endpoints; tests point it at fakes). */
  baseUrl?: string;
  /** Google Cloud project (Vertex AI routes). */
  project?: string;
  /** Vertex AI location, e.g. `us-central1` or `global`. */
  location?: string;
  /** AWS region (Bedrock). */
  region?: string;
  /** Per-request upstream timeout (headers and idle body), milliseconds. */
  timeoutMs?: number;
  /** Several keys, projects or regions sharing the route's calls, each with its own breaker (ADR 0008). */
  endpoints?: RouteEndpoint[];
  /** How a call picks one of `endpoints` (default weighted). */
  strategy?: EndpointStrategy;
  /**
   * `allow`: forward native calls on paths the route's format cannot meter, each logged, counted and marked on its
   * span; `refuse` (the default): answer them 403 unmetered_endpoint. Set in the config file or a ProxyConfig only.
   */
  unmetered?: UnmeteredPolicy;
}

export type UnmeteredPolicy = 'allow' | 'refuse';
export const UNMETERED_POLICIES: readonly UnmeteredPolicy[] = ['allow', 'refuse'];

/**
 * Files holding the built-in credentials' secrets (mounted Secrets, re-read when they change), one setting per
 * secret of contracts/credential-kinds.ts's BUILT_IN_CREDENTIALS: openaiApiKeyFile (else OPENAI_API_KEY),
 * anthropicApiKeyFile (else ANTHROPIC_API_KEY), googleCredentialsFile (a service account key or external_account
 * config, as GOOGLE_APPLICATION_CREDENTIALS would name it; else ADC), awsAccessKeyIdFile, awsSecretAccessKeyFile
 * and awsSessionTokenFile (else the AWS default chain).
 */
export type CredentialsConfig = { [K in CredentialFileSetting]?: string };

/**
 * A route added in the config (`routes`): /proxy/<name>/* with the behaviour of its format, metered, priced
 * (price entries under its provider), breaker-protected and budgeted like a built-in one (docs/routes.md).
 */
export interface RouteEntry {
  name: string;
  format: RouteFormat;
  /** The upstream's base URL; the caller's path after /proxy/<name> is appended. */
  baseUrl: string;
  /** Provider name in spans and price entries; default: the route's name. */
  provider?: string;
  credential: CredentialDefinition;
  /** Headers sent upstream when the caller sent none (not secrets: GET /_local/api/config shows them). */
  headers?: Record<string, string>;
  /** Models /v1 sends here by their bare id (besides `<name>/<model>` and price entries of its provider). */
  models?: string[];
  /** Vertex AI formats: project and location. */
  project?: string;
  location?: string;
  /** Bedrock: AWS region. */
  region?: string;
  timeoutMs?: number;
  /** Several keys, projects or regions sharing the route's calls (ADR 0008). */
  endpoints?: RouteEndpoint[];
  strategy?: EndpointStrategy;
  /** As upstreams.<route>.unmetered. */
  unmetered?: UnmeteredPolicy;
}

/** Generated from the one definition of contracts/runtime-config-schema.ts (ADR 0602); the merged config has every field. */
export type BreakerConfig = Required<BreakerSpec>;

export interface StorageConfig {
  /**
   * `sqlite` (default), `duckdb`, `bigquery`, `firestore`, or `memory` (spans kept only in a bounded ring, for
   * tests and ephemeral pods). docs/span-stores.md.
   */
  kind: StorageKind;
  /** SQLite file path. */
  path: string;
  duckdb?: DuckDbStorageConfig;
  bigquery?: BigQueryStorageConfig;
  firestore?: FirestoreStorageConfig;
  /** Spans waiting to be written; beyond this they are dropped, counted and logged. */
  bufferSize: number;
  batchSize: number;
  flushIntervalMs: number;
  /** Keep at most this many spans in SQLite, dropping the oldest; 0 keeps all. */
  maxSpans: number;
}

/** Which route serves provider `anthropic` and `google` models on /v1/chat/completions (runtime-config-schema.ts). */
export type GatewayConfig = Required<GatewaySpec>;

/**
 * The gateway setting that picks the /v1 route of a provider with more than one. A provider without a
 * setting uses its one /v1 route from the table (defaultV1Route).
 */
export const GATEWAY_ROUTE_SETTINGS = { anthropic: 'anthropicRoute', google: 'googleRoute' } as const satisfies Partial<Record<Provider, keyof GatewayConfig>>;

/** The developer's local model runtime (Ollama's HTTP API) and the LM Studio-compatible listener (docs/local-proxy.md). */
export interface LocalRuntimeConfig {
  /** The runtime's HTTP API; also the upstream of route `local` unless upstreams.local.baseUrl names another. */
  baseUrl: string;
  /** What POST /_local/api/start runs, as argv (no shell): `ollama serve` by default. */
  command: string[];
  /** How long a started runtime may take to answer before the start is reported failed. */
  startTimeoutMs: number;
}

export interface LocalConfig {
  /**
   * The local runtime's features: its models on /v1 (merged with the priced ones), the LM Studio-compatible
   * listener, /_local/api/pull|start|stop. On by default for the local proxy; off in a pod and in server mode.
   */
  enabled: boolean;
  /** Port of the LM Studio-compatible listener on the proxy's host; 0: no listener. */
  lmstudioPort: number;
  runtime: LocalRuntimeConfig;
}

export interface ServerConfig {
  host: string;
  port: number;
  /** Largest request body accepted, bytes; larger bodies get 413. */
  bodyLimitBytes: number;
  /**
   * Host names (besides loopback and this machine's own names and addresses) requests may carry in Host:
   * exact names or addresses, `*.example.com`, or `*` for any. Others get 403 (DNS rebinding; ADR 1000).
   */
  allowedHosts: string[];
  /** Web page origins (`http://localhost:3000`) that may call the engine from a browser; others get 403. */
  allowedOrigins: string[];
  /** Longest time to receive a request's body once its headers are in; after it, 408 client_timeout (ADR 1002). */
  requestTimeoutMs: number;
  /** On SIGTERM, how long calls in flight may run before their connections are closed. */
  drainTimeoutMs: number;
  /** Inbound identity: who may call, and how they prove it (server-auth-config.ts, inbound/identity/). */
  auth: ServerAuthConfig;
}

/**
 * Per-user series (tollgate_user_*). Off by default: user ids come from request headers, so any caller could
 * add series; on, the first maxUsers users get their own and later ones share `other` (ADR 1500).
 */
export interface MetricsConfig {
  perUser: Required<PerUserMetricsSpec>;
}

/** Where each call's span is also sent over OTLP (ADR 1501); OTEL_EXPORTER_OTLP_* fill what is not set. */
export type OtlpConfig = OtlpSpec;

export type TracingConfig = TracingSpec;

export interface RuntimeConfig {
  /** `server` turns inbound authentication on by default and stops trusting x-tollgate-user. */
  mode: EngineMode;
  server: ServerConfig;
  upstreams: Partial<Record<RouteName, UpstreamConfig>>;
  /** Routes added in the config, by name; built-in routes are not listed. */
  routes: RouteEntry[];
  pricing: { models: PriceEntry[] };
  /** Per built-in provider; a configured route's provider has no cached-read discount unless its price entries name a cached price. */
  cache: Record<Provider, CacheSettings>;
  credentials: CredentialsConfig;
  breaker: BreakerConfig;
  storage: StorageConfig;
  gateway: GatewayConfig;
  /** Read at start only: the runtime's command and the listener's port are never changed by the config API (ADR 1401). */
  local: LocalConfig;
  /** Tetragon audit fan-out (sidecar/src/audit); absent: off. */
  audit?: AuditConfig;
  /** Calling process on spans and bypass detection (sidecar/src/provenance); absent: off. */
  provenance?: ProvenanceConfig;
  /** Budget policies and where spend is kept (sidecar/src/budgets); in a sidecar the operator sends them instead. */
  budgets: BudgetsConfig;
  metrics: MetricsConfig;
  /** OTLP span export; absent: only the OTEL_* variables can switch it on. */
  tracing?: TracingConfig;
  /** Model aliases on /v1: name → targets with fallback (contracts/model-aliases.ts). */
  models: ModelAliasesConfig;
}
