// Sends each finished span to an OpenTelemetry collector over OTLP (HTTP/protobuf or gRPC), as a CLIENT span
// in the caller's trace with the GenAI semantic conventions (docs/observability.md#otlp-traces).
//
// The SDK does the work: its BatchSpanProcessor batches on a timer and its OTLP exporters encode and send.
// Recording a span on the request path only wraps it in a small object; attributes are built when a batch is
// exported. The queue is bounded here, before the processor, so every span lost is counted (ADR 1501).

import { SpanKind, SpanStatusCode, TraceFlags, type Attributes, type HrTime, type SpanContext } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult, type InstrumentationScope } from '@opentelemetry/core';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as HttpProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import { isBuiltInProvider, isRouteName, PROVIDER_FACTS, ROUTES } from '../../../contracts/routes.ts';
import type { Span, SpanProcess, SpanToolCall } from './span.ts';
import type { OtlpSettings, OtlpStats } from './otlp-settings.ts';

/**
 * gen_ai.provider.name: the service that runs the model (the route table's `genAiProvider`). A /v1 call is
 * answered through Tollgate's translation, except where its provider's facts say otherwise (a local model's).
 */
function genAiProviderName(span: Span): string {
  if (span.route === 'v1') return isBuiltInProvider(span.provider) ? PROVIDER_FACTS[span.provider].genAiOnV1 : 'tollgate';
  // a configured route's service is its provider
  return isRouteName(span.route) ? ROUTES[span.route].genAiProvider : span.provider;
}

/** The calling process under the OTel process.* and container.* names (ADR 1600). */
function addProcessAttributes(attributes: Attributes, process: SpanProcess): void {
  attributes['tollgate.process.attribution'] = process.attribution;
  if (process.pid !== null) attributes['process.pid'] = process.pid;
  if (process.executablePath !== null) attributes['process.executable.path'] = process.executablePath;
  if (process.commandArgs !== null) attributes['process.command_args'] = process.commandArgs;
  if (process.containerName !== null) attributes['container.name'] = process.containerName;
  if (process.parentExecutables.length > 0) attributes['tollgate.process.parent_executables'] = process.parentExecutables;
  if (process.execId) attributes['tollgate.process.exec_id'] = process.execId;
}

/**
 * The answer's tool calls as three parallel arrays of the same length and order (ADR 1603): gen_ai.tool.name
 * names one tool, and a span can ask for several. A call without an id has "" in `ids`.
 */
function addToolCallAttributes(attributes: Attributes, calls: readonly SpanToolCall[]): void {
  attributes['tollgate.tool_calls.names'] = calls.map((c) => c.name);
  attributes['tollgate.tool_calls.ids'] = calls.map((c) => c.id ?? '');
  attributes['tollgate.tool_calls.arguments_sha256'] = calls.map((c) => c.argumentsSha256);
}

function hrTime(epochMs: number): HrTime {
  const seconds = Math.floor(epochMs / 1000);
  return [seconds, Math.round((epochMs - seconds * 1000) * 1e6)];
}

/** The error code at the head of a span's error (`upstream_timeout: …`), for error.type. */
function errorType(span: Span): string {
  const colon = span.error?.indexOf(':') ?? -1;
  return colon > 0 ? span.error!.slice(0, colon) : span.status;
}

/**
 * One finished call as the SDK's ReadableSpan. Made on the request path, so it only keeps the call's span;
 * everything else is computed when the exporter reads it.
 */
class ExportedSpan implements ReadableSpan {
  readonly kind = SpanKind.CLIENT;
  readonly links = [];
  readonly events = [];
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly #span: Span;
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  readonly parentSpanContext?: SpanContext;

  constructor(span: Span, resource: Resource, scope: InstrumentationScope) {
    this.#span = span;
    this.resource = resource;
    this.instrumentationScope = scope;
    if (span.parentSpanId !== null) this.parentSpanContext = { traceId: span.traceId, spanId: span.parentSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true };
  }

  readonly spanContext = (): SpanContext => ({ traceId: this.#span.traceId, spanId: this.#span.spanId, traceFlags: TraceFlags.SAMPLED });

  get name(): string {
    return this.#span.name;
  }

  get startTime(): HrTime {
    return hrTime(Date.parse(this.#span.startTime));
  }

  get endTime(): HrTime {
    return hrTime(Date.parse(this.#span.startTime) + this.#span.durationMs);
  }

  get duration(): HrTime {
    return hrTime(this.#span.durationMs);
  }

  get status(): { code: SpanStatusCode; message?: string } {
    const span = this.#span;
    if (span.status === 'ok') return { code: SpanStatusCode.UNSET };
    return span.error === null ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message: span.error };
  }

  get attributes(): Attributes {
    const span = this.#span;
    const attributes: Attributes = {
      'gen_ai.operation.name': span.operation,
      'gen_ai.provider.name': genAiProviderName(span),
      'gen_ai.request.model': span.model,
      'gen_ai.usage.input_tokens': span.inputTokens,
      'gen_ai.usage.output_tokens': span.outputTokens,
      'gen_ai.usage.cache_read.input_tokens': span.cachedTokens,
      'gen_ai.usage.cache_creation.input_tokens': span.cacheWriteTokens,
      'tollgate.route': span.route,
      'tollgate.provider': span.provider,
      'tollgate.status': span.status,
      'tollgate.cost_usd': span.costUsd,
      'tollgate.priced': span.priced,
      'tollgate.request_id': span.requestId,
      'tollgate.usage.reasoning_tokens': span.reasoningTokens,
    };
    if (span.responseModel !== null) attributes['gen_ai.response.model'] = span.responseModel;
    // Only when set: an estimate is rare, and every span's attributes cross the network.
    if (span.usageEstimated) attributes['tollgate.usage.estimated'] = true;
    if (span.alias !== null) attributes['tollgate.alias'] = span.alias;
    if (span.attempt !== null) attributes['tollgate.attempt'] = span.attempt;
    if (span.unmetered) attributes['tollgate.unmetered'] = true;
    // Only on the calls billed in these units (ADR 0910).
    if (span.images > 0) attributes['tollgate.usage.images'] = span.images;
    if (span.audioSeconds > 0) attributes['tollgate.usage.audio_seconds'] = span.audioSeconds;
    if (span.characters > 0) attributes['tollgate.usage.characters'] = span.characters;
    if (span.statusCode !== null) attributes['http.response.status_code'] = span.statusCode;
    if (span.status !== 'ok') attributes['error.type'] = errorType(span);
    if (span.userId !== null) attributes['enduser.id'] = span.userId;
    if (span.projectId !== null) attributes['tollgate.project_id'] = span.projectId;
    if (span.process) addProcessAttributes(attributes, span.process);
    if (span.toolCalls) addToolCallAttributes(attributes, span.toolCalls);
    return attributes;
  }
}

/** Counts what the exporter did with each batch (the exporter interface is the SDK's stable one). */
class CountingExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #logger: Logger;
  readonly #target: string;
  readonly stats = { exported: 0, failed: 0, settled: 0 };
  #lastFailureLog = -Infinity;

  constructor(inner: SpanExporter, target: string, logger: Logger) {
    this.#inner = inner;
    this.#target = target;
    this.#logger = logger;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      this.stats.settled += spans.length;
      if (result.code === ExportResultCode.SUCCESS) {
        this.stats.exported += spans.length;
      } else {
        this.stats.failed += spans.length;
        const now = Date.now();
        // At most one line per 10 s: a collector that is down must not flood the log.
        if (now - this.#lastFailureLog >= 10_000) {
          this.#lastFailureLog = now;
          this.#logger.warn({ target: this.#target, spans: spans.length, failedTotal: this.stats.failed, err: result.error?.message }, 'otlp span export failed');
        }
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

export interface OtlpExportOptions {
  settings: OtlpSettings;
  logger: Logger;
  /** Resource attributes of this process (service.name, k8s.*); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win. */
  resource?: Attributes;
  version?: string;
}

export class OtlpSpanExport {
  readonly settings: OtlpSettings;
  readonly #processor: BatchSpanProcessor;
  readonly #exporter: CountingExporter;
  readonly #resource: Resource;
  readonly #scope: InstrumentationScope;
  #offered = 0;
  #dropped = 0;
  #closed = false;

  constructor(opts: OtlpExportOptions) {
    this.settings = opts.settings;
    const { settings } = opts;
    const common = {
      ...(settings.url !== undefined ? { url: settings.url } : {}),
      ...(settings.timeoutMs !== undefined ? { timeoutMillis: settings.timeoutMs } : {}),
      ...(settings.compression !== undefined ? { compression: settings.compression as never } : {}),
    };
    const inner = settings.protocol === 'grpc' ? new GrpcTraceExporter(common) : new HttpProtobufTraceExporter(common);
    this.#exporter = new CountingExporter(inner, settings.url ?? `${settings.protocol} endpoint from OTEL_EXPORTER_OTLP_*`, opts.logger);
    this.#processor = new BatchSpanProcessor({
      exporter: this.#exporter,
      // The queue bound is kept here (record()); the processor's is set just above it so it never drops unseen.
      maxQueueSize: settings.maxQueueSize + settings.maxExportBatchSize,
      maxExportBatchSize: settings.maxExportBatchSize,
      scheduledDelayMillis: settings.scheduledDelayMs,
      ...(settings.timeoutMs !== undefined ? { exportTimeoutMillis: settings.timeoutMs } : {}),
    });
    this.#resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'tollgate-proxy', ...opts.resource }))
      .merge(detectResources({ detectors: [envDetector] }));
    this.#scope = { name: 'tollgate', ...(opts.version !== undefined ? { version: opts.version } : {}) };
  }

  /**
   * Queues one finished span; O(1), never throws, never waits. Unsampled traces are not exported. False when
   * the queue was full and the span was dropped (counted here; the caller logs).
   */
  record(span: Span, sampled: boolean): boolean {
    if (!sampled || this.#closed) return true;
    if (this.#offered - this.#exporter.stats.settled >= this.settings.maxQueueSize) {
      this.#dropped++;
      return false;
    }
    this.#offered++;
    this.#processor.onEnd(new ExportedSpan(span, this.#resource, this.#scope));
    return true;
  }

  stats(): OtlpStats {
    const { exported, failed, settled } = this.#exporter.stats;
    return { exported, failed, dropped: this.#dropped, queued: this.#offered - settled };
  }

  /** Sends what is queued (bounded by the export timeout), then stops. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.#processor.shutdown().catch(() => undefined);
  }
}
