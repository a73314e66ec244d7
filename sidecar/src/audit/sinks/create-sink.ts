// The one place that turns a sink's config into a sink, by kind. Each kind's module is imported when a sink of
// that kind is configured: the BigQuery SDK and the gRPC client cost memory a jsonl-only fan-out need not pay.

import type { Logger } from 'pino';
import { AUDIT_DEFAULTS, type AuditSinkConfig } from '../../../../contracts/audit-config.ts';
import type { AuditSink } from './audit-sink.ts';

export async function createSink(config: AuditSinkConfig, context: { sender: string; logger: Logger }): Promise<AuditSink> {
  switch (config.kind) {
    case 'jsonl': {
      const { JsonlSink } = await import('./jsonl-sink.ts');
      return new JsonlSink({
        name: config.name,
        path: config.path,
        rotate: { ...AUDIT_DEFAULTS.rotate, ...config.rotate },
      });
    }
    case 'grpc': {
      const { GrpcSink } = await import('./grpc-sink.ts');
      return new GrpcSink({
        name: config.name,
        address: config.address,
        ...(config.tls ? { tls: config.tls } : {}),
        ...(config.bearerTokenFile ? { bearerTokenFile: config.bearerTokenFile } : {}),
        timeoutMs: config.timeoutMs ?? AUDIT_DEFAULTS.timeoutMs,
        maxBatch: config.batchSize ?? AUDIT_DEFAULTS.grpcBatch,
        sender: context.sender,
      });
    }
    case 'bigquery': {
      const { BigQuerySink } = await import('./bigquery-sink.ts');
      return new BigQuerySink({
        name: config.name,
        dataset: config.dataset,
        table: config.table,
        ...(config.projectId ? { projectId: config.projectId } : {}),
        ...(config.location ? { location: config.location } : {}),
        ...(config.apiEndpoint ? { apiEndpoint: config.apiEndpoint } : {}),
        ...(config.credentialsFile ? { credentialsFile: config.credentialsFile } : {}),
        ...(config.partitionExpirationDays ? { partitionExpirationDays: config.partitionExpirationDays } : {}),
        maxBatch: config.batchSize ?? AUDIT_DEFAULTS.bigqueryBatch,
        sender: context.sender,
        logger: context.logger,
      });
    }
  }
}
