// When and how spans are exported over OTLP, decided from the config and the OTEL_* variables. Kept apart from
// the exporter (otlp-export.ts) so that a process without a collector never loads the OpenTelemetry SDK, its
// exporters and their protobuf and gRPC stacks (ADR 0003): the follower imports the exporter only once these
// settings turn export on.

import type { OtlpConfig } from '../../../contracts/runtime-config.ts';

export type OtlpProtocol = 'http/protobuf' | 'grpc';

/** What the exporter needs; resolveOtlpSettings fills it from the config and the OTEL_* variables. */
export interface OtlpSettings {
  /**
   * The full URL spans are sent to: for HTTP the traces path (`…/v1/traces`), for gRPC the collector's
   * address. Undefined: the exporter takes it from OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself.
   */
  url?: string;
  protocol: OtlpProtocol;
  timeoutMs?: number;
  compression?: 'gzip' | 'none';
  /** Spans waiting or being sent at most; more are dropped and counted. */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
}

export const OTLP_DEFAULTS = { maxQueueSize: 2048, maxExportBatchSize: 512, scheduledDelayMs: 1000 } as const;

/**
 * Export is on when the config names an endpoint, or when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT is set (and OTEL_TRACES_EXPORTER is not `none`). The config wins over the
 * variables field by field, as the OpenTelemetry spec has code-level settings win over the environment.
 */
export function resolveOtlpSettings(config: OtlpConfig | undefined, env: NodeJS.ProcessEnv): OtlpSettings | null {
  const fromEnv = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!config?.endpoint && (!fromEnv || env.OTEL_TRACES_EXPORTER?.trim() === 'none')) return null;
  const envProtocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  const protocol: OtlpProtocol = config?.protocol ?? (envProtocol === 'grpc' ? 'grpc' : 'http/protobuf');
  const settings: OtlpSettings = {
    protocol,
    maxQueueSize: config?.maxQueueSize ?? OTLP_DEFAULTS.maxQueueSize,
    maxExportBatchSize: Math.min(config?.maxExportBatchSize ?? OTLP_DEFAULTS.maxExportBatchSize, config?.maxQueueSize ?? OTLP_DEFAULTS.maxQueueSize),
    scheduledDelayMs: config?.scheduledDelayMs ?? OTLP_DEFAULTS.scheduledDelayMs,
  };
  if (config?.endpoint) {
    // The endpoint is a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT: HTTP appends the signal's path.
    settings.url = protocol === 'grpc' ? config.endpoint : `${config.endpoint.replace(/\/+$/, '')}/v1/traces`;
  }
  if (config?.timeoutMs !== undefined) settings.timeoutMs = config.timeoutMs;
  if (config?.compression !== undefined) settings.compression = config.compression;
  return settings;
}

/** What became of the spans handed to the exporter. */
export interface OtlpStats {
  /** Accepted by the collector. */
  exported: number;
  /** Lost before sending: the queue was full. */
  dropped: number;
  /** Lost in sending: the collector refused the batch, or could not be reached in time. */
  failed: number;
  /** Waiting or being sent now. */
  queued: number;
}
