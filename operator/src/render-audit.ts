// spec.audit → the runtime config's audit section plus the Secret keys its sinks need. Pure. Sink secrets
// travel like the route credentials, by name in the snapshot (`audit.<sink>.<field>`); the sidecar writes
// each to a file and points the sink at it (sidecar/src/config/snapshot-cache.ts).

import type { AuditSinkSpec, AuditSpec, SecretKeyRef } from '../../crds/index.ts';
import { auditCredentialName, type AuditCredentialName } from '../../contracts/snapshot-credentials.ts';

export interface AuditCredentialRef extends SecretKeyRef {
  name: AuditCredentialName;
  field: string;
}

function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function sinkDraft(sink: AuditSinkSpec): Record<string, unknown> {
  const common = { name: sink.name, kind: sink.kind, batchSize: sink.batchSize, timeoutMs: sink.timeoutMs };
  switch (sink.kind) {
    case 'jsonl':
      return defined({ ...common, path: sink.path, rotate: sink.rotate ? defined({ ...sink.rotate }) : undefined });
    case 'grpc':
      return defined({ ...common, address: sink.address, tls: sink.tls ? defined({ serverName: sink.tls.serverName }) : undefined });
    default:
      return defined({
        ...common,
        projectId: sink.projectId,
        dataset: sink.dataset,
        table: sink.table,
        location: sink.location,
        partitionExpirationDays: sink.partitionExpirationDays,
      });
  }
}

export function renderAudit(spec: AuditSpec): { draft: Record<string, unknown>; refs: AuditCredentialRef[] } {
  const refs: AuditCredentialRef[] = [];
  spec.sinks.forEach((sink, i) => {
    const at = `audit.sinks[${i}]`;
    if (sink.bearerToken) refs.push({ name: auditCredentialName(sink.name, 'bearerToken'), field: `${at}.bearerToken`, ...sink.bearerToken });
    if (sink.tls?.caCertificate) refs.push({ name: auditCredentialName(sink.name, 'caCertificate'), field: `${at}.tls.caCertificate`, ...sink.tls.caCertificate });
    if (sink.credentials) refs.push({ name: auditCredentialName(sink.name, 'credentials'), field: `${at}.credentials`, ...sink.credentials });
  });
  const draft = defined({
    enabled: spec.enabled,
    source: spec.source?.address ? { address: spec.source.address } : undefined,
    sinks: spec.sinks.map(sinkDraft),
    queue: spec.queue ? defined({ ...spec.queue }) : undefined,
    retry: spec.retry ? defined({ ...spec.retry }) : undefined,
    deadLetter: spec.deadLetter ? defined({ ...spec.deadLetter }) : undefined,
    drainTimeoutMs: spec.drainTimeoutMs,
  });
  return { draft, refs };
}

/** Secret names an audit spec draws on. */
export function auditSecrets(spec: AuditSpec | undefined): string[] {
  return (spec?.sinks ?? []).flatMap((s) => [s.bearerToken?.secretName, s.tls?.caCertificate?.secretName, s.credentials?.secretName]).filter((n): n is string => !!n);
}
