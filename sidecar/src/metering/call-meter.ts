// Turns one finished LLM call into its span and its log line: tokens, price, status. The /proxy routes and
// the /v1 gateway both end every call here, so a call is costed and logged the same way whichever door
// it came through.

import type { Logger } from 'pino';
import type { PriceTable } from '../pricing/price-table.ts';
import type { Provider, RouteName } from '../providers/routes.ts';
import type { Span, SpanStatus } from '../spans/span.ts';
import type { SpanWriter } from '../spans/span-writer.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import type { TokenUsage } from '../usage/usage.ts';

export interface CallStart {
  route: RouteName | 'v1';
  provider: Provider | 'unknown';
  model: string;
  operation: string;
  userId: string | null;
  projectId: string | null;
  requestId: string;
  trace: TraceContext;
}

export interface CallEnd {
  prices: PriceTable;
  usage: TokenUsage | null;
  responseModel?: string | undefined;
  status: SpanStatus;
  statusCode: number | null;
  error?: string | null | undefined;
}

export class CallMeter {
  readonly #writer: SpanWriter;
  readonly #logger: Logger;

  constructor(writer: SpanWriter, logger: Logger) {
    this.#writer = writer;
    this.#logger = logger;
  }

  start(call: CallStart): MeteredCall {
    return new MeteredCall(this.#writer, this.#logger, call);
  }
}

export class MeteredCall {
  readonly #writer: SpanWriter;
  readonly #logger: Logger;
  readonly call: CallStart;
  readonly #startedAt = performance.now();
  readonly #startTime = Date.now();
  #finished: Span | null = null;

  constructor(writer: SpanWriter, logger: Logger, call: CallStart) {
    this.#writer = writer;
    this.#logger = logger;
    this.call = call;
  }

  get finished(): boolean {
    return this.#finished !== null;
  }

  /** Records the span once; later calls return the first result (a stream can end and abort at once). */
  finish(end: CallEnd): Span {
    if (this.#finished) return this.#finished;
    const { call } = this;
    const usage = end.usage;
    let costUsd = 0;
    let priced = false;
    const provider = call.provider;
    if (provider !== 'unknown') {
      if (usage) {
        let cost = end.prices.cost(provider, call.model, usage);
        // Some callers send an alias the table lacks while the upstream reports the canonical id.
        if (!cost.priced && end.responseModel && end.responseModel !== call.model) {
          cost = end.prices.cost(provider, end.responseModel, usage);
        }
        costUsd = cost.costUsd;
        priced = cost.priced;
      } else {
        priced = provider === 'local' || end.prices.resolve(provider, call.model) !== undefined;
      }
    }
    const span: Span = {
      spanId: call.trace.spanId,
      traceId: call.trace.traceId,
      parentSpanId: call.trace.parentSpanId,
      name: `${call.operation} ${call.model}`,
      operation: call.operation,
      model: call.model,
      responseModel: end.responseModel ?? null,
      provider: call.provider,
      route: call.route,
      userId: call.userId,
      projectId: call.projectId,
      requestId: call.requestId,
      inputTokens: usage?.inputTokens ?? 0,
      outputTokens: usage?.outputTokens ?? 0,
      totalTokens: usage?.totalTokens ?? 0,
      cachedTokens: usage?.cacheReadTokens ?? 0,
      cacheWriteTokens: usage?.cacheWriteTokens ?? 0,
      reasoningTokens: usage?.reasoningTokens ?? 0,
      costUsd,
      priced,
      durationMs: Math.round((performance.now() - this.#startedAt) * 1000) / 1000,
      status: end.status,
      statusCode: end.statusCode,
      error: end.error ?? null,
      startTime: new Date(this.#startTime).toISOString(),
    };
    this.#finished = span;
    this.#writer.record(span);
    const level = span.status === 'ok' ? 'info' : 'warn';
    this.#logger[level](
      {
        request_id: span.requestId,
        trace_id: span.traceId,
        span_id: span.spanId,
        route: span.route,
        provider: span.provider,
        model: span.model,
        user_id: span.userId,
        status: span.status,
        status_code: span.statusCode,
        input_tokens: span.inputTokens,
        output_tokens: span.outputTokens,
        cached_tokens: span.cachedTokens,
        total_tokens: span.totalTokens,
        cost_usd: span.costUsd,
        priced: span.priced,
        latency_ms: span.durationMs,
        ...(span.error ? { error: span.error } : {}),
        ...(usage && !priced ? { pricing: `no price for ${span.provider} model ${span.model}: cost recorded as 0` } : {}),
      },
      'llm call',
    );
    return span;
  }
}
