// The AuditDelivering condition of a ProxyConfig with spec.audit, from the latest audit report of each of its
// sidecars (proto AuditReport): False while any sidecar's sink dead-letters or drops events, True when every
// reporting sidecar delivers, Unknown before any has reported. Pure.

import type { AuditReport } from '../../../contracts/push-protocol.ts';

export const AUDIT_CONDITION = 'AuditDelivering';

export interface SidecarAuditReport {
  pod: string;
  report: AuditReport;
}

export interface AuditVerdict {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export function auditVerdict(reports: readonly SidecarAuditReport[]): AuditVerdict {
  if (reports.length === 0) return { status: 'Unknown', reason: 'NoReports', message: 'no sidecar has reported audit delivery yet' };
  const failing = new Map<string, { pods: string[]; lastError: string }>();
  let disconnected = 0;
  for (const { pod, report } of reports) {
    if (!report.streamConnected) disconnected++;
    for (const sink of report.sinks) {
      if (!sink.failing) continue;
      const entry = failing.get(sink.name) ?? { pods: [], lastError: '' };
      entry.pods.push(pod);
      entry.lastError ||= sink.lastError;
      failing.set(sink.name, entry);
    }
  }
  const streams = disconnected ? `; ${disconnected} of ${reports.length} sidecars not connected to the Tetragon agent` : '';
  if (failing.size > 0) {
    const parts = [...failing].map(
      ([sink, f]) =>
        `sink ${sink}: ${f.pods.length} of ${reports.length} sidecars dead-lettering or dropping (${f.pods.slice(0, 3).join(', ')}${f.pods.length > 3 ? ', ...' : ''})${f.lastError ? `, last error: ${f.lastError}` : ''}`,
    );
    return { status: 'False', reason: 'SinkFailing', message: parts.join('; ') + streams };
  }
  const sinks = [...new Set(reports.flatMap((r) => r.report.sinks.map((s) => s.name)))];
  return { status: 'True', reason: 'Delivering', message: `${reports.length} sidecar(s) delivering to ${sinks.join(', ')}${streams}` };
}
