// The sidecar's audit delivery in the shape the config push carries to the operator (proto AuditReport). A
// sink is `failing` when it dead-lettered or dropped events since the previous report, so the operator's
// AuditDelivering condition turns True again by itself once a sink recovers.

import type { AuditReport } from '../../../contracts/push-protocol.ts';
import type { AuditController } from './audit-controller.ts';

export class AuditReporter {
  #audit: AuditController;
  #previous = new Map<string, number>();

  constructor(audit: AuditController) {
    this.#audit = audit;
  }

  /** Undefined while no audit fan-out runs. */
  report(): AuditReport | undefined {
    const health = this.#audit.health();
    if (!health.enabled) return undefined;
    const sinks = health.sinks.map((s) => {
      const lost = s.deadLettered + s.dropped;
      const failing = lost > (this.#previous.get(s.name) ?? 0);
      this.#previous.set(s.name, lost);
      return {
        name: s.name,
        kind: s.kind,
        received: s.received,
        delivered: s.delivered,
        dropped: s.dropped,
        deadLettered: s.deadLettered,
        retried: s.retried,
        queueDepth: s.queueDepth,
        failing,
        lastError: (s.lastError ?? '').slice(0, 512),
      };
    });
    return { sinks, streamConnected: health.source.connected, streamDisconnects: health.source.disconnects };
  }
}
