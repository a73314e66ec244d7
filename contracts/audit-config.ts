// The `audit` section of the runtime config: its types, defaults and validation. The same parser checks the
// config file, operator snapshots and the CRD render, so a bad value is refused everywhere with the field's
// name. A later config layer replaces the whole section (a list of sinks does not merge field by field).

import { ConfigError } from './config-error.ts';
import { definedFields } from './json-record.ts';

export interface AuditAllowFilter {
  /** Pod namespaces (exact). */
  namespace?: string[];
  /** RE2 expressions matched against the pod name. */
  podRegex?: string[];
}

export interface AuditSourceConfig {
  /** `unix:///var/run/tetragon/tetragon.sock` or `host:port`; in a pod, the node's agent by default. */
  address?: string;
  /** Which events to ask the agent for; in a pod, only the pod's own by default. */
  allow?: AuditAllowFilter[];
}

interface SinkCommon {
  name: string;
  /** Largest batch per write. */
  batchSize?: number;
  /** Per write attempt, milliseconds. */
  timeoutMs?: number;
}

export interface JsonlSinkConfig extends SinkCommon {
  kind: 'jsonl';
  path: string;
  rotate?: { maxBytes?: number; keep?: number };
}

export interface GrpcSinkConfig extends SinkCommon {
  kind: 'grpc';
  address: string;
  /** Present (even `{}`): TLS, with an optional CA file and server name. */
  tls?: { caFile?: string; serverName?: string };
  /** File holding a bearer token sent as `authorization: Bearer ...`; re-read on every call. */
  bearerTokenFile?: string;
}

export interface BigQuerySinkConfig extends SinkCommon {
  kind: 'bigquery';
  projectId?: string;
  dataset: string;
  table: string;
  location?: string;
  apiEndpoint?: string;
  /** Service account key file; else Application Default Credentials. */
  credentialsFile?: string;
  partitionExpirationDays?: number;
}

export type AuditSinkConfig = JsonlSinkConfig | GrpcSinkConfig | BigQuerySinkConfig;

export interface AuditConfig {
  /** false turns a section from an earlier layer off. */
  enabled: boolean;
  source: AuditSourceConfig;
  sinks: AuditSinkConfig[];
  /**
   * Per sink. maxBytes bounds the agent's bytes of the events a sink holds, queued and in flight together;
   * past either bound the queue drops per whenFull.
   */
  queue: { maxEvents: number; maxBytes: number; whenFull: 'drop_newest' | 'drop_oldest' };
  retry: { maxAttempts: number; initialBackoffMs: number; maxBackoffMs: number };
  /** path: default <state dir>/audit-dead-letter.jsonl in a pod, ./tollgate-audit-dead-letter.jsonl elsewhere. */
  deadLetter: { path?: string; maxBytes: number };
  /** How long SIGTERM waits for the sinks to empty their queues before dead-lettering the rest. */
  drainTimeoutMs: number;
  /** Names this Tollgate to collectors; default `<namespace>/<pod>` in a pod, the host name elsewhere. */
  sender?: string;
}

export const AUDIT_DEFAULTS = {
  // 16 MiB: at ~1.5 KiB an event, 20 s of a busy pod's 500 events/s; the image's V8 heap is 64 MB.
  queue: { maxEvents: 10_000, maxBytes: 16 * 1024 * 1024, whenFull: 'drop_newest' as const },
  retry: { maxAttempts: 8, initialBackoffMs: 200, maxBackoffMs: 30_000 },
  deadLetter: { maxBytes: 100 * 1024 * 1024 },
  drainTimeoutMs: 10_000,
  rotate: { maxBytes: 100 * 1024 * 1024, keep: 5 },
  grpcBatch: 500,
  bigqueryBatch: 500,
  timeoutMs: 10_000,
};

export const AUDIT_SINK_KINDS = ['jsonl', 'grpc', 'bigquery'] as const;
export const MAX_AUDIT_SINKS = 16;
const SINK_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;
const SOURCE_ADDRESS = /^(unix:\/\/\/\S+|(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5})$/;
const BQ_ID = /^[A-Za-z0-9_]{1,1024}$/;

type Obj = Record<string, unknown>;

function object(value: unknown, field: string): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(field, 'must be an object');
  return value as Obj;
}

function keys(value: Obj, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${allowed.join(', ')})`);
  }
}

function str(value: Obj, key: string, field: string, opts: { required?: boolean; pattern?: RegExp; hint?: string } = {}): string | undefined {
  const v = value[key];
  if (v === undefined) {
    if (opts.required) throw new ConfigError(`${field}.${key}`, 'is required');
    return undefined;
  }
  if (typeof v !== 'string' || v.length === 0 || v.length > 4096) throw new ConfigError(`${field}.${key}`, 'must be a non-empty string');
  if (opts.pattern && !opts.pattern.test(v)) throw new ConfigError(`${field}.${key}`, opts.hint ?? `must match ${opts.pattern}`);
  return v;
}

function int(value: Obj, key: string, field: string, min: number, max: number): number | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(`${field}.${key}`, `must be an integer at least ${min} and at most ${max} (got ${JSON.stringify(v)})`);
  }
  return v;
}

function strings(value: unknown, field: string, check?: (s: string, f: string) => void): string[] {
  if (!Array.isArray(value) || value.length > 64) throw new ConfigError(field, 'must be a list of at most 64 strings');
  return value.map((s, i) => {
    if (typeof s !== 'string' || s.length === 0 || s.length > 253) throw new ConfigError(`${field}[${i}]`, 'must be a non-empty string of at most 253 characters');
    check?.(s, `${field}[${i}]`);
    return s;
  });
}

function checkRegex(pattern: string, field: string): void {
  try {
    new RegExp(pattern, 'u');
  } catch (error) {
    throw new ConfigError(field, `is not a valid regular expression: ${(error as Error).message}`);
  }
}

const defined = definedFields;

function parseSource(input: unknown, field: string): AuditSourceConfig {
  const v = object(input, field);
  keys(v, field, ['address', 'allow']);
  const source: AuditSourceConfig = {};
  const address = str(v, 'address', field, { pattern: SOURCE_ADDRESS, hint: 'must be unix:///path/to/tetragon.sock or host:port' });
  if (address) source.address = address;
  if (v.allow !== undefined) {
    if (!Array.isArray(v.allow) || v.allow.length > 16) throw new ConfigError(`${field}.allow`, 'must be a list of at most 16 filters');
    source.allow = v.allow.map((entry, i) => {
      const f = `${field}.allow[${i}]`;
      const filter = object(entry, f);
      keys(filter, f, ['namespace', 'podRegex']);
      if (filter.namespace === undefined && filter.podRegex === undefined) throw new ConfigError(f, 'must set namespace, podRegex or both');
      return defined({
        namespace: filter.namespace === undefined ? undefined : strings(filter.namespace, `${f}.namespace`),
        podRegex: filter.podRegex === undefined ? undefined : strings(filter.podRegex, `${f}.podRegex`, checkRegex),
      });
    });
  }
  return source;
}

function parseSink(input: unknown, field: string): AuditSinkConfig {
  const v = object(input, field);
  const kind = v.kind;
  if (typeof kind !== 'string' || !(AUDIT_SINK_KINDS as readonly string[]).includes(kind)) {
    throw new ConfigError(`${field}.kind`, `must be one of ${AUDIT_SINK_KINDS.join(', ')} (got ${JSON.stringify(kind)})`);
  }
  const common = ['name', 'kind', 'batchSize', 'timeoutMs'];
  const base = {
    name: str(v, 'name', field, { required: true, pattern: SINK_NAME, hint: 'must be a lowercase DNS label such as siem or collector' })!,
    batchSize: int(v, 'batchSize', field, 1, 10_000),
    timeoutMs: int(v, 'timeoutMs', field, 100, 600_000),
  };
  if (kind === 'jsonl') {
    keys(v, field, [...common, 'path', 'rotate']);
    let rotate: JsonlSinkConfig['rotate'];
    if (v.rotate !== undefined) {
      const r = object(v.rotate, `${field}.rotate`);
      keys(r, `${field}.rotate`, ['maxBytes', 'keep']);
      rotate = defined({ maxBytes: int(r, 'maxBytes', `${field}.rotate`, 1024, 2 ** 40), keep: int(r, 'keep', `${field}.rotate`, 0, 100) });
    }
    return defined({ ...base, kind: 'jsonl' as const, path: str(v, 'path', field, { required: true })!, rotate });
  }
  if (kind === 'grpc') {
    keys(v, field, [...common, 'address', 'tls', 'bearerTokenFile']);
    let tls: GrpcSinkConfig['tls'];
    if (v.tls !== undefined) {
      const t = object(v.tls, `${field}.tls`);
      keys(t, `${field}.tls`, ['caFile', 'serverName']);
      tls = defined({ caFile: str(t, 'caFile', `${field}.tls`), serverName: str(t, 'serverName', `${field}.tls`) });
    }
    return defined({
      ...base,
      kind: 'grpc' as const,
      address: str(v, 'address', field, { required: true, pattern: HOST_PORT, hint: 'must be host:port' })!,
      tls,
      bearerTokenFile: str(v, 'bearerTokenFile', field),
    });
  }
  keys(v, field, [...common, 'projectId', 'dataset', 'table', 'location', 'apiEndpoint', 'credentialsFile', 'partitionExpirationDays']);
  return defined({
    ...base,
    kind: 'bigquery' as const,
    projectId: str(v, 'projectId', field, { pattern: /^[a-z][a-z0-9.:-]{1,127}$/, hint: 'must be a Google Cloud project id' }),
    dataset: str(v, 'dataset', field, { required: true, pattern: BQ_ID, hint: 'must be letters, digits and underscores' })!,
    table: str(v, 'table', field, { required: true, pattern: BQ_ID, hint: 'must be letters, digits and underscores' })!,
    location: str(v, 'location', field, { pattern: /^[A-Za-z0-9-]{1,64}$/, hint: 'must be a location such as US, EU or us-central1' }),
    apiEndpoint: str(v, 'apiEndpoint', field, { pattern: /^https?:\/\/[^\s/?#@]+\/?$/, hint: 'must be an http(s) URL of a host, e.g. http://127.0.0.1:9050' }),
    credentialsFile: str(v, 'credentialsFile', field),
    partitionExpirationDays: int(v, 'partitionExpirationDays', field, 1, 36_500),
  });
}

/** Checks an `audit` section whole; fills in defaults. Throws ConfigError naming the first bad field. */
export function parseAuditConfig(input: unknown, field = 'audit'): AuditConfig {
  const v = object(input, field);
  keys(v, field, ['enabled', 'source', 'sinks', 'queue', 'retry', 'deadLetter', 'drainTimeoutMs', 'sender']);
  if (v.enabled !== undefined && typeof v.enabled !== 'boolean') throw new ConfigError(`${field}.enabled`, 'must be true or false');
  const enabled = v.enabled !== false;
  if (v.sinks === undefined && enabled) throw new ConfigError(`${field}.sinks`, 'is required (at least one sink)');
  const rawSinks = v.sinks ?? [];
  if (!Array.isArray(rawSinks) || (enabled && rawSinks.length === 0) || rawSinks.length > MAX_AUDIT_SINKS) {
    throw new ConfigError(`${field}.sinks`, `must be a list of 1 to ${MAX_AUDIT_SINKS} sinks`);
  }
  const sinks = rawSinks.map((s, i) => parseSink(s, `${field}.sinks[${i}]`));
  const seen = new Map<string, number>();
  sinks.forEach((s, i) => {
    const first = seen.get(s.name);
    if (first !== undefined) throw new ConfigError(`${field}.sinks[${i}].name`, `repeats ${JSON.stringify(s.name)} (already at ${field}.sinks[${first}])`);
    seen.set(s.name, i);
  });

  const config: AuditConfig = {
    enabled,
    source: v.source === undefined ? {} : parseSource(v.source, `${field}.source`),
    sinks,
    queue: { ...AUDIT_DEFAULTS.queue },
    retry: { ...AUDIT_DEFAULTS.retry },
    deadLetter: { ...AUDIT_DEFAULTS.deadLetter },
    drainTimeoutMs: int(v, 'drainTimeoutMs', field, 0, 600_000) ?? AUDIT_DEFAULTS.drainTimeoutMs,
  };
  if (v.queue !== undefined) {
    const q = object(v.queue, `${field}.queue`);
    keys(q, `${field}.queue`, ['maxEvents', 'maxBytes', 'whenFull']);
    config.queue.maxEvents = int(q, 'maxEvents', `${field}.queue`, 1, 1_000_000) ?? config.queue.maxEvents;
    config.queue.maxBytes = int(q, 'maxBytes', `${field}.queue`, 1024, 2 ** 40) ?? config.queue.maxBytes;
    if (q.whenFull !== undefined) {
      if (q.whenFull !== 'drop_newest' && q.whenFull !== 'drop_oldest') {
        throw new ConfigError(
          `${field}.queue.whenFull`,
          `must be drop_newest or drop_oldest (got ${JSON.stringify(q.whenFull)}); the stream is never paused, so there is no block`,
        );
      }
      config.queue.whenFull = q.whenFull;
    }
  }
  if (v.retry !== undefined) {
    const r = object(v.retry, `${field}.retry`);
    keys(r, `${field}.retry`, ['maxAttempts', 'initialBackoffMs', 'maxBackoffMs']);
    Object.assign(
      config.retry,
      defined({
        maxAttempts: int(r, 'maxAttempts', `${field}.retry`, 1, 100),
        initialBackoffMs: int(r, 'initialBackoffMs', `${field}.retry`, 1, 600_000),
        maxBackoffMs: int(r, 'maxBackoffMs', `${field}.retry`, 1, 3_600_000),
      }),
    );
    if (config.retry.maxBackoffMs < config.retry.initialBackoffMs) {
      throw new ConfigError(`${field}.retry.maxBackoffMs`, 'must not be less than initialBackoffMs');
    }
  }
  if (v.deadLetter !== undefined) {
    const d = object(v.deadLetter, `${field}.deadLetter`);
    keys(d, `${field}.deadLetter`, ['path', 'maxBytes']);
    const path = str(d, 'path', `${field}.deadLetter`);
    if (path) config.deadLetter.path = path;
    config.deadLetter.maxBytes = int(d, 'maxBytes', `${field}.deadLetter`, 1024, 2 ** 40) ?? config.deadLetter.maxBytes;
  }
  const sender = str(v, 'sender', field, { pattern: /^[A-Za-z0-9._/:-]{1,253}$/, hint: 'must be letters, digits and . _ / : -' });
  if (sender) config.sender = sender;
  return config;
}
