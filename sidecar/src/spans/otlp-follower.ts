// Keeps the OTLP span export in step with the live config: off until the config (tracing.otlp) or the
// OTEL_EXPORTER_OTLP_* variables name a collector, replaced when its settings change (the old exporter flushes
// what it holds while the new one takes new spans), and told about every finished call by the call meter.

import type { Logger } from 'pino';
import type { Attributes } from '@opentelemetry/api';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { ConfigStore } from '../config/config-store.ts';
import type { CallObserver, CallTimings } from '../metering/call-meter.ts';
import { OtlpSpanExport, resolveOtlpSettings, type OtlpStats } from './otlp-export.ts';
import type { Span } from './span.ts';

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
    ...(env.TOLLGATE_POD_NAME ? { 'k8s.pod.name': env.TOLLGATE_POD_NAME } : {}),
    ...(env.TOLLGATE_POD_NAMESPACE ? { 'k8s.namespace.name': env.TOLLGATE_POD_NAMESPACE } : {}),
  };
}

export class OtlpFollower implements CallObserver {
  readonly #opts: OtlpFollowerOptions;
  #current: OtlpSpanExport | null = null;
  #key = 'null';
  /** What replaced exporters did, folded in once their last flush is over. */
  #retired = { exported: 0, dropped: 0, failed: 0 };
  /** Exporters flushing their last spans: still counted live, so no total ever goes down. */
  #retiring = new Map<OtlpSpanExport, Promise<void>>();
  #unsubscribe: () => void;

  constructor(opts: OtlpFollowerOptions) {
    this.#opts = opts;
    this.#apply(opts.store.get());
    this.#unsubscribe = opts.store.subscribe((snapshot) => this.#apply(snapshot.config));
  }

  callFinished(span: Span, _model: string | null, _timings: CallTimings, sampled: boolean): void {
    this.#current?.record(span, sampled);
  }

  /** Totals over every exporter this process has had. */
  stats(): OtlpStats {
    const total: OtlpStats = { ...this.#retired, queued: 0 };
    for (const exporter of [...this.#retiring.keys(), ...(this.#current ? [this.#current] : [])]) {
      const s = exporter.stats();
      total.exported += s.exported;
      total.dropped += s.dropped;
      total.failed += s.failed;
      total.queued += s.queued;
    }
    return total;
  }

  get active(): boolean {
    return this.#current !== null;
  }

  /** Sends what is queued (bounded by the export timeout) and stops following the config. */
  async close(): Promise<void> {
    this.#unsubscribe();
    this.#retire();
    await Promise.all(this.#retiring.values());
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
    this.#current = new OtlpSpanExport({
      settings,
      logger: this.#opts.logger,
      resource: this.#opts.resource ?? processResource(this.#opts.env, config.mode),
      ...(this.#opts.version !== undefined ? { version: this.#opts.version } : {}),
    });
    this.#opts.logger.info({ target: settings.url ?? 'from OTEL_EXPORTER_OTLP_*', protocol: settings.protocol, maxQueueSize: settings.maxQueueSize }, 'otlp span export on');
  }

  #retire(): void {
    const old = this.#current;
    this.#current = null;
    if (old === null) return;
    const done = old.shutdown().then(() => {
      const { exported, dropped, failed } = old.stats();
      this.#retired.exported += exported;
      this.#retired.dropped += dropped;
      this.#retired.failed += failed;
      this.#retiring.delete(old);
    });
    this.#retiring.set(old, done);
  }
}
