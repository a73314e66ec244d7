// The bypass detector's entries on their way to the operator, which records them as ProviderBypass Events on the
// pod (ADR 1605). The queue is bounded: while the operator is away entries wait here, and past the bound new ones
// are dropped (the log line and the metric of ADR 1601 still saw them), counted, and said in a log line at most
// once a minute. Strings are cut to what the operator accepts, so one long path never costs the whole report.
// Until an operator link opens it (a proxy outside a pod has none) it keeps nothing.

import type { Logger } from 'pino';
import { BYPASS_REPORT_LIMITS, type BypassEntryMessage } from '../../../contracts/push-protocol.ts';

/** Entries kept while the operator is not connected: a minute of 256 distinct processes, far more than a pod runs. */
export const BYPASS_QUEUE_LIMIT = 256;
const DROP_LOG_INTERVAL_MS = 60_000;

export class BypassReportQueue {
  readonly #logger: Logger;
  readonly #limit: number;
  readonly #now: () => number;
  #entries: BypassEntryMessage[] = [];
  #dropped = 0;
  #droppedLogged = 0;
  #lastDropLogAt = Number.NEGATIVE_INFINITY;
  #open = false;

  constructor(logger: Logger, opts: { limit?: number; now?: () => number } = {}) {
    this.#logger = logger;
    this.#limit = opts.limit ?? BYPASS_QUEUE_LIMIT;
    this.#now = opts.now ?? Date.now;
  }

  /** The operator link reads the queue from now on. */
  open(): void {
    this.#open = true;
  }

  add(entry: BypassEntryMessage): void {
    if (!this.#open) return;
    if (this.#entries.length >= this.#limit) {
      this.#dropped++;
      this.#logDrops();
      return;
    }
    this.#entries.push({
      ...entry,
      provider: entry.provider.slice(0, BYPASS_REPORT_LIMITS.provider),
      binary: entry.binary.slice(0, BYPASS_REPORT_LIMITS.binary),
      container: entry.container.slice(0, BYPASS_REPORT_LIMITS.container),
      destination: entry.destination.slice(0, BYPASS_REPORT_LIMITS.destination),
    });
  }

  /** The oldest `max` entries, taken out of the queue. */
  take(max: number = BYPASS_REPORT_LIMITS.entries): BypassEntryMessage[] {
    return this.#entries.splice(0, max);
  }

  get size(): number {
    return this.#entries.length;
  }

  /** Entries dropped because the queue was full, since the sidecar started. */
  get dropped(): number {
    return this.#dropped;
  }

  #logDrops(): void {
    const now = this.#now();
    if (now - this.#lastDropLogAt < DROP_LOG_INTERVAL_MS) return;
    this.#logger.warn({ dropped: this.#dropped - this.#droppedLogged, queued: this.#entries.length }, 'bypass reports dropped: the queue to the operator is full');
    this.#lastDropLogAt = now;
    this.#droppedLogged = this.#dropped;
  }
}
