// The operator's Prometheus metrics, served on its health port (docs/observability.md#operator). Names follow
// controller-runtime's (reconciles by result, work queue depth and latency) with the tollgate_operator_
// prefix, plus what only this operator has: connected sidecars, pushed/acknowledged/rejected snapshots.

import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { MetricsExposition } from '../../../contracts/metrics-exposition.ts';

import type { WorkQueueObserver } from '../kube/work-queue.ts';
import type { BypassEntryOutcome, BypassEventCounter } from '../push/bypass-events.ts';
import type { SnapshotCounter } from '../push/sidecar-registry.ts';

export type ReconcileOutcome = 'success' | 'error' | 'requeue_after';

/** Read at scrape time. */
export interface OperatorMetricSources {
  leader?: () => boolean;
  queueDepth?: () => number;
  connectedSidecars?: () => number;
}

const QUEUE_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60];

export class OperatorMetrics implements WorkQueueObserver, SnapshotCounter, BypassEventCounter {
  readonly registry: Registry<RegistryContentType> = new Registry();
  readonly exposition = new MetricsExposition(this.registry);
  #sources: OperatorMetricSources = {};
  readonly #reconciles: Counter<'result'>;
  readonly #reconcileTime: Histogram;
  readonly #queueWait: Histogram;
  readonly #retries: Counter;
  readonly #pushed: Counter;
  readonly #acked: Counter;
  readonly #nacked: Counter;
  readonly #bypass: Counter<'outcome'>;

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#reconciles = new Counter({
      name: 'tollgate_operator_reconciles_total',
      help: 'ProxyConfig reconciles by result: success, error (retried with backoff), requeue_after (periodic).',
      labelNames: ['result'],
      registers,
    });
    for (const result of ['success', 'error', 'requeue_after']) this.#reconciles.inc({ result }, 0);
    this.#reconcileTime = new Histogram({
      name: 'tollgate_operator_reconcile_duration_seconds',
      help: 'Time a worker spent on one ProxyConfig.',
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.#queueWait = new Histogram({
      name: 'tollgate_operator_workqueue_queue_duration_seconds',
      help: 'Time a key waited in the work queue before a worker took it.',
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.#retries = new Counter({ name: 'tollgate_operator_workqueue_retries_total', help: 'Keys queued again after a failed reconcile.', registers });
    this.#pushed = new Counter({ name: 'tollgate_operator_snapshots_pushed_total', help: 'Config snapshots sent to sidecars (one per sidecar and version).', registers });
    this.#acked = new Counter({ name: 'tollgate_operator_snapshots_acked_total', help: 'Config snapshots sidecars applied and acknowledged.', registers });
    this.#nacked = new Counter({ name: 'tollgate_operator_snapshots_nacked_total', help: 'Config snapshots sidecars rejected.', registers });
    this.#bypass = new Counter({
      name: 'tollgate_operator_bypass_events_total',
      help: 'Bypass entries sidecars reported, by what became of them: recorded (a ProviderBypass Event on the pod), rate_limited, refused (the report exceeded the bounds).',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of ['recorded', 'rate_limited', 'refused']) this.#bypass.inc({ outcome }, 0);
    const gauge = (name: string, help: string, read: () => number | undefined) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read() ?? 0);
        },
      });
    gauge('tollgate_operator_leader', '1 while this replica holds the leader Lease (and reconciles and serves the push port).', () => (this.#sources.leader?.() ? 1 : 0));
    gauge('tollgate_operator_workqueue_depth', 'ProxyConfig keys waiting for a worker.', () => this.#sources.queueDepth?.());
    gauge('tollgate_operator_connected_sidecars', "Sidecars connected to this replica's push stream.", () => this.#sources.connectedSidecars?.());
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  watch(sources: OperatorMetricSources): void {
    this.#sources = { ...this.#sources, ...sources };
  }

  waited(seconds: number): void {
    this.#queueWait.observe(seconds);
  }

  reconciled(outcome: ReconcileOutcome, seconds: number): void {
    this.#reconciles.inc({ result: outcome });
    this.#reconcileTime.observe(seconds);
  }

  retried(): void {
    this.#retries.inc();
  }

  snapshotPushed(): void {
    this.#pushed.inc();
  }

  snapshotAcked(): void {
    this.#acked.inc();
  }

  snapshotNacked(): void {
    this.#nacked.inc();
  }

  bypassEntries(outcome: BypassEntryOutcome, count: number): void {
    this.#bypass.inc({ outcome }, count);
  }
}
