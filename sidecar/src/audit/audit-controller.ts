// Keeps the audit fan-out in step with the live config: starts it when an `audit` section appears (config
// file or operator push), replaces it when the section changes (the old one drains first), stops it when
// the section goes away. Changes are applied one at a time, in order.

import type { Logger } from 'pino';
import type { ConfigStore } from '../config/config-store.ts';
import type { AuditConfig } from '../../../contracts/audit-config.ts';
import type { AuditPlacement } from './audit-placement.ts';
import type { AuditHealth, AuditRuntime, EventTap } from './audit-runtime.ts';
import type { SinkStatus } from './sink-worker.ts';

export class AuditController {
  #placement: AuditPlacement;
  #logger: Logger;
  #runtime: AuditRuntime | undefined;
  #applied = 'null';
  #chain: Promise<void> = Promise.resolve();
  #unsubscribe: () => void;
  #closed = false;
  readonly #tap: EventTap | undefined;

  /** `tap` also gets every event the fan-out reads: provenance shares the one stream (ADR 1600). */
  constructor(store: ConfigStore, placement: AuditPlacement, logger: Logger, tap?: EventTap) {
    this.#placement = placement;
    this.#logger = logger;
    this.#tap = tap;
    this.#apply(store.get().audit);
    this.#unsubscribe = store.subscribe((snapshot) => this.#apply(snapshot.config.audit));
  }

  get runtime(): AuditRuntime | undefined {
    return this.#runtime;
  }

  health(): AuditHealth | { enabled: false } {
    return this.#runtime?.health() ?? { enabled: false };
  }

  /** Resolves once every config change seen so far has been applied. */
  settled(): Promise<void> {
    return this.#chain;
  }

  #apply(config: AuditConfig | undefined): void {
    const wanted = config?.enabled ? config : undefined;
    const key = JSON.stringify(wanted ?? null);
    if (key === this.#applied || this.#closed) return;
    this.#applied = key;
    this.#chain = this.#chain.then(async () => {
      if (this.#closed) return;
      if (this.#runtime) {
        this.#logger.info('audit config changed: draining the running fan-out before starting the new one');
        await this.#runtime.stop();
        this.#runtime = undefined;
      }
      if (wanted) {
        try {
          // Loaded on the first audit section only: the fan-out brings gRPC and protobufjs (ADR 0003).
          const { AuditRuntime } = await import('./audit-runtime.ts');
          this.#runtime = await AuditRuntime.create(wanted, this.#placement, this.#logger, this.#tap);
          this.#runtime.start();
        } catch (error) {
          this.#logger.error({ err: (error as Error).message }, 'audit fan-out could not start');
        }
      }
    });
  }

  /** SIGTERM: stop reading, drain within the configured deadline, log totals. */
  async shutdown(): Promise<SinkStatus[] | undefined> {
    this.#closed = true;
    this.#unsubscribe();
    await this.#chain;
    const totals = await this.#runtime?.stop();
    return totals;
  }
}
