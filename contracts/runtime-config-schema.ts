// The sections of the runtime config that a ProxyConfig spells the same way, defined once (ADR 0602): the CRD's
// schema is built from these nodes (crds/proxy-config.ts), their TypeScript types are generated from them
// (contracts/generated/runtime-config-types.ts), and the config validator checks file, API and snapshot input
// against them (schema-validate.ts). A bound, an enum or a cross-field rule changed here changes all three.

import { describeV1Routes, v1Routes } from './routes.ts';
import type { FieldRelation, SchemaNode, ValidationRule } from './schema-node.ts';

export function int(description: string, minimum: number, maximum: number, format: 'int32' | 'int64' = 'int32'): SchemaNode {
  return { type: 'integer', format, description, minimum, maximum };
}

/** The CEL rule the API server checks for a relation: the same rule the runtime validator applies. */
function celRule(relation: FieldRelation): ValidationRule {
  const { field, notGreaterThan: than } = relation;
  return {
    rule: `!has(self.${field}) || !has(self.${than}) || self.${field} <= self.${than}`,
    message: `${field} must not exceed ${than}`,
    fieldPath: `.${field}`,
    reason: 'FieldValueInvalid',
  };
}

/** An object node with cross-field relations, carried both as `relations` (runtime) and as CEL (CRD). */
function withRelations(node: SchemaNode, relations: readonly FieldRelation[]): SchemaNode {
  return { ...node, relations, 'x-kubernetes-validations': [...(node['x-kubernetes-validations'] ?? []), ...relations.map(celRule)] };
}

export const CACHE_SETTINGS_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'CacheSpec',
  description: "The provider's prompt cache.",
  properties: {
    ttl_seconds: int('Cache time-to-live the proxy assumes and reports, seconds.', 0, 604_800),
    cached_multiplier: {
      type: 'number',
      description: 'Cached-read price as a fraction of the input price, for entries without cached_input_per_million.',
      minimum: 0,
      maximum: 1,
    },
  },
};

export const BREAKER_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'BreakerSpec',
  description: 'Circuit breaker per upstream route.',
  properties: {
    consecutiveFailures: int('Consecutive failures that open the breaker.', 1, 10_000),
    failureRatio: {
      type: 'number',
      description: 'Failure ratio over the rolling window that opens the breaker, once minimumRequests is reached.',
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 1,
    },
    minimumRequests: int('Requests in the window before failureRatio applies.', 1, 1_000_000),
    windowMs: int('Rolling window, milliseconds.', 100, 3_600_000),
    openMs: int('How long the breaker stays open before one half-open probe, milliseconds.', 10, 3_600_000),
  },
};

export const GATEWAY_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'GatewaySpec',
  description: 'Which route serves each provider on the OpenAI-compatible /v1/chat/completions endpoint.',
  properties: {
    anthropicRoute: { type: 'string', description: `${describeV1Routes('anthropic')}.`, enum: v1Routes('anthropic') },
    googleRoute: { type: 'string', description: `${describeV1Routes('google')}.`, enum: v1Routes('google') },
  },
};

/** The span writer's tuning, the part of `storage` every source spells alike; the store kinds differ (duckdb is local only). */
export const STORAGE_TUNING_PROPERTIES: Readonly<Record<string, SchemaNode>> = {
  bufferSize: int('Spans waiting to be written; beyond this they are dropped, counted and logged.', 1, 1_000_000),
  batchSize: int('Spans written per batch.', 1, 10_000),
  flushIntervalMs: int('Longest wait before a partial batch is written, milliseconds.', 1, 60_000),
  maxSpans: int('Keep at most this many spans in the sidecar (sqlite), dropping the oldest; 0 keeps all.', 0, 1_000_000_000),
};

/** A batch larger than the buffer could never fill: refused rather than clamped. */
export const STORAGE_RELATIONS: readonly FieldRelation[] = [{ field: 'batchSize', notGreaterThan: 'bufferSize' }];

export function storageSchema(node: SchemaNode): SchemaNode {
  return withRelations({ ...node, properties: { ...node.properties, ...STORAGE_TUNING_PROPERTIES } }, STORAGE_RELATIONS);
}

export const METRICS_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'MetricsSpec',
  description: 'Prometheus metrics of the sidecars (docs/observability.md).',
  properties: {
    perUser: {
      type: 'object',
      tsType: 'PerUserMetricsSpec',
      description: 'Per-user series (tollgate_user_*): off by default, since user ids come from request headers.',
      properties: {
        enabled: { type: 'boolean', description: 'Give each user its own series.' },
        maxUsers: int('Users with series of their own; later users are counted as other.', 1, 10_000),
      },
    },
  },
};

export const TRACING_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'TracingSpec',
  description: 'Export of each call span to an OpenTelemetry collector; OTEL_EXPORTER_OTLP_* variables fill what is not set here.',
  properties: {
    otlp: withRelations(
      {
        type: 'object',
        tsType: 'OtlpSpec',
        description: 'OTLP exporter settings (docs/observability.md#otlp-traces).',
        properties: {
          endpoint: {
            type: 'string',
            description: 'Collector base URL, e.g. http://otel-collector.observability:4318 (HTTP appends /v1/traces). No credentials: those go in OTEL_EXPORTER_OTLP_HEADERS.',
            maxLength: 2048,
            pattern: '^https?://[^@/?#]+(/[^?#]*)?$',
          },
          protocol: { type: 'string', description: 'http/protobuf (default) or grpc.', enum: ['http/protobuf', 'grpc'] },
          timeoutMs: int('Export timeout per batch, milliseconds.', 100, 300_000),
          compression: { type: 'string', description: 'gzip or none.', enum: ['gzip', 'none'] },
          maxQueueSize: int('Spans waiting or being sent at most; more are dropped and counted.', 1, 1_000_000),
          maxExportBatchSize: int('Spans per export request.', 1, 100_000),
          scheduledDelayMs: int('Longest wait before a partial batch is sent, milliseconds.', 1, 600_000),
        },
      },
      [{ field: 'maxExportBatchSize', notGreaterThan: 'maxQueueSize' }],
    ),
  },
};

/** What may make an alias's call go on to its next target (docs/openai-gateway.md#model-aliases-and-fallback). */
export const FALLBACK_TRIGGERS = ['rate_limited', 'server_error', 'unreachable', 'timeout', 'circuit_open'] as const;

/** A model id as callers send it and providers name it: also an alias's name and a target's model. */
export const MODEL_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$';

export const ALIAS_TARGET_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'AliasTargetSpec',
  description: 'One place an alias is served: a route and the model id that route receives.',
  required: ['route', 'model'],
  properties: {
    route: {
      type: 'string',
      description: 'A route /v1 can call: a built-in one (gamma-direct, gamma, gamma-cloudb, beta, …) or one of spec.routes.',
      // maxLength as the pattern bounds it: the API server costs a string by its maxLength (ADR 0601).
      maxLength: 63,
      pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$',
      hint: 'must be a route name',
    },
    model: { type: 'string', description: 'The model id sent to that route, in its own form.', maxLength: 256, pattern: MODEL_ID_PATTERN, hint: 'must be a model id' },
    priority: int('Lower is tried first (default 0); a priority is used only while every target above it is failing.', 0, 16),
    weight: {
      type: 'number',
      description: 'Share of the calls among the targets of one priority (default 1).',
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 1000,
    },
  },
};

export const MODEL_ALIAS_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'ModelAliasSpec',
  description: 'A model name callers send, served by an ordered list of targets with fallback between them.',
  required: ['targets'],
  properties: {
    targets: { type: 'array', description: 'Where the alias is served, by priority and weight.', minItems: 1, maxItems: 16, items: ALIAS_TARGET_SCHEMA },
    attempts: int('Upstream attempts per call in all, the first included (default: one per target).', 1, 10),
    timeoutMs: int('One deadline for the whole call, every attempt and wait included, milliseconds (default 120000).', 1_000, 3_600_000),
    fallbackOn: {
      type: 'array',
      description: `Failures that go on to the next target (default all): ${FALLBACK_TRIGGERS.join(', ')}. Other 4xx never do.`,
      maxItems: FALLBACK_TRIGGERS.length,
      items: { type: 'string', tsType: 'FallbackTrigger', enum: FALLBACK_TRIGGERS },
      'x-kubernetes-list-type': 'set',
    },
  },
};

export const MODELS_SCHEMA: SchemaNode = {
  type: 'object',
  description: 'Model aliases: the name callers send as "model" on /v1, mapped to targets (docs/openai-gateway.md).',
  maxProperties: 256,
  additionalProperties: MODEL_ALIAS_SCHEMA,
};

/** The sections whose runtime types are generated from these nodes. */
export const SHARED_SECTION_SCHEMAS: readonly SchemaNode[] = [CACHE_SETTINGS_SCHEMA, BREAKER_SCHEMA, GATEWAY_SCHEMA, METRICS_SCHEMA, TRACING_SCHEMA, MODEL_ALIAS_SCHEMA];
