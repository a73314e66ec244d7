// Validation of config input from every source (the YAML file, POST /_local/api/config, operator
// snapshots). Input is checked whole before anything is applied, and every error names its field, so a bad
// value is refused with a message the user can act on and never half-applied.

import { parseModelAliases, type ModelAliasesConfig } from './model-aliases.ts';
import { type AuditConfig, parseAuditConfig } from './audit-config.ts';
import { parseProvenanceConfig, type ProvenanceConfig } from './provenance-config.ts';
import { type BudgetsPatch, parseBudgetsPatch } from './budget-config.ts';
import type { CacheSettings, PriceEntry } from './price-entry.ts';
import { parsePriceEntry } from './parse-price-entry.ts';
import { PriceEntryError } from './price-entry-error.ts';
import {
  CONFIGURED_ROUTE_NAME,
  isRouteName,
  listRouteNames,
  PROVIDERS,
  reservedRouteName,
  ROUTE_FORMAT_NAMES,
  ROUTE_FORMATS,
  ROUTES,
  type Provider,
  type RouteName,
} from './routes.ts';
import { builtInSecrets, BUILT_IN_CREDENTIALS, CREDENTIAL_KINDS, type CredentialFileSetting } from './credential-kinds.ts';
import { parseRouteCredential, type DeclaredCredentials } from './route-credential-schema.ts';
import { ENDPOINT_STRATEGIES, parseEndpoints } from './route-endpoints.ts';
import { normaliseAllowedHost } from './allowed-hosts.ts';
import { normaliseOrigin } from './origin-policy.ts';
import { ConfigError } from './config-error.ts';
import { BREAKER_SCHEMA, CACHE_SETTINGS_SCHEMA, GATEWAY_SCHEMA, METRICS_SCHEMA, STORAGE_TUNING_PROPERTIES, storageSchema, TRACING_SCHEMA } from './runtime-config-schema.ts';
import { validateSection } from './schema-validate.ts';
import { isRecord } from './json-record.ts';
import type {
  BreakerConfig,
  CredentialsConfig,
  GatewayConfig,
  LocalConfig,
  LocalRuntimeConfig,
  MetricsConfig,
  RouteEntry,
  ServerConfig,
  StorageConfig,
  TracingConfig,
  UpstreamConfig,
} from './runtime-config.ts';
import { UNMETERED_POLICIES } from './runtime-config.ts';
import { parseBigQueryStorage, parseDuckDbStorage, parseFirestoreStorage, STORAGE_KINDS } from './storage-config.ts';
import { parseEngineMode, parseServerAuth, type EngineMode, type ServerAuthConfig } from './server-auth-config.ts';

/** A partial runtime config: what one source (file, API, operator) sets. */
export interface RuntimeConfigPatch {
  mode?: EngineMode;
  server?: Partial<Omit<ServerConfig, 'auth'>> & { auth?: Partial<ServerAuthConfig> };
  upstreams?: Partial<Record<RouteName, UpstreamConfig>>;
  /** Configured routes, merged over earlier layers by name. */
  routes?: RouteEntry[];
  /** Price overrides, merged over the built-in defaults by (provider, model). */
  pricing?: { models: PriceEntry[] };
  cache?: Partial<Record<Provider, Partial<CacheSettings>>>;
  credentials?: CredentialsConfig;
  breaker?: Partial<BreakerConfig>;
  storage?: Partial<StorageConfig>;
  gateway?: Partial<GatewayConfig>;
  local?: Partial<Omit<LocalConfig, 'runtime'>> & { runtime?: Partial<LocalRuntimeConfig> };
  /** Replaces the whole audit section of earlier layers. */
  audit?: AuditConfig;
  /** Replaces the whole provenance section of earlier layers. */
  provenance?: ProvenanceConfig;
  /** `ledger` and `policies` each replace those of earlier layers. */
  budgets?: BudgetsPatch;
  metrics?: { perUser?: Partial<MetricsConfig['perUser']> };
  /** Replaces the whole tracing section of earlier layers. */
  tracing?: TracingConfig;
  /** Aliases named here replace those of the same name in earlier layers, whole. */
  models?: ModelAliasesConfig;
}

type Obj = Record<string, unknown>;

function object(value: unknown, field: string): Obj {
  if (!isRecord(value)) throw new ConfigError(field, 'must be an object');
  return value;
}

function onlyKeys(value: Obj, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ConfigError(field ? `${field}.${key}` : key, `is not a known field (expected one of: ${allowed.join(', ')})`);
    }
  }
}

function optionalString(value: Obj, key: string, field: string, pattern?: RegExp, hint?: string): string | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw new ConfigError(`${field}.${key}`, 'must be a non-empty string');
  if (pattern && !pattern.test(v)) throw new ConfigError(`${field}.${key}`, hint ?? `must match ${pattern}`);
  return v;
}

function optionalNumber(value: Obj, key: string, field: string, range: { min: number; max: number; integer?: boolean; minExclusive?: boolean }): number | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  const what = range.integer ? 'an integer' : 'a number';
  const ok = typeof v === 'number' && Number.isFinite(v) && (!range.integer || Number.isInteger(v)) && (range.minExclusive ? v > range.min : v >= range.min) && v <= range.max;
  if (!ok) {
    const lower = range.minExclusive ? `greater than ${range.min}` : `at least ${range.min}`;
    throw new ConfigError(`${field}.${key}`, `must be ${what} ${lower} and at most ${range.max} (got ${JSON.stringify(v)})`);
  }
  return v;
}

function optionalEnum<T extends string>(value: Obj, key: string, field: string, allowed: readonly T[]): T | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(`${field}.${key}`, `must be one of ${allowed.join(', ')} (got ${JSON.stringify(v)})`);
  }
  return v as T;
}

/** Copies the values that are set: a field a source leaves out stays unset, not `undefined`. */
function assignDefined<T extends object>(target: T, values: { [K in keyof T]?: T[K] | undefined }): T {
  for (const [k, v] of Object.entries(values)) if (v !== undefined) (target as Obj)[k] = v;
  return target;
}

// No user:password@: a secret there would be shown by GET /_local/api/config (and undici ignores it).
const HTTP_URL = /^https?:\/\/[^\s/?#@]+(?:\/[^\s?#]*)?$/;
const SHORT_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const PROJECT = /^[a-z0-9][a-z0-9.:-]{0,127}$/;

function optionalList(value: Obj, key: string, field: string, normalise: (entry: string) => string | null, hint: string): string[] | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw new ConfigError(`${field}.${key}`, `must be a list (${hint})`);
  if (v.length > 100) throw new ConfigError(`${field}.${key}`, 'must have at most 100 entries');
  return v.map((entry, i) => {
    const normalised = typeof entry === 'string' ? normalise(entry) : null;
    if (normalised === null) throw new ConfigError(`${field}.${key}[${i}]`, `must be ${hint} (got ${JSON.stringify(entry)})`);
    return normalised;
  });
}

function parseServer(input: unknown, field: string): NonNullable<RuntimeConfigPatch['server']> {
  const v = object(input, field);
  onlyKeys(v, field, ['host', 'port', 'bodyLimitBytes', 'allowedHosts', 'allowedOrigins', 'requestTimeoutMs', 'drainTimeoutMs', 'auth']);
  return assignDefined<NonNullable<RuntimeConfigPatch['server']>>(
    {},
    {
      host: optionalString(v, 'host', field),
      port: optionalNumber(v, 'port', field, { min: 0, max: 65535, integer: true }),
      bodyLimitBytes: optionalNumber(v, 'bodyLimitBytes', field, { min: 1024, max: 1 << 30, integer: true }),
      allowedHosts: optionalList(v, 'allowedHosts', field, normaliseAllowedHost, 'a host name, an IP address, "*.<domain>" or "*"'),
      allowedOrigins: optionalList(v, 'allowedOrigins', field, normaliseOrigin, 'an origin such as http://localhost:3000 (scheme, host and port only)'),
      requestTimeoutMs: optionalNumber(v, 'requestTimeoutMs', field, { min: 100, max: 3_600_000, integer: true }),
      drainTimeoutMs: optionalNumber(v, 'drainTimeoutMs', field, { min: 0, max: 3_600_000, integer: true }),
      auth: v.auth === undefined ? undefined : parseServerAuth(v.auth, `${field}.auth`),
    },
  );
}

/** The upstream settings a format's routes take (the CRD's three upstream shapes): a setting the route would ignore is refused. */
function upstreamFields(format: keyof typeof ROUTE_FORMATS | undefined): string[] {
  const shape = format === undefined ? undefined : ROUTE_FORMATS[format].upstream;
  return [
    'baseUrl',
    ...(shape === undefined || shape === 'vertex' ? ['project', 'location'] : []),
    ...(shape === undefined || shape === 'aws' ? ['region'] : []),
    'timeoutMs',
    'endpoints',
    'strategy',
    'unmetered',
  ];
}

/** The route's credential kind and format, for its `endpoints` (route-endpoints.ts). */
interface EndpointsOf {
  format: keyof typeof ROUTE_FORMATS;
  credentialKind: keyof typeof CREDENTIAL_KINDS;
  fromApi: boolean;
}

function parseUpstream(input: unknown, field: string, format?: keyof typeof ROUTE_FORMATS, endpointsOf?: EndpointsOf): UpstreamConfig {
  const v = object(input, field);
  onlyKeys(v, field, upstreamFields(format));
  const endpoints =
    v.endpoints === undefined || endpointsOf === undefined
      ? undefined
      : parseEndpoints(v.endpoints, `${field}.endpoints`, {
          shape: ROUTE_FORMATS[endpointsOf.format].upstream,
          credentialKind: endpointsOf.credentialKind,
          fromApi: endpointsOf.fromApi,
          settings: (settings, at) => parseUpstream(settings, at, endpointsOf.format),
        });
  const baseUrl = optionalString(
    v,
    'baseUrl',
    field,
    HTTP_URL,
    'must be an http(s) URL without user:password@, query or fragment (credentials come from credentials.* or the environment)',
  );
  return assignDefined<UpstreamConfig>(
    {},
    {
      baseUrl: baseUrl?.replace(/\/+$/, ''),
      project: optionalString(v, 'project', field, PROJECT, 'must be a Google Cloud project id'),
      location: optionalString(v, 'location', field, SHORT_NAME, 'must be a location such as us-central1 or global'),
      region: optionalString(v, 'region', field, SHORT_NAME, 'must be a region such as us-east-1'),
      timeoutMs: optionalNumber(v, 'timeoutMs', field, { min: 100, max: 3_600_000, integer: true }),
      endpoints,
      strategy: optionalEnum(v, 'strategy', field, ENDPOINT_STRATEGIES),
      unmetered: optionalEnum(v, 'unmetered', field, UNMETERED_POLICIES),
    },
  );
}

function parseUpstreams(input: unknown, field: string, fromApi = false): Partial<Record<RouteName, UpstreamConfig>> {
  const v = object(input, field);
  const out: Partial<Record<RouteName, UpstreamConfig>> = {};
  for (const [route, upstream] of Object.entries(v)) {
    if (!isRouteName(route)) throw new ConfigError(`${field}.${route}`, `is not a route (expected ${listRouteNames()})`);
    const { format, credential } = ROUTES[route];
    out[route] = parseUpstream(upstream, `${field}.${route}`, format, { format, credentialKind: BUILT_IN_CREDENTIALS[credential].definition.kind, fromApi });
  }
  return out;
}

function parsePricing(input: unknown, field: string, providers: readonly string[]): { models: PriceEntry[] } {
  const v = object(input, field);
  onlyKeys(v, field, ['models']);
  if (v.models === undefined) return { models: [] };
  if (!Array.isArray(v.models)) throw new ConfigError(`${field}.models`, 'must be a list of price entries');
  if (v.models.length > 1000) throw new ConfigError(`${field}.models`, 'must have at most 1000 entries');
  const models = v.models.map((entry, i) => {
    try {
      return parsePriceEntry(entry, `${field}.models[${i}]`, providers);
    } catch (error) {
      if (error instanceof PriceEntryError) throw new ConfigError(error.field, error.message.slice(error.field.length + 1));
      throw error;
    }
  });
  // Lookups ignore case, so two entries that differ only in case would price the same calls: one of them
  // silently. Refused like an exact repeat.
  const seen = new Map<string, number>();
  models.forEach((m, i) => {
    const key = `${m.provider}/${m.model.toLowerCase()}`;
    const first = seen.get(key);
    if (first !== undefined) {
      const firstModel = models[first]!.model;
      const sameCase = firstModel === m.model ? '' : ` as ${firstModel}; model ids are matched without regard to case`;
      throw new ConfigError(`${field}.models[${i}]`, `repeats provider ${m.provider} model ${m.model} (already at ${field}.models[${first}]${sameCase})`);
    }
    seen.set(key, i);
  });
  return { models };
}

function parseCache(input: unknown, field: string): Partial<Record<Provider, Partial<CacheSettings>>> {
  const v = object(input, field);
  onlyKeys(v, field, PROVIDERS);
  const out: Partial<Record<Provider, Partial<CacheSettings>>> = {};
  for (const [provider, settings] of Object.entries(v)) out[provider as Provider] = validateSection(CACHE_SETTINGS_SCHEMA, settings, `${field}.${provider}`);
  return out;
}

/** The `credentials.*File` settings, one per secret of a built-in credential (contracts/credential-kinds.ts). */
const CREDENTIAL_SETTINGS = builtInSecrets().map(({ secret }) => secret.setting as CredentialFileSetting);

function parseCredentials(input: unknown, field: string): CredentialsConfig {
  const v = object(input, field);
  onlyKeys(v, field, CREDENTIAL_SETTINGS);
  const out: CredentialsConfig = {};
  for (const key of CREDENTIAL_SETTINGS) {
    const value = optionalString(v, key, field);
    if (value !== undefined) out[key] = value;
  }
  for (const credential of Object.values(BUILT_IN_CREDENTIALS)) {
    const [first, second] = CREDENTIAL_KINDS[credential.definition.kind].together ?? [];
    if (first === undefined || second === undefined) continue;
    const secrets = credential.secrets as Readonly<Record<string, { setting: string }>>;
    const [a, b] = [secrets[first]!.setting as CredentialFileSetting, secrets[second]!.setting as CredentialFileSetting];
    if ((out[a] === undefined) !== (out[b] === undefined)) throw new ConfigError(`${field}.${b}`, `and ${a} must be set together`);
  }
  return out;
}

const ROUTE_FIELDS = [
  'name',
  'format',
  'baseUrl',
  'provider',
  'credential',
  'headers',
  'models',
  'project',
  'location',
  'region',
  'timeoutMs',
  'endpoints',
  'strategy',
  'unmetered',
] as const;
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]{0,1024}$/;
/** Headers a route may not set: credentials (the route's credential sets its own) and those the proxy manages. */
const FORBIDDEN_ROUTE_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'x-goog-api-key',
  'api-key',
  'cookie',
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'keep-alive',
  'expect',
  'traceparent',
  'tracestate',
]);
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$/;

function parseRouteHeaders(input: unknown, field: string, credentialHeader: string | undefined): Record<string, string> {
  const v = object(input, field);
  const entries = Object.entries(v);
  if (entries.length > 32) throw new ConfigError(field, 'must have at most 32 headers');
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(lower)) throw new ConfigError(`${field}.${name}`, 'is not a valid header name');
    if (FORBIDDEN_ROUTE_HEADERS.has(lower) || lower === credentialHeader || lower.startsWith('x-tollgate-')) {
      throw new ConfigError(`${field}.${name}`, "is a header the proxy sets itself (a key goes in the route's credential, never in headers)");
    }
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) throw new ConfigError(`${field}.${name}`, 'must be a header value: at most 1024 characters, no line breaks');
    out[lower] = value;
  }
  return out;
}

function parseModelList(input: unknown, field: string): string[] {
  if (!Array.isArray(input)) throw new ConfigError(field, 'must be a list of model ids');
  if (input.length > 1000) throw new ConfigError(field, 'must have at most 1000 entries');
  return input.map((model, i) => {
    if (typeof model !== 'string' || !MODEL_ID.test(model)) throw new ConfigError(`${field}[${i}]`, `must be a model id (got ${JSON.stringify(model)})`);
    return model;
  });
}

function parseRouteName(v: Obj, field: string): string {
  const name = v.name;
  if (typeof name !== 'string' || !CONFIGURED_ROUTE_NAME.test(name)) {
    throw new ConfigError(`${field}.name`, `must be a route name: lower-case letters, digits and '-', at most 63 (got ${JSON.stringify(name)})`);
  }
  if (reservedRouteName(name)) throw new ConfigError(`${field}.name`, `${JSON.stringify(name)} is a built-in route (${listRouteNames()}) or reserved; choose another name`);
  return name;
}

/** Upstream settings only some formats take: a setting the route's format would ignore is refused. */
function checkUpstreamShape(v: Obj, field: string, format: keyof typeof ROUTE_FORMATS): void {
  const shape = ROUTE_FORMATS[format].upstream;
  const allowed = shape === 'vertex' ? ['project', 'location'] : shape === 'aws' ? ['region'] : [];
  for (const key of ['project', 'location', 'region']) {
    if (v[key] !== undefined && !allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a setting of format ${format}`);
  }
}

function parseRoute(input: unknown, field: string, declared: DeclaredCredentials | undefined): RouteEntry {
  const v = object(input, field);
  onlyKeys(v, field, ROUTE_FIELDS);
  const name = parseRouteName(v, field);
  const format = optionalEnum(v, 'format', field, ROUTE_FORMAT_NAMES);
  if (format === undefined) throw new ConfigError(`${field}.format`, `is required: one of ${ROUTE_FORMAT_NAMES.join(', ')}`);
  checkUpstreamShape(v, field, format);
  if (v.baseUrl === undefined) throw new ConfigError(`${field}.baseUrl`, "is required: the upstream's http(s) base URL");
  if (v.credential === undefined) throw new ConfigError(`${field}.credential`, 'is required: {kind: api-key | google-adc | aws-sigv4 | none, ...}');
  const credential = parseRouteCredential(v.credential, `${field}.credential`, name, format, declared);
  const upstream = parseUpstream(
    {
      baseUrl: v.baseUrl,
      project: v.project,
      location: v.location,
      region: v.region,
      timeoutMs: v.timeoutMs,
      endpoints: v.endpoints,
      strategy: v.strategy,
      unmetered: v.unmetered,
    },
    field,
    undefined,
    { format, credentialKind: credential.kind, fromApi: declared !== undefined },
  );
  const credentialHeader = credential.kind === 'api-key' ? credential.header : undefined;
  return assignDefined<RouteEntry>(
    { name, format, baseUrl: upstream.baseUrl!, credential },
    {
      provider: optionalString(v, 'provider', field, SHORT_NAME, "must be a provider name: lower-case letters, digits and '-'"),
      headers: v.headers === undefined ? undefined : parseRouteHeaders(v.headers, `${field}.headers`, credentialHeader),
      models: v.models === undefined ? undefined : parseModelList(v.models, `${field}.models`),
      project: upstream.project,
      location: upstream.location,
      region: upstream.region,
      timeoutMs: upstream.timeoutMs,
      endpoints: upstream.endpoints,
      strategy: upstream.strategy,
      unmetered: upstream.unmetered,
    },
  );
}

function parseRoutes(input: unknown, field: string, declared?: DeclaredCredentials): RouteEntry[] {
  if (!Array.isArray(input)) throw new ConfigError(field, 'must be a list of routes');
  if (input.length > 64) throw new ConfigError(field, 'must have at most 64 routes');
  const seen = new Map<string, number>();
  return input.map((entry, i) => {
    const route = parseRoute(entry, `${field}[${i}]`, declared);
    const first = seen.get(route.name);
    if (first !== undefined) throw new ConfigError(`${field}[${i}].name`, `repeats route ${route.name} (already at ${field}[${first}])`);
    seen.set(route.name, i);
    return route;
  });
}

function parseBreaker(input: unknown, field: string): Partial<BreakerConfig> {
  return validateSection(BREAKER_SCHEMA, input, field);
}

const RUNTIME_STORAGE_TUNING = storageSchema({ type: 'object', properties: {} });

function pick(v: Obj, keys: readonly string[]): Obj {
  return Object.fromEntries(keys.filter((key) => v[key] !== undefined).map((key) => [key, v[key]]));
}

function parseStorage(input: unknown, field: string): Partial<StorageConfig> {
  const v = object(input, field);
  onlyKeys(v, field, ['kind', 'path', 'bufferSize', 'batchSize', 'flushIntervalMs', 'maxSpans', 'duckdb', 'bigquery', 'firestore']);
  // `path` is the SQLite file and DuckDB's is `duckdb.path`: written together, `path` would be ignored and the
  // spans would go to another file than the one named.
  if (v.kind === 'duckdb' && v.path !== undefined) throw new ConfigError(`${field}.path`, `is the SQLite file; with kind duckdb set ${field}.duckdb.path`);
  // The writer's tuning and its batchSize <= bufferSize rule are the CRD's own (runtime-config-schema.ts); the
  // store kinds and their settings are the engine's (duckdb and a SQLite path are the local proxy's).
  const tuning = validateSection<Partial<StorageConfig>>(RUNTIME_STORAGE_TUNING, pick(v, Object.keys(STORAGE_TUNING_PROPERTIES)), field);
  return assignDefined<Partial<StorageConfig>>(
    {},
    {
      kind: optionalEnum(v, 'kind', field, STORAGE_KINDS),
      duckdb: v.duckdb === undefined ? undefined : parseDuckDbStorage(v.duckdb, `${field}.duckdb`),
      bigquery: v.bigquery === undefined ? undefined : parseBigQueryStorage(v.bigquery, `${field}.bigquery`),
      firestore: v.firestore === undefined ? undefined : parseFirestoreStorage(v.firestore, `${field}.firestore`),
      path: optionalString(v, 'path', field),
      ...tuning,
    },
  );
}

function parseGateway(input: unknown, field: string): Partial<GatewayConfig> {
  return validateSection(GATEWAY_SCHEMA, input, field);
}

// The runtime's command is a program the proxy runs: a string split on spaces (no shell, no quoting) or a list.
const COMMAND_WORD = /^[^\s\0]+$/;

function parseCommand(value: unknown, field: string): string[] {
  const words = typeof value === 'string' ? value.trim().split(/\s+/) : value;
  if (!Array.isArray(words) || words.length === 0 || words.length > 64 || words.some((word) => typeof word !== 'string' || !COMMAND_WORD.test(word))) {
    throw new ConfigError(field, `must be a command such as "ollama serve", or a list of its words, at most 64, none empty (got ${JSON.stringify(value)})`);
  }
  return words as string[];
}

function parseLocal(input: unknown, field: string): NonNullable<RuntimeConfigPatch['local']> {
  const v = object(input, field);
  onlyKeys(v, field, ['enabled', 'lmstudioPort', 'runtime']);
  if (v.enabled !== undefined && typeof v.enabled !== 'boolean') throw new ConfigError(`${field}.enabled`, `must be true or false (got ${JSON.stringify(v.enabled)})`);
  let runtime: Partial<LocalRuntimeConfig> | undefined;
  if (v.runtime !== undefined) {
    const f = `${field}.runtime`;
    const r = object(v.runtime, f);
    onlyKeys(r, f, ['baseUrl', 'command', 'startTimeoutMs']);
    runtime = assignDefined<Partial<LocalRuntimeConfig>>(
      {},
      {
        baseUrl: optionalString(r, 'baseUrl', f, HTTP_URL, 'must be an http(s) URL without user:password@, query or fragment')?.replace(/\/+$/, ''),
        command: r.command === undefined ? undefined : parseCommand(r.command, `${f}.command`),
        startTimeoutMs: optionalNumber(r, 'startTimeoutMs', f, { min: 100, max: 600_000, integer: true }),
      },
    );
  }
  return assignDefined<NonNullable<RuntimeConfigPatch['local']>>(
    {},
    {
      enabled: v.enabled,
      lmstudioPort: optionalNumber(v, 'lmstudioPort', field, { min: 0, max: 65535, integer: true }),
      runtime,
    },
  );
}

function parseMetrics(input: unknown, field: string): NonNullable<RuntimeConfigPatch['metrics']> {
  return validateSection(METRICS_SCHEMA, input, field);
}

function parseOtlpEndpoint(value: string, field: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(field, `must be an http:// or https:// URL (got ${JSON.stringify(value)})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(field, `must be an http:// or https:// URL (got ${JSON.stringify(value)})`);
  // Whoever can read the config must not learn a collector password: credentials go in OTEL_EXPORTER_OTLP_HEADERS.
  if (url.username !== '' || url.password !== '') throw new ConfigError(field, 'must not carry credentials; set OTEL_EXPORTER_OTLP_HEADERS instead');
  if (url.search !== '' || url.hash !== '') throw new ConfigError(field, 'must be a base URL without query or fragment');
  return value;
}

function parseTracing(input: unknown, field: string): TracingConfig {
  const otlp = (value: unknown, at: string) =>
    validateSection(TRACING_SCHEMA.properties!.otlp!, value, at, { endpoint: (endpoint, f) => parseOtlpEndpoint(endpointText(endpoint, f), f) });
  return validateSection(TRACING_SCHEMA, input, field, { otlp });
}

function endpointText(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new ConfigError(field, 'must be a non-empty string');
  return value;
}

const SECTIONS = [
  'mode',
  'server',
  'upstreams',
  'routes',
  'pricing',
  'cache',
  'credentials',
  'breaker',
  'storage',
  'gateway',
  'local',
  'audit',
  'provenance',
  'budgets',
  'metrics',
  'tracing',
  'models',
] as const;

/**
 * Checks a whole config patch. Throws ConfigError naming the first bad field; returns a clean copy
 * (unknown fields are errors, so a typo is never silently ignored).
 */
export interface PatchContext {
  /** Providers of routes configured in other layers, which price entries may name besides this patch's routes'. */
  routeProviders?: readonly string[];
  /** Set by the config API: routes take only `{kind: none}` or a declared credential by `{use: <route>}` (ADR 1007). */
  declaredCredentials?: DeclaredCredentials;
}

export function parseRuntimeConfigPatch(input: unknown, sections: readonly string[] = SECTIONS, context: PatchContext = {}): RuntimeConfigPatch {
  if (input === null || input === undefined) return {};
  const v = object(input, 'config');
  onlyKeys(v, '', sections);
  const patch: RuntimeConfigPatch = {};
  if (v.mode !== undefined) patch.mode = parseEngineMode(v.mode, 'mode');
  if (v.server !== undefined) patch.server = parseServer(v.server, 'server');
  if (v.upstreams !== undefined) patch.upstreams = parseUpstreams(v.upstreams, 'upstreams', context.declaredCredentials !== undefined);
  if (v.routes !== undefined) patch.routes = parseRoutes(v.routes, 'routes', context.declaredCredentials);
  if (v.pricing !== undefined) {
    const routeProviders = [...(context.routeProviders ?? []), ...(patch.routes ?? []).map((route) => route.provider ?? route.name)];
    patch.pricing = parsePricing(v.pricing, 'pricing', [...new Set([...PROVIDERS, ...routeProviders])]);
  }
  if (v.cache !== undefined) patch.cache = parseCache(v.cache, 'cache');
  if (v.credentials !== undefined) patch.credentials = parseCredentials(v.credentials, 'credentials');
  if (v.breaker !== undefined) patch.breaker = parseBreaker(v.breaker, 'breaker');
  if (v.storage !== undefined) patch.storage = parseStorage(v.storage, 'storage');
  if (v.gateway !== undefined) patch.gateway = parseGateway(v.gateway, 'gateway');
  if (v.local !== undefined) patch.local = parseLocal(v.local, 'local');
  if (v.audit !== undefined) patch.audit = parseAuditConfig(v.audit, 'audit');
  if (v.provenance !== undefined) patch.provenance = parseProvenanceConfig(v.provenance, 'provenance');
  if (v.budgets !== undefined) patch.budgets = parseBudgetsPatch(v.budgets, 'budgets');
  if (v.metrics !== undefined) patch.metrics = parseMetrics(v.metrics, 'metrics');
  if (v.tracing !== undefined) patch.tracing = parseTracing(v.tracing, 'tracing');
  if (v.models !== undefined) patch.models = parseModelAliases(v.models, 'models');
  return patch;
}
