// spec.audit of ProxyConfig: the Tetragon audit fan-out of the namespace's sidecars (sidecar/src/audit). It
// mirrors the runtime config's `audit` section with two deliberate differences: sink credentials are Secret
// references (delivered over the push channel, never in the spec), and there is no event filter, because a
// sidecar always asks the node's agent for its own pod's events only; a namespace's config must not widen
// that to other pods (docs/decisions/1002).

import type { SchemaNode } from './crd-schema.ts';

const SINK_NAME = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
const HOST_PORT = '^(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$';
const SOURCE_ADDRESS = '^(unix:///[^\\s]+|(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5})$';
const BQ_ID = '^[A-Za-z0-9_]+$';

function int(description: string, minimum: number, maximum: number, format: 'int32' | 'int64' = 'int32'): SchemaNode {
  return { type: 'integer', format, description, minimum, maximum };
}

/** `secretKeyRef` is ProxyConfig's own SecretKeyRef node factory, so the generated type is shared. */
export function auditSpec(secretKeyRef: (description: string) => SchemaNode): SchemaNode {
  const sink: SchemaNode = {
    type: 'object',
    tsType: 'AuditSinkSpec',
    description: 'One place audit events are delivered to, with its own bounded queue and worker.',
    required: ['name', 'kind'],
    properties: {
      name: { type: 'string', description: 'Names the sink in logs, counters and status.', maxLength: 63, pattern: SINK_NAME },
      kind: {
        type: 'string',
        tsType: 'AuditSinkKind',
        description: 'jsonl (protojson lines in a file), grpc (a tollgate.audit.v1.AuditSink collector) or bigquery (a day-partitioned table).',
        enum: ['jsonl', 'grpc', 'bigquery'],
      },
      batchSize: int('Largest batch per write.', 1, 10_000),
      timeoutMs: int('Per write attempt, milliseconds.', 100, 600_000),
      path: { type: 'string', description: 'jsonl: the file (on a writable volume of the pod).', minLength: 1, maxLength: 4096 },
      rotate: {
        type: 'object',
        tsType: 'AuditRotateSpec',
        description: 'jsonl: rotate by size.',
        properties: {
          maxBytes: int('Rotate when the file would grow past this.', 1024, 1_099_511_627_776, 'int64'),
          keep: int('Rotated files kept (path.1 ... path.keep).', 0, 100),
        },
      },
      address: { type: 'string', description: 'grpc: the collector, host:port.', maxLength: 512, pattern: HOST_PORT },
      tls: {
        type: 'object',
        tsType: 'AuditTlsSpec',
        description: 'grpc: use TLS (present, even empty). Without caCertificate the system roots are trusted.',
        properties: {
          serverName: { type: 'string', description: 'Overrides the name checked in the server certificate.', maxLength: 253 },
          caCertificate: secretKeyRef('Secret key holding the PEM CA certificate of the collector.'),
        },
      },
      bearerToken: secretKeyRef('grpc: Secret key holding a token sent as authorization: Bearer <token>.'),
      projectId: { type: 'string', description: 'bigquery: Google Cloud project; else the one of the credentials.', maxLength: 128, pattern: '^[a-z][a-z0-9.:-]{1,127}$' },
      dataset: { type: 'string', description: 'bigquery: dataset (created when missing).', maxLength: 1024, pattern: BQ_ID },
      table: { type: 'string', description: 'bigquery: table (created when missing, partitioned by day).', maxLength: 1024, pattern: BQ_ID },
      location: { type: 'string', description: 'bigquery: dataset location, e.g. US or europe-west1.', maxLength: 64, pattern: '^[A-Za-z0-9-]+$' },
      partitionExpirationDays: int('bigquery: drop partitions older than this.', 1, 36_500),
      credentials: secretKeyRef("bigquery: Secret key holding a service account key (JSON); else the pod's Application Default Credentials."),
    },
    'x-kubernetes-validations': [
      { rule: "self.kind != 'jsonl' || has(self.path)", message: 'a jsonl sink needs path', fieldPath: '.path', reason: 'FieldValueRequired' },
      { rule: "self.kind != 'grpc' || has(self.address)", message: 'a grpc sink needs address', fieldPath: '.address', reason: 'FieldValueRequired' },
      { rule: "self.kind != 'bigquery' || (has(self.dataset) && has(self.table))", message: 'a bigquery sink needs dataset and table', reason: 'FieldValueRequired' },
      { rule: "self.kind == 'jsonl' || (!has(self.path) && !has(self.rotate))", message: 'path and rotate apply to jsonl sinks only', reason: 'FieldValueForbidden' },
      {
        rule: "self.kind == 'grpc' || (!has(self.address) && !has(self.tls) && !has(self.bearerToken))",
        message: 'address, tls and bearerToken apply to grpc sinks only',
        reason: 'FieldValueForbidden',
      },
      {
        rule: "self.kind == 'bigquery' || (!has(self.projectId) && !has(self.dataset) && !has(self.table) && !has(self.location) && !has(self.partitionExpirationDays) && !has(self.credentials))",
        message: 'projectId, dataset, table, location, partitionExpirationDays and credentials apply to bigquery sinks only',
        reason: 'FieldValueForbidden',
      },
    ],
  };

  return {
    type: 'object',
    tsType: 'AuditSpec',
    description:
      "Forward the Tetragon runtime-security events of each sidecar's own pod to several sinks. The sidecar reads the node's " +
      'Tetragon agent (the hostPath socket when the chart allows it, else the node IP on port 54321).',
    required: ['sinks'],
    properties: {
      enabled: { type: 'boolean', description: 'false keeps the section but turns the fan-out off.' },
      source: {
        type: 'object',
        tsType: 'AuditSourceSpec',
        description: "Where the Tetragon agent listens; events are always filtered to the sidecar's own pod.",
        properties: {
          address: { type: 'string', description: 'unix:///var/run/tetragon/tetragon.sock or host:port.', maxLength: 512, pattern: SOURCE_ADDRESS },
        },
      },
      sinks: {
        type: 'array',
        description: 'Each sink gets every event; a slow or dead sink never delays the others.',
        minItems: 1,
        maxItems: 16,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
        items: sink,
      },
      queue: {
        type: 'object',
        tsType: 'AuditQueueSpec',
        description: "Each sink's bounded queue.",
        properties: {
          maxEvents: int('Events waiting per sink; beyond this they are dropped and counted.', 1, 1_000_000),
          maxBytes: int(
            'Bytes of events (as the agent sent them) a sink holds, queued and in flight; beyond this they are dropped and counted. Default 16 MiB.',
            1024,
            1_099_511_627_776,
            'int64',
          ),
          whenFull: { type: 'string', description: 'Which events a full queue drops (by events or by bytes).', enum: ['drop_newest', 'drop_oldest'] },
        },
      },
      retry: {
        type: 'object',
        tsType: 'AuditRetrySpec',
        description: 'Retries of a failed write (exponential backoff with full jitter) before the batch is dead-lettered.',
        properties: {
          maxAttempts: int('Attempts per batch, the first included.', 1, 100),
          initialBackoffMs: int('First backoff cap, milliseconds.', 1, 600_000),
          maxBackoffMs: int('Largest backoff cap, milliseconds.', 1, 3_600_000),
        },
        'x-kubernetes-validations': [
          {
            rule: '!has(self.initialBackoffMs) || !has(self.maxBackoffMs) || self.maxBackoffMs >= self.initialBackoffMs',
            message: 'maxBackoffMs must not be less than initialBackoffMs',
            fieldPath: '.maxBackoffMs',
            reason: 'FieldValueInvalid',
          },
        ],
      },
      deadLetter: {
        type: 'object',
        tsType: 'AuditDeadLetterSpec',
        description: "Batches given up on go to a file in the sidecar's state directory (at most 16 MiB of its 64 MiB volume).",
        properties: { maxBytes: int('Size bound of the dead-letter file; past it events are dropped and counted.', 1024, 1_099_511_627_776, 'int64') },
      },
      drainTimeoutMs: int('On shutdown, how long the sinks may take to empty their queues.', 0, 600_000),
    },
  };
}
