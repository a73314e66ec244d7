// Keeps the OTLP span export in step with the live config: off until the config (tracing.otlp) or the
// OTEL_EXPORTER_OTLP_* variables name a collector, replaced when its settings change (the old exporter flushes
// what it holds while the new one takes new spans), and told about every finished call by the call meter.
//
// The exporter's module (the OpenTelemetry SDK, its OTLP exporters and their protobuf encoders) is imported the first
// time export is turned on, never in a process without a collector (ADR 0003). Spans that finish while it loads
// wait in a buffer bounded by the queue's size; beyond it they are dropped, counted and logged.

import type { Logger } from 'pino';
import type { Attributes } from '@opentelemetry/api';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { ConfigStore } from '../config/config-store.ts';
import type { CallObserver, CallTimings } from './call-observer.ts';
import type { OtlpSpanExport } from './otlp-export.ts';
import { resolveOtlpSettings, type OtlpSettings, type OtlpStats } from './otlp-settings.ts';
import type { Span } from './span.ts';
import { PROXY_ENV } from '../../../contracts/sidecar-env.ts';

type ExportModule = typeof import('./otlp-export.ts');

/** At most one `span processor buffer full` line per this interval; the rest are counted in the next one or at close. */
export const OTLP_DROP_LOG_INTERVAL_MS = 10_000;

/** Export turned on while the exporter's module loads: the spans that finish meanwhile, up to the queue's size. */
interface PendingExport {
  settings: OtlpSettings;
  held: Span[];
  dropped: number;
  /** Settles once the exporter exists (or the module failed to load); the export is current or retired by then. */
  ready: Promise<void>;
}

export interface OtlpFollowerOptions {
  store: ConfigStore;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  resource?: Attributes;
  version?: string;
}

/** The resource of this process's spans: a pod's name and namespace when the webhook set them. */
export function processResource(env: NodeJS.ProcessEnv, mode: RuntimeConfig['mode']): Attributes {
  return {
    'service.name': mode === 'server' ? 'tollgate-server' : 'tollgate-proxy',
    ...(env[PROXY_ENV.podName] ? { 'k8s.pod.name': env[PROXY_ENV.podName] } : {}),
    ...(env[PROXY_ENV.podNamespace] ? { 'k8s.namespace.name': env[PROXY_ENV.podNamespace] } : {}),
  };
}

export class OtlpFollower implements CallObserver {
  readonly #opts: OtlpFollowerOptions;
  #module: ExportModule | null = null;
  #loading: Promise<ExportModule> | null = null;
  #current: OtlpSpanExport | null = null;
  #pending: PendingExport | null = null;
  /** Pending exports whose module has not loaded yet, the current one and any replaced meanwhile. */
  #unsettled = new Set<PendingExport>();
  #key = 'null';
  /** What replaced exporters did, folded in once their last flush is over. */
  #retired = { exported: 0, dropped: 0, failed: 0 };
  /** Exporters flushing their last spans: still counted live, so no total ever goes down. */
  #retiring = new Map<OtlpSpanExport, Promise<void>>();
  /** Of settled pending exports: spans dropped because the buffer was full, and held spans lost to a failed load. */
  #heldLost = { dropped: 0, failed: 0 };
  #dropsAtLastLog = 0;
  #lastDropLog = -Infinity;
  #dropLogTimer: NodeJS.Timeout | null = null;
  #unsubscribe: () => void;

  constructor(opts: OtlpFollowerOptions) {
    this.#opts = opts;
    this.#apply(opts.store.get());
    this.#unsubscribe = opts.store.subscribe((snapshot) => this.#apply(snapshot.config));
  }

  /** An attempt's span goes out like a call's, as its child. */
  attemptFinished(span: Span, sampled: boolean): void {
    this.#export(span, sampled);
  }

  callFinished(span: Span, _model: string | null, _timings: CallTimings, sampled: boolean): void {
    this.#export(span, sampled);
  }

  #export(span: Span, sampled: boolean): void {
    if (this.#current !== null) {
      if (!this.#current.record(span, sampled)) this.#dropNoted();
      return;
    }
    const pending = this.#pending;
    if (pending === null || !sampled) return;
    if (pending.held.length < pending.settings.maxQueueSize) {
      pending.held.push(span);
    } else {
      pending.dropped++;
      this.#dropNoted();
    }
  }

  /** Totals over every exporter this process has had. */
  stats(): OtlpStats {
    const total: OtlpStats = {
      exported: this.#retired.exported,
      dropped: this.#retired.dropped + this.#heldLost.dropped,
      failed: this.#retired.failed + this.#heldLost.failed,
      queued: 0,
    };
    for (const exporter of [...this.#retiring.keys(), ...(this.#current ? [this.#current] : [])]) {
      const s = exporter.stats();
      total.exported += s.exported;
      total.dropped += s.dropped;
      total.failed += s.failed;
      total.queued += s.queued;
    }
    for (const pending of this.#unsettled) {
      total.dropped += pending.dropped;
      total.queued += pending.held.length;
    }
    return total;
  }

  get active(): boolean {
    return this.#current !== null || this.#pending !== null;
  }

  /** Sends what is queued or held (bounded by the export timeout) and stops following the config. */
  async close(): Promise<void> {
    this.#unsubscribe();
    if (this.#dropLogTimer !== null) clearTimeout(this.#dropLogTimer);
    this.#retire();
    await Promise.all([...this.#unsettled].map((pending) => pending.ready));
    await Promise.all(this.#retiring.values());
    this.#reportDrops(true);
  }

  #apply(config: RuntimeConfig): void {
    const settings = resolveOtlpSettings(config.tracing?.otlp, this.#opts.env);
    const key = JSON.stringify(settings);
    if (key === this.#key) return;
    this.#key = key;
    this.#retire();
    if (settings === null) {
      this.#opts.logger.info('otlp span export off');
      return;
    }
    const resource = this.#opts.resource ?? processResource(this.#opts.env, config.mode);
    if (this.#module !== null) {
      this.#current = this.#open(this.#module, settings, resource);
    } else {
      const pending: PendingExport = { settings, held: [], dropped: 0, ready: Promise.resolve() };
      this.#pending = pending;
      this.#unsettled.add(pending);
      // Never rejects: a module that cannot load or an exporter that cannot start is logged, its spans counted.
      pending.ready = this.#load()
        .then((module) => this.#settle(pending, this.#open(module, settings, resource)))
        .catch((error: unknown) => this.#loadFailed(pending, error));
    }
    this.#opts.logger.info({ target: settings.url ?? 'from OTEL_EXPORTER_OTLP_*', protocol: settings.protocol, maxQueueSize: settings.maxQueueSize }, 'otlp span export on');
  }

  #load(): Promise<ExportModule> {
    this.#loading ??= import('./otlp-export.ts').then(
      (module) => (this.#module = module),
      (error: unknown) => {
        this.#loading = null; // the next config that turns export on tries again
        throw error;
      },
    );
    return this.#loading;
  }

  #open(module: ExportModule, settings: OtlpSettings, resource: Attributes): OtlpSpanExport {
    return new module.OtlpSpanExport({
      settings,
      logger: this.#opts.logger,
      resource,
      ...(this.#opts.version !== undefined ? { version: this.#opts.version } : {}),
    });
  }

  /** The exporter of a pending export exists: it takes the held spans, then new ones (or flushes them, if replaced meanwhile). */
  #settle(pending: PendingExport, exporter: OtlpSpanExport): void {
    // A fresh exporter's queue takes them all: the buffer is bounded by the same size.
    for (const span of pending.held) exporter.record(span, true);
    this.#heldLost.dropped += pending.dropped;
    pending.held = [];
    pending.dropped = 0;
    this.#unsettled.delete(pending);
    if (this.#pending === pending) {
      this.#pending = null;
      this.#current = exporter;
    } else {
      this.#retireExporter(exporter);
    }
  }

  #loadFailed(pending: PendingExport, error: unknown): void {
    this.#heldLost.failed += pending.held.length;
    this.#heldLost.dropped += pending.dropped;
    this.#opts.logger.error({ err: (error as Error).message, spans: pending.held.length }, 'otlp span export failed to load');
    pending.held = [];
    pending.dropped = 0;
    this.#unsettled.delete(pending);
    if (this.#pending === pending) {
      this.#pending = null;
      this.#key = 'null'; // the next config change tries again
    }
  }

  #retire(): void {
    // A pending export is settled by its load: its exporter is retired then, flushing what was held.
    this.#pending = null;
    const old = this.#current;
    this.#current = null;
    if (old !== null) this.#retireExporter(old);
  }

  #retireExporter(old: OtlpSpanExport): void {
    const done = old.shutdown().then(() => {
      const { exported, dropped, failed } = old.stats();
      this.#retired.exported += exported;
      this.#retired.dropped += dropped;
      this.#retired.failed += failed;
      this.#retiring.delete(old);
    });
    this.#retiring.set(old, done);
  }

  #dropNoted(): void {
    const wait = this.#lastDropLog + OTLP_DROP_LOG_INTERVAL_MS - Date.now();
    if (wait <= 0) {
      this.#reportDrops(false);
    } else if (this.#dropLogTimer === null) {
      this.#dropLogTimer = setTimeout(() => {
        this.#dropLogTimer = null;
        this.#reportDrops(false);
      }, wait).unref();
    }
  }

  /** Logs the drops not yet reported: every drop is in some line's count, at the latest the one at close. */
  #reportDrops(final: boolean): void {
    const dropped = this.stats().dropped;
    const unreported = dropped - this.#dropsAtLastLog;
    if (unreported === 0 || (!final && Date.now() - this.#lastDropLog < OTLP_DROP_LOG_INTERVAL_MS)) return;
    this.#lastDropLog = Date.now();
    this.#dropsAtLastLog = dropped;
    this.#opts.logger.warn({ sink: 'otlp', dropped, droppedSinceLastLog: unreported }, 'span processor buffer full');
  }
}
