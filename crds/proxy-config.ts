// ProxyConfig (tollgate.dev/v1alpha1): the single source of truth for its CRD YAML and its TypeScript types
// (`node crds/generate.ts` writes both; see docs/decisions/0600). The spec mirrors the runtime config of
// contracts/runtime-config.ts, except that credentials are references to Secrets, never values.
//
// Every string and list is bounded (maxLength, maxItems): the API server estimates the worst-case cost of
// each CEL rule from those bounds and refuses the CRD when it is unbounded or too expensive.

import { MAX_PRICE_PER_MILLION, MAX_USD_PER_UNIT } from '../contracts/price-entry.ts';
import { PROVIDERS, ROUTE_FORMAT_NAMES, ROUTE_FORMATS, ROUTE_NAMES, ROUTES, type RouteName } from '../contracts/routes.ts';
import { BUILT_IN_CREDENTIALS, CREDENTIAL_KIND_NAMES, CREDENTIAL_KINDS, type BuiltInCredential } from '../contracts/credential-kinds.ts';
import type { CrdSource, SchemaNode, ValidationRule } from './crd-schema.ts';
import { BREAKER_SCHEMA, CACHE_SETTINGS_SCHEMA, GATEWAY_SCHEMA, int, METRICS_SCHEMA, MODELS_SCHEMA, storageSchema, TRACING_SCHEMA } from '../contracts/runtime-config-schema.ts';
import { PROVENANCE_SCHEMA } from '../contracts/provenance-config.ts';
import { auditSpec } from './proxy-config-audit.ts';
import { ENFORCEMENT_PROPERTIES } from './proxy-config-enforcement.ts';
import { ENDPOINT_STRATEGIES, MAX_ENDPOINT_WEIGHT, MAX_ENDPOINTS } from '../contracts/route-endpoints.ts';

// Go's regexp (RE2) syntax, as the API server evaluates `pattern`.
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
const SECRET_KEY = '^[-._a-zA-Z0-9]+$';
const MODEL_ID = '^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$';
const SHORT_NAME = '^[a-z0-9][a-z0-9-]{0,62}$';
const GCP_PROJECT = '^[a-z0-9][a-z0-9.:-]{0,127}$';
const IMAGE_SIZE = '^([0-9]{2,5}x[0-9]{2,5}|auto)$';

/** Upper bound of a price, USD per million tokens: the same bound the sidecar's own validator applies. */
const MAX_PRICE = MAX_PRICE_PER_MILLION;
const MAX_MODELS = 1000;

function price(description: string): SchemaNode {
  return { type: 'number', description, minimum: 0, maximum: MAX_PRICE };
}

/** A price per billed unit that is not a million tokens (an image, a minute of audio, a million characters). */
function unitPrice(description: string): SchemaNode {
  return { type: 'number', description, minimum: 0, maximum: MAX_USD_PER_UNIT };
}

/** Per-image prices (ADR 0910): an exact (size, quality) entry wins over one of the same size without quality. */
const imagePrices: SchemaNode = {
  type: 'array',
  description: 'USD per generated image by size and quality (dall-e-3, dall-e-2). An entry without quality matches any quality of its size.',
  maxItems: 32,
  items: {
    type: 'object',
    tsType: 'ImagePriceSpec',
    description: 'USD per generated image of one size (and quality).',
    required: ['size', 'usd'],
    properties: {
      size: { type: 'string', description: 'Image size as the request names it, e.g. 1024x1024, or auto.', maxLength: 11, pattern: IMAGE_SIZE },
      quality: { type: 'string', description: 'Quality as the request names it, e.g. standard, hd, low, medium, high.', minLength: 1, maxLength: 16 },
      usd: unitPrice('USD per image.'),
    },
  },
};

/** One price entry; its type is generated into contracts/ as well, where the config validator and the engine share it. */
export const PRICE_ENTRY_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'PriceModelSpec',
  description:
    'Prices for one model: USD per million tokens, and per image, minute of audio or million characters for the models billed so. Merged over the built-in price table by (provider, model).',
  required: ['provider', 'model', 'input_per_million', 'output_per_million'],
  properties: {
    provider: {
      type: 'string',
      tsType: 'ProviderName',
      description: 'Provider, as it appears in spans and logs.',
      enum: PROVIDERS,
    },
    model: {
      type: 'string',
      description: 'Canonical model id, e.g. claude-sonnet-4, gemini-2.5-flash, gpt-4o.',
      minLength: 1,
      maxLength: 256,
      pattern: MODEL_ID,
    },
    aliases: {
      type: 'array',
      description: 'Other ids of the same model on other routes (claude-sonnet-4@20250514, anthropic.claude-...-v1:0).',
      maxItems: 16,
      'x-kubernetes-list-type': 'set',
      items: { type: 'string', minLength: 1, maxLength: 256, pattern: MODEL_ID },
    },
    disabled: {
      type: 'boolean',
      description: 'Hide this model (a built-in default included) from pricing and from GET /v1/models.',
    },
    input_per_million: price('Price of input tokens.'),
    output_per_million: price('Price of output tokens.'),
    cached_input_per_million: price("Price of cached-read input tokens; when absent, the input price times the provider's cached_multiplier."),
    cache_write_per_million: price('Price of cache writes (Anthropic 5-minute writes); when absent, the input price.'),
    cache_write_1h_per_million: price('Price of 1-hour cache writes (Anthropic); when absent, cache_write_per_million.'),
    image_input_per_million: price('Price of image input tokens (gpt-image-*); when absent, the input price.'),
    image_prices: imagePrices,
    audio_per_minute: unitPrice('USD per minute of input audio, billed per second (whisper-1).'),
    characters_per_million: unitPrice('USD per million input characters (tts-1, tts-1-hd).'),
    long_context: {
      type: 'object',
      tsType: 'LongContextPriceSpec',
      description: 'Long-context tier: when the prompt exceeds threshold_tokens, the whole request is priced here.',
      required: ['threshold_tokens', 'input_per_million', 'output_per_million'],
      properties: {
        threshold_tokens: int('Prompt size, in tokens, above which this tier applies.', 1, 100_000_000),
        input_per_million: price('Price of input tokens in this tier.'),
        output_per_million: price('Price of output tokens in this tier.'),
        cached_input_per_million: price('Price of cached-read input tokens in this tier.'),
      },
    },
  },
  'x-kubernetes-validations': [
    {
      rule: '!has(self.aliases) || !(self.model in self.aliases)',
      message: 'aliases must not repeat the model id',
      fieldPath: '.aliases',
      reason: 'FieldValueInvalid',
    },
  ],
};

const cacheSettings = CACHE_SETTINGS_SCHEMA;

const baseUrl: SchemaNode = {
  type: 'string',
  description: "Overrides the route's default base URL (regional or private endpoints).",
  maxLength: 2048,
  'x-kubernetes-validations': [
    {
      // isURL accepts a bare path; the scheme and host checks make it an absolute http(s) URL. A query or a
      // fragment would be lost when the proxy appends the request path.
      rule:
        "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != '' && " +
        "!self.contains('?') && !self.contains('#') && !self.split('/')[2].contains('@')",
      // user:password@ would put a secret in the spec; credentials belong in Secret references
      message: 'must be an absolute http or https URL with a host and without query, fragment or user:password@',
      reason: 'FieldValueInvalid',
    },
  ],
};

const timeoutMs = int('Per-request upstream timeout (headers and idle body), milliseconds.', 100, 3_600_000);

const unmetered: SchemaNode = {
  type: 'string',
  description:
    "refuse (default): a native call on a path the route's format cannot meter is answered 403 unmetered_endpoint. allow: it is forwarded, logged, counted and its span marked unmetered (docs/routes.md#what-a-route-forwards).",
  enum: ['allow', 'refuse'],
};

// Which upstream fields a route takes follows from how it is reached: Vertex AI needs a project and a
// location, Bedrock a region, the direct APIs neither. A field a route cannot use is refused rather than
// silently ignored.
const vertexUpstream: SchemaNode = {
  type: 'object',
  tsType: 'VertexUpstreamSpec',
  description: 'A route to Vertex AI.',
  properties: {
    baseUrl,
    project: { type: 'string', description: 'Google Cloud project id.', maxLength: 128, pattern: GCP_PROJECT },
    location: {
      type: 'string',
      description: 'Vertex AI location, e.g. us-central1 or global.',
      maxLength: 63,
      pattern: SHORT_NAME,
    },
    timeoutMs,
  },
};

const bedrockUpstream: SchemaNode = {
  type: 'object',
  tsType: 'BedrockUpstreamSpec',
  description: 'A route to AWS Bedrock.',
  properties: {
    baseUrl,
    region: { type: 'string', description: 'AWS region, e.g. us-east-1.', maxLength: 63, pattern: SHORT_NAME },
    timeoutMs,
  },
};

const directUpstream: SchemaNode = {
  type: 'object',
  tsType: 'DirectUpstreamSpec',
  description: "A route to a provider's own API.",
  properties: { baseUrl, timeoutMs },
};

function upstreamFor(route: RouteName): SchemaNode {
  const { format, description } = ROUTES[route];
  const upstream = ROUTE_FORMATS[format].upstream;
  const shape = upstream === 'vertex' ? vertexUpstream : upstream === 'aws' ? bedrockUpstream : directUpstream;
  // Defined with the Secret references below; every route of a shape gets the same endpoints (ADR 0008).
  const endpoints = upstream === 'vertex' ? vertexEndpoints() : upstream === 'aws' ? bedrockEndpoints() : directEndpoints();
  return { ...shape, description: `${shape.description} /proxy/${route}: ${description}.`, properties: { ...shape.properties, endpoints, strategy: endpointStrategy, unmetered } };
}

const secretName: SchemaNode = {
  type: 'string',
  description: 'Name of a Secret in the namespace of the ProxyConfig, labelled tollgate.dev/credentials=true.',
  minLength: 1,
  maxLength: 253,
  pattern: DNS_SUBDOMAIN,
};

function secretKey(description: string, defaultKey?: string): SchemaNode {
  const node: SchemaNode = { type: 'string', description, minLength: 1, maxLength: 253, pattern: SECRET_KEY };
  return defaultKey === undefined ? node : { ...node, default: defaultKey };
}

function secretKeyRef(description: string): SchemaNode {
  return {
    type: 'object',
    tsType: 'SecretKeyRef',
    description,
    required: ['secretName', 'key'],
    properties: { secretName, key: secretKey('Key within the Secret.') },
  };
}

/** A built-in credential's Secret reference: one {secretName, key}, or one Secret with a key per secret (AWS). */
function builtInCredentialRef(credential: BuiltInCredential): SchemaNode {
  const description = credential.crdDescription ?? credential.label;
  if (!credential.grouped) return secretKeyRef(description);
  const secrets = Object.entries(credential.secrets);
  return {
    type: 'object',
    tsType: 'AwsCredentialsRef',
    description,
    required: ['secretName'],
    properties: {
      secretName,
      ...Object.fromEntries(
        secrets.map(([role, secret]) => [
          `${role}Key`,
          secretKey(secret.optional ? `Key holding a ${roleWords(role)}, for temporary credentials.` : `Key holding the ${roleWords(role)}.`, secret.defaultKey),
        ]),
      ),
    },
  };
}

/** `accessKeyId` → `access key id`, for descriptions. */
function roleWords(role: string): string {
  return role.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`);
}

const credentials: SchemaNode = {
  type: 'object',
  tsType: 'CredentialsSpec',
  description:
    'Where credentials are kept: references to Secrets in the same namespace, never the values. The operator ' +
    'reads them and hands them to sidecars over the authenticated push channel. It reads only Secrets labelled ' +
    'tollgate.dev/credentials=true (kubectl label secret NAME tollgate.dev/credentials=true).',
  // One field per built-in credential that has a secret (contracts/credential-kinds.ts).
  properties: Object.fromEntries(
    Object.values(BUILT_IN_CREDENTIALS as Readonly<Record<string, BuiltInCredential>>)
      .filter((credential) => credential.crdField !== undefined)
      .map((credential) => [credential.crdField!, builtInCredentialRef(credential)]),
  ),
};

const HEADER_NAME = "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$";
const ROUTE_NAME = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
const RESERVED_ROUTE_NAMES = [...ROUTE_NAMES, 'v1'];

/** Which settings and Secret references each credential kind takes; the others are refused for it. */
const KIND_SETTINGS: Readonly<Record<string, readonly string[]>> = { 'api-key': ['header', 'prefix'], 'google-adc': ['scopes'], 'aws-sigv4': ['service', 'region'], none: [] };

function kindRules(): readonly ValidationRule[] {
  const all = [...new Set([...Object.values(KIND_SETTINGS).flat(), ...CREDENTIAL_KIND_NAMES.flatMap((kind) => Object.keys(CREDENTIAL_KINDS[kind].secrets))])];
  return [
    ...CREDENTIAL_KIND_NAMES.map((kind) => {
      const own = new Set([...KIND_SETTINGS[kind]!, ...Object.keys(CREDENTIAL_KINDS[kind].secrets)]);
      const others = all.filter((field) => !own.has(field));
      return {
        rule: `self.kind != '${kind}' || (${others.map((field) => `!has(self.${field})`).join(' && ')})`,
        message: `credential kind ${kind} takes only ${own.size > 0 ? [...own].join(', ') : 'kind'}`,
        reason: 'FieldValueForbidden' as const,
      };
    }),
    {
      rule: "self.kind != 'aws-sigv4' || has(self.service)",
      message: 'an aws-sigv4 credential needs service (the signing name, e.g. bedrock)',
      fieldPath: '.service',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.kind != 'aws-sigv4' || has(self.accessKeyId) == has(self.secretAccessKey)",
      message: 'accessKeyId and secretAccessKey must be set together',
      fieldPath: '.secretAccessKey',
      reason: 'FieldValueInvalid',
    },
  ];
}

/** A configured route's credential: its kind's settings and a Secret reference per secret of the kind. */
const routeCredential: SchemaNode = {
  type: 'object',
  tsType: 'RouteCredentialSpec',
  description: "How the proxy authenticates to the route's upstream (docs/routes.md); keys come from Secrets, never the spec.",
  required: ['kind'],
  properties: {
    kind: { type: 'string', description: CREDENTIAL_KIND_NAMES.map((kind) => `${kind}: ${CREDENTIAL_KINDS[kind].description}`).join('; '), enum: CREDENTIAL_KIND_NAMES },
    header: { type: 'string', description: 'api-key: the header the key goes in (default authorization).', maxLength: 128, pattern: HEADER_NAME },
    prefix: { type: 'string', description: "api-key: written before the key (default 'Bearer ' in authorization, else none).", maxLength: 64 },
    scopes: {
      type: 'array',
      description: 'google-adc: OAuth scopes (default cloud-platform).',
      maxItems: 16,
      items: { type: 'string', maxLength: 256, pattern: '^https://[^\\s]+$' },
    },
    service: { type: 'string', description: 'aws-sigv4: the signing name, e.g. bedrock.', maxLength: 63, pattern: SHORT_NAME },
    region: { type: 'string', description: "aws-sigv4: the signing region; else the route's.", maxLength: 63, pattern: SHORT_NAME },
    ...Object.fromEntries(
      CREDENTIAL_KIND_NAMES.flatMap((kind) =>
        Object.keys(CREDENTIAL_KINDS[kind].secrets).map((role) => [role, secretKeyRef(`${kind}: Secret key holding the ${roleWords(role)}.`)]),
      ),
    ),
  },
  'x-kubernetes-validations': kindRules(),
};

/** An endpoint's own key: a Secret reference per secret of its route's credential kind; absent, the route's key (ADR 0008). */
function endpointCredential(tsType: string, roles: readonly string[]): SchemaNode {
  const pair = roles.includes('accessKeyId') && roles.includes('secretAccessKey');
  return {
    type: 'object',
    tsType,
    description:
      "The endpoint's own key, from a Secret: only the secrets of its route's credential kind (its header, scopes or signing service are the route's). Absent: the route's key.",
    properties: Object.fromEntries(roles.map((role) => [role, secretKeyRef(`Secret key holding the endpoint's ${roleWords(role)}.`)])),
    ...(pair
      ? {
          'x-kubernetes-validations': [
            {
              rule: 'has(self.accessKeyId) == has(self.secretAccessKey)',
              message: 'accessKeyId and secretAccessKey must be set together',
              fieldPath: '.secretAccessKey',
              reason: 'FieldValueInvalid' as const,
            },
          ],
        }
      : {}),
  };
}

/** `endpoints` of a route: its name, weight and base URL, the settings of its shape, its own key. */
function endpointList(tsType: string, settings: Readonly<Record<string, SchemaNode>>, credential: SchemaNode): SchemaNode {
  return {
    type: 'array',
    description:
      "Several keys, projects or regions sharing the route's calls, each with its own circuit breaker and cool-down (docs/routes.md); a setting an endpoint leaves out is the route's. Sidecars of releases before endpoints get the route without them.",
    minItems: 1,
    maxItems: MAX_ENDPOINTS,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['name'],
    items: {
      type: 'object',
      tsType,
      description: 'One place the route reaches: a key, a project or a region.',
      required: ['name'],
      properties: {
        name: { type: 'string', description: 'Unique within the route; names the endpoint in logs, metrics and the health view.', maxLength: 63, pattern: ROUTE_NAME },
        weight: { type: 'number', description: 'Its share of the calls (default 1).', minimum: 0, exclusiveMinimum: true, maximum: MAX_ENDPOINT_WEIGHT },
        baseUrl: { ...baseUrl, description: "Its base URL; else the route's." },
        ...settings,
        credential,
      },
    },
  };
}

const endpointStrategy: SchemaNode = {
  type: 'string',
  tsType: 'EndpointStrategy',
  description: 'How a call picks one of endpoints: weighted (smooth weighted round robin, the default) or least-outstanding (the fewest calls in flight per weight).',
  enum: ENDPOINT_STRATEGIES,
};

const vertexPlace: Readonly<Record<string, SchemaNode>> = {
  project: { type: 'string', description: "Its Google Cloud project; else the route's.", maxLength: 128, pattern: GCP_PROJECT },
  location: { type: 'string', description: "Its Vertex AI location, e.g. us-east5; else the route's.", maxLength: 63, pattern: SHORT_NAME },
};
const awsRegion: SchemaNode = { type: 'string', description: "Its AWS region; else the route's.", maxLength: 63, pattern: SHORT_NAME };
const rolesOf = (kind: keyof typeof CREDENTIAL_KINDS) => Object.keys(CREDENTIAL_KINDS[kind].secrets);
const vertexEndpoints = () => endpointList('VertexEndpointSpec', vertexPlace, endpointCredential('GoogleEndpointCredentialSpec', rolesOf('google-adc')));
const bedrockEndpoints = () => endpointList('BedrockEndpointSpec', { region: awsRegion }, endpointCredential('AwsEndpointCredentialSpec', rolesOf('aws-sigv4')));
const directEndpoints = () => endpointList('DirectEndpointSpec', {}, endpointCredential('ApiKeyEndpointCredentialSpec', rolesOf('api-key')));
/** A configured route's: any kind's secrets and settings; the validator refuses those of another kind or format. */
const routeEndpoints = endpointList(
  'RouteEndpointSpec',
  { ...vertexPlace, region: awsRegion },
  endpointCredential('RouteEndpointCredentialSpec', [...new Set(CREDENTIAL_KIND_NAMES.flatMap((kind) => rolesOf(kind)))]),
);

const routePrice: SchemaNode = {
  ...PRICE_ENTRY_SCHEMA,
  tsType: 'RoutePriceSpec',
  description: "USD per million tokens for one of the route's models, priced under the route's provider.",
  required: (PRICE_ENTRY_SCHEMA.required ?? []).filter((key) => key !== 'provider'),
  properties: Object.fromEntries(Object.entries(PRICE_ENTRY_SCHEMA.properties ?? {}).filter(([key]) => key !== 'provider')),
};

const route: SchemaNode = {
  type: 'object',
  tsType: 'ConfiguredRouteSpec',
  description: 'A route added by config: /proxy/<name>/* to an upstream speaking one of the formats the engine speaks.',
  required: ['name', 'format', 'baseUrl', 'credential'],
  properties: {
    name: { type: 'string', description: 'The <name> of /proxy/<name>/*; not a built-in route.', maxLength: 63, pattern: ROUTE_NAME },
    format: { type: 'string', description: ROUTE_FORMAT_NAMES.map((format) => `${format}: ${ROUTE_FORMATS[format].description}`).join('; '), enum: ROUTE_FORMAT_NAMES },
    baseUrl: { ...baseUrl, description: "The upstream's base URL (for OpenAI-compatible APIs, what comes before /v1)." },
    provider: { type: 'string', description: "Provider name in spans and prices; default: the route's name.", maxLength: 63, pattern: SHORT_NAME },
    credential: routeCredential,
    headers: {
      type: 'object',
      description: 'Headers sent upstream when the caller sent none (not secrets).',
      maxProperties: 32,
      additionalProperties: { type: 'string', maxLength: 1024 },
    },
    models: {
      type: 'array',
      description: 'Models /v1 sends here by their bare id (besides <name>/<model>).',
      maxItems: 256,
      'x-kubernetes-list-type': 'set',
      items: { type: 'string', minLength: 1, maxLength: 256, pattern: MODEL_ID },
    },
    prices: {
      type: 'array',
      description: "Prices of the route's models, under its provider (the pricing.models entries of the runtime config).",
      maxItems: 256,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['model'],
      items: routePrice,
    },
    project: { type: 'string', description: 'Vertex AI formats: Google Cloud project id.', maxLength: 128, pattern: GCP_PROJECT },
    location: { type: 'string', description: 'Vertex AI formats: location.', maxLength: 63, pattern: SHORT_NAME },
    region: { type: 'string', description: 'bedrock: AWS region.', maxLength: 63, pattern: SHORT_NAME },
    timeoutMs,
    endpoints: routeEndpoints,
    strategy: endpointStrategy,
    unmetered,
  },
  'x-kubernetes-validations': [
    {
      rule: `!(self.name in ${JSON.stringify(RESERVED_ROUTE_NAMES).replaceAll('"', "'")})`,
      message: `name must not be a built-in route (${RESERVED_ROUTE_NAMES.join(', ')})`,
      fieldPath: '.name',
      reason: 'FieldValueInvalid',
    },
  ],
};

const routes: SchemaNode = {
  type: 'array',
  description:
    'Routes added to the built-in ones (docs/routes.md); a name may appear once. Sidecars of releases before routes get the rest of the config without them and their prices (a ConfigWithheld Event names each such pod).',
  maxItems: 64,
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['name'],
  items: route,
};

const breaker = BREAKER_SCHEMA;
const gateway = GATEWAY_SCHEMA;

const BQ_ID = '^[A-Za-z0-9_]+$';
const GCP_PROJECT_ID = '^[a-z][a-z0-9.:-]{1,127}$';

const storage: SchemaNode = storageSchema({
  type: 'object',
  tsType: 'StorageSpec',
  description: 'Where sidecars keep trace spans (docs/span-stores.md).',
  properties: {
    kind: {
      type: 'string',
      tsType: 'StorageKind',
      description:
        "sqlite (a file in the sidecar's state volume), bigquery (a shared day-partitioned table), firestore (a shared " +
        'collection), or memory (a bounded ring, for tests and ephemeral pods). DuckDB is for the local proxy: the ' +
        'sidecar image does not carry it.',
      enum: ['sqlite', 'memory', 'bigquery', 'firestore'],
      default: 'sqlite',
    },
    bigquery: {
      type: 'object',
      tsType: 'BigQueryStorageSpec',
      description: 'kind bigquery: the table, created with its dataset when missing (partitioned by day on start_time, clustered by project_id and trace_id).',
      properties: {
        projectId: { type: 'string', description: "Google Cloud project; else the one of the pod's credentials.", maxLength: 128, pattern: GCP_PROJECT_ID },
        dataset: { type: 'string', description: 'Dataset (default tollgate).', maxLength: 1024, pattern: BQ_ID },
        table: { type: 'string', description: 'Table (default spans).', maxLength: 1024, pattern: BQ_ID },
        location: { type: 'string', description: 'Dataset location when it is created, e.g. US or europe-west1.', maxLength: 64, pattern: '^[A-Za-z0-9-]+$' },
        partitionExpirationDays: int('Drop partitions older than this many days.', 1, 36_500),
        apiEndpoint: {
          type: 'string',
          description: 'Another BigQuery endpoint (a private endpoint or an emulator).',
          maxLength: 2048,
          pattern: '^https?://[^\\s/?#@]+(/[^\\s?#]*)?$',
        },
        credentials: secretKeyRef("Secret key holding a service account key (JSON); else the pod's Application Default Credentials (Workload Identity)."),
      },
    },
    firestore: {
      type: 'object',
      tsType: 'FirestoreStorageSpec',
      description: 'kind firestore: one document per span in a collection.',
      properties: {
        projectId: { type: 'string', description: "Google Cloud project; else the one of the pod's credentials.", maxLength: 128, pattern: GCP_PROJECT_ID },
        databaseId: { type: 'string', description: 'Database (default (default)).', maxLength: 63, pattern: '^(\\(default\\)|[a-z][a-z0-9-]{2,62})$' },
        collection: { type: 'string', description: 'Collection (default spans).', maxLength: 128, pattern: '^[A-Za-z0-9_-]+$' },
        credentials: secretKeyRef("Secret key holding a service account key (JSON); else the pod's Application Default Credentials (Workload Identity)."),
      },
    },
  },
});

const metrics = METRICS_SCHEMA;
const tracing = TRACING_SCHEMA;
// The section's own schema says what the API server can check (a weight above 0, at least one target, the
// triggers); which routes exist, and that a target is no alias, the operator checks (Ready=False naming the field).
const models: SchemaNode = {
  ...MODELS_SCHEMA,
  description: `${MODELS_SCHEMA.description} Sidecars of releases before model aliases get the rest of the config without them (a ConfigWithheld Event names each such pod).`,
};

const spec: SchemaNode = {
  type: 'object',
  tsType: 'ProxyConfigSpec',
  description: 'Runtime settings for the sidecars of this namespace; every section is optional and overrides built-in defaults.',
  properties: {
    pricing: {
      type: 'object',
      tsType: 'PricingSpec',
      description: 'Price overrides.',
      properties: {
        models: {
          type: 'array',
          description: 'One entry per (provider, model); a pair may appear only once.',
          maxItems: MAX_MODELS,
          // A list-map keyed by (provider, model): the API server refuses a repeated pair at its index, and
          // server-side apply merges entries by that key.
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['provider', 'model'],
          items: PRICE_ENTRY_SCHEMA,
        },
      },
    },
    cache: {
      type: 'object',
      tsType: 'CacheByProviderSpec',
      description: 'Prompt-cache settings per provider.',
      properties: Object.fromEntries(PROVIDERS.map((p) => [p, cacheSettings])),
    },
    upstreams: {
      type: 'object',
      tsType: 'UpstreamsSpec',
      description: 'Upstream endpoint per route (the <route> of /proxy/<route>/*).',
      properties: Object.fromEntries(ROUTE_NAMES.map((r) => [r, upstreamFor(r)])),
    },
    routes,
    credentials,
    breaker,
    storage,
    gateway,
    audit: auditSpec(secretKeyRef),
    // The sidecar's section plus the operator's enforcement fields (ADR 1602).
    provenance: { ...PROVENANCE_SCHEMA, properties: { ...PROVENANCE_SCHEMA.properties, ...ENFORCEMENT_PROPERTIES } },
    metrics,
    tracing,
    models,
  },
};

export const condition: SchemaNode = {
  type: 'object',
  tsType: 'Condition',
  description: 'One aspect of the current state (metav1.Condition).',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      description: 'Condition type in CamelCase, e.g. Ready.',
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: { type: 'string', tsType: 'ConditionStatus', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: {
      type: 'integer',
      format: 'int64',
      description: 'The metadata.generation the condition was set for.',
      minimum: 0,
    },
    lastTransitionTime: {
      type: 'string',
      format: 'date-time',
      description: 'When status last changed.',
    },
    reason: {
      type: 'string',
      description: 'Programmatic reason in CamelCase.',
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    },
    message: { type: 'string', description: 'Human-readable details.', maxLength: 32768 },
  },
};

const sidecarCount = (description: string) => int(description, 0, 1_000_000);

/** One alias target as the sidecars report it (docs/decisions/0724). */
const aliasTargetStatus: SchemaNode = {
  type: 'object',
  tsType: 'AliasTargetStatus',
  description: "One of the alias's targets, as the sidecars running this config see it.",
  required: ['route', 'model', 'priority', 'state'],
  properties: {
    route: { type: 'string', description: 'The route of the target.', maxLength: 63 },
    model: { type: 'string', description: 'The model id the route receives.', maxLength: 256 },
    priority: int('Its priority (0 is tried first).', 0, 16),
    state: {
      type: 'string',
      tsType: 'AliasTargetState',
      description:
        "The worst any reporting sidecar sees: circuit_open (its route's breaker is open), cooling_down (it answered 429 and waits out its " +
        'Retry-After), healthy; unknown while no sidecar reports.',
      enum: ['healthy', 'cooling_down', 'circuit_open', 'unknown'],
    },
    healthy: sidecarCount('Sidecars that see it healthy.'),
    coolingDown: sidecarCount('Sidecars that see it cooling down.'),
    circuitOpen: sidecarCount("Sidecars that see its route's breaker open."),
  },
};

const aliasStatus: SchemaNode = {
  type: 'object',
  tsType: 'ModelAliasStatus',
  description: 'One alias of spec.models as the sidecars running this config report it.',
  required: ['alias', 'targets'],
  properties: {
    alias: { type: 'string', description: 'The alias (a key of spec.models).', maxLength: 256 },
    sidecars: sidecarCount('Sidecars reporting the alias.'),
    servedBelowFirstPriority: sidecarCount("Sidecars whose last call of the alias was answered below the alias's first priority."),
    fallbackSince: {
      type: 'string',
      format: 'date-time',
      description: 'Since when at least one sidecar has been serving the alias below its first priority; absent while none is.',
    },
    degraded: {
      type: 'boolean',
      description:
        "True once fallbackSince is older than the operator's --alias-degraded-after (default 3 minutes): an AliasDegraded Warning Event " +
        'said so, and an AliasRecovered Event says when it is false again.',
    },
    targets: { type: 'array', description: 'Its targets, in the order of spec.models.', maxItems: 16, items: aliasTargetStatus },
  },
};

const aliasesStatus: SchemaNode = {
  type: 'array',
  description: "Each model alias of the running config: its targets' health across the sidecars, and whether calls fall back (docs/kubernetes.md).",
  maxItems: 256,
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['alias'],
  items: aliasStatus,
};

const status: SchemaNode = {
  type: 'object',
  tsType: 'ProxyConfigStatus',
  description: 'Written by the operator through the status subresource.',
  properties: {
    observedGeneration: {
      type: 'integer',
      format: 'int64',
      description: 'The metadata.generation the operator last processed.',
      minimum: 0,
    },
    conditions: {
      type: 'array',
      description:
        'Ready: True once the spec is accepted and rendered; False with a reason otherwise. AuditDelivering (when spec.audit is set): ' +
        'False while a sidecar reports an audit sink dead-lettering or dropping events.',
      maxItems: 16,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      items: condition,
    },
    sidecars: {
      type: 'object',
      tsType: 'SidecarCounts',
      description: 'Sidecars using this ProxyConfig.',
      properties: {
        connected: int('Sidecars with an open push stream.', 0, 1_000_000),
        current: int('Connected sidecars that acknowledged configVersion.', 0, 1_000_000),
      },
    },
    configVersion: {
      type: 'string',
      description: 'Version of the config snapshot last pushed to sidecars.',
      maxLength: 128,
    },
    models: aliasesStatus,
  },
};

export const PROXY_CONFIG_CRD: CrdSource = {
  group: 'tollgate.dev',
  kind: 'ProxyConfig',
  listKind: 'ProxyConfigList',
  plural: 'proxyconfigs',
  singular: 'proxyconfig',
  shortNames: ['pxc'],
  categories: ['tollgate'],
  scope: 'Namespaced',
  versions: [
    {
      name: 'v1alpha1',
      served: true,
      storage: true,
      statusSubresource: true,
      schema: {
        type: 'object',
        tsType: 'ProxyConfig',
        description:
          'Pricing, upstreams, credential references, circuit breaker and span storage for the Tollgate sidecars of a ' +
          'namespace. Pods pick one with the annotation tollgate.dev/proxy-config; else the one named default.',
        properties: {
          apiVersion: { type: 'string', description: 'tollgate.dev/v1alpha1' },
          kind: { type: 'string', description: 'ProxyConfig' },
          metadata: { type: 'object', tsType: 'ObjectMeta' },
          spec,
          status,
        },
      },
      printerColumns: [
        { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
        { name: 'Sidecars', type: 'integer', jsonPath: '.status.sidecars.connected', description: 'Connected sidecars' },
        {
          name: 'Current',
          type: 'integer',
          jsonPath: '.status.sidecars.current',
          description: 'Sidecars running the current config version',
          priority: 1,
        },
        { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    },
  ],
};
