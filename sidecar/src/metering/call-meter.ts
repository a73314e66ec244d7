// Turns one finished LLM call into its span and its log line: tokens, price, status. The /proxy routes and
// the /v1 gateway both end every call here, so a call is costed and logged the same way whichever door
// it came through.

import type { Logger } from 'pino';
import type { PriceTable } from '../pricing/price-table.ts';
import { costsNothing } from '../pricing/provider-pricing.ts';
import type { Span, SpanStatus } from '../spans/span.ts';
import type { CallObserver, CallTimings } from '../spans/call-observer.ts';
import { newSpanId, type TraceContext } from '../spans/trace-context.ts';
import { implausibleUsage } from '../usage/usage-bounds.ts';
import type { BilledUnits, CallCharge, TokenUsage } from '../usage/usage.ts';
import type { UpstreamTiming } from '../upstream/upstream-client.ts';
import type { AnswerToolCalls } from '../tool-calls/tool-call-collector.ts';

export interface CallStart {
  /** A route's name, or `v1` for a /v1 call refused before it reached one. */
  route: string;
  provider: string;
  model: string;
  operation: string;
  userId: string | null;
  projectId: string | null;
  requestId: string;
  trace: TraceContext;
  /** The model alias the caller named on /v1, when it named one. */
  alias?: string | undefined;
  /** Forwarded on a path its format cannot meter, the route allowing it (routes/endpoint-kinds.ts). */
  unmetered?: boolean | undefined;
  /** Billed units only the request knows (an image's size and quality, a speech input's characters; ADR 0910). */
  units?: BilledUnits | undefined;
}

/** Where a call finally went: the alias target that answered (or failed last). */
export type CallTarget = Pick<CallStart, 'route' | 'provider' | 'model' | 'projectId'>;

/** One upstream attempt of a call that fell back (fallback/alias-call.ts), for its own span. */
export interface AttemptEnd {
  attempt: number;
  target: CallTarget;
  /** performance.now() when the attempt began, and Date.now() at the same moment. */
  startedAt: number;
  startTime: number;
  status: SpanStatus;
  statusCode: number | null;
  error: string | null;
}

export interface CallEnd {
  prices: PriceTable;
  usage: TokenUsage | null;
  /** `usage` is the proxy's estimate, not the provider's report (ADR 1305). */
  usageEstimated?: boolean | undefined;
  responseModel?: string | undefined;
  /** The cost worked out part by part by the extractor (a batch's results, ADR 0913), charged instead of `usage` priced. */
  charge?: CallCharge | undefined;
  status: SpanStatus;
  statusCode: number | null;
  error?: string | null | undefined;
  /** The answer's tool calls, read while provenance is on (ADR 1603); more than were recorded are logged. */
  toolCalls?: AnswerToolCalls | undefined;
}

/** Calls whose metering went wrong; each is also on its span's `error` and in its `llm call` line. */
export interface MeteringStats {
  /** Cost arithmetic threw: the call was recorded with cost 0 and `metering_failed`. */
  meteringErrors: number;
  /** The upstream reported token counts no call can have: recorded without usage, `usage_implausible`. */
  implausibleUsage: number;
}

/** Where finished calls' costs are charged (sidecar/src/budgets): never throws. */
export interface SpendSink {
  /** The user a call without one is charged to (a pod's service account), or null. */
  readonly defaultUser: string | null;
  charge(userId: string, costUsd: number, at: number): void;
}

/** Whether shutdown is cutting connections (Lifecycle implements it). */
export interface ShutdownState {
  readonly cutting: boolean;
  /** How long shutdown waited before it cut, for the span's error. */
  readonly drainTimeoutMs?: number | undefined;
}

/**
 * Where finished spans go: the span writer, or the provenance gate in front of it, which says whether answers
 * are read for their tool calls (only while provenance is on, ADR 1603).
 */
type SpanRecorder = { record(span: Span): void; readonly recordsToolCalls?: boolean };

export class CallMeter {
  readonly #writer: SpanRecorder;
  readonly #logger: Logger;
  readonly #shutdown: ShutdownState;
  readonly #stats: MeteringStats = { meteringErrors: 0, implausibleUsage: 0 };
  readonly #observers: CallObserver[] = [];
  readonly #spend: SpendSink | undefined;

  constructor(writer: SpanRecorder, logger: Logger, shutdown: ShutdownState = { cutting: false }, spend?: SpendSink) {
    this.#writer = writer;
    this.#logger = logger;
    this.#shutdown = shutdown;
    this.#spend = spend;
  }

  start(call: CallStart): MeteredCall {
    // A call that names no user is charged (and shown) as the default user, e.g. the pod's service account.
    if (call.userId === null && this.#spend?.defaultUser) call = { ...call, userId: this.#spend.defaultUser };
    return new MeteredCall(this.#writer, this.#logger, call, { stats: this.#stats, shutdown: this.#shutdown, spend: this.#spend, observers: this.#observers });
  }

  /** Adds an observer of every call finished from now on. */
  observe(observer: CallObserver): void {
    this.#observers.push(observer);
  }

  stats(): MeteringStats {
    return { ...this.#stats };
  }
}

const NO_OBSERVERS: readonly CallObserver[] = [];
const NOT_SENT: UpstreamTiming = { startedAt: Number.NaN, headersAt: Number.NaN, endedAt: Number.NaN };

export class MeteredCall implements CallTimings {
  readonly #writer: SpanRecorder;
  readonly #logger: Logger;
  readonly #stats: MeteringStats;
  readonly #shutdown: ShutdownState;
  readonly #observers: readonly CallObserver[];
  #call: CallStart;
  readonly #startedAt = performance.now();
  readonly #startTime = Date.now();
  readonly #spend: SpendSink | undefined;
  #upstream: UpstreamTiming = NOT_SENT;
  #finishedAt = Number.NaN;
  #finished: Span | null = null;
  /** Releases the budget reservation this call holds (ADR 1308); called once, by finish. */
  #release: ((usage: TokenUsage | null) => void) | null = null;

  constructor(
    writer: SpanRecorder,
    logger: Logger,
    call: CallStart,
    context: { stats?: MeteringStats; shutdown?: ShutdownState; spend?: SpendSink | undefined; observers?: readonly CallObserver[] } = {},
  ) {
    this.#writer = writer;
    this.#logger = logger;
    this.#call = call;
    this.#stats = context.stats ?? { meteringErrors: 0, implausibleUsage: 0 };
    this.#shutdown = context.shutdown ?? { cutting: false };
    this.#spend = context.spend;
    this.#observers = context.observers ?? NO_OBSERVERS;
  }

  get call(): CallStart {
    return this.#call;
  }

  get finished(): boolean {
    return this.#finished !== null;
  }

  /** Whether the answer is to be read for its tool calls: provenance is on (ADR 1603). */
  get recordsToolCalls(): boolean {
    return this.#writer.recordsToolCalls === true;
  }

  /** The span recorded when the call finished, or null before. */
  get span(): Span | null {
    return this.#finished;
  }

  /** The call is going to another target (an alias's fallback): its span names the one that answers. */
  retarget(target: CallTarget): void {
    if (this.#finished) return;
    this.#call = { ...this.#call, ...target };
  }

  /**
   * Records one attempt of a call that fell back as a child of this call's span: its target and outcome, no
   * usage and no cost (what the upstream reported is charged once, on the call's span).
   */
  recordAttempt(end: AttemptEnd): void {
    const { trace, operation, userId, requestId, alias } = this.#call;
    const { target } = end;
    const span: Span = {
      spanId: newSpanId(),
      traceId: trace.traceId,
      parentSpanId: trace.spanId,
      name: `${operation} ${target.model}`,
      operation,
      model: target.model,
      responseModel: null,
      provider: target.provider,
      route: target.route,
      userId,
      projectId: target.projectId,
      requestId,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      cachedTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      images: 0,
      audioSeconds: 0,
      characters: 0,
      costUsd: 0,
      priced: false,
      usageEstimated: false,
      alias: alias ?? null,
      attempt: end.attempt,
      unmetered: false,
      durationMs: Math.round((performance.now() - end.startedAt) * 1000) / 1000,
      status: end.status,
      statusCode: end.statusCode,
      error: end.error,
      startTime: new Date(end.startTime).toISOString(),
    };
    this.#writer.record(span);
    const sampled = trace.flags === '01';
    for (const observer of this.#observers) {
      try {
        observer.attemptFinished?.(span, sampled);
      } catch (error) {
        this.#logger.error({ err: (error as Error).message, request_id: requestId }, 'call observer failed');
      }
    }
  }

  /**
   * The call holds a budget reservation until it finishes (ADR 1308): `finish` releases it, whatever the call's
   * end, as it charges the real cost. A call holds one reservation; a call already finished releases it at once.
   */
  hold(release: (usage: TokenUsage | null) => void): void {
    if (this.#finished !== null) return release(null);
    this.#release?.(null);
    this.#release = release;
  }

  /** The caller left before its answer was whole; the relay reads the upstream on for the usage (ADR 1305). */
  noteCallerLeft(): void {
    this.#logger.debug({ request_id: this.call.requestId, span_id: this.call.trace.spanId }, 'caller left mid-answer; reading the upstream on for its usage');
  }

  /** Shutdown is cutting connections: a call whose caller "left" was cut, and must finish now. */
  get cutByShutdown(): boolean {
    return this.#shutdown.cutting;
  }

  /** The upstream exchange this call made, for its latency split (upstream time vs the proxy's own). */
  attachUpstream(timing: UpstreamTiming): void {
    this.#upstream = timing;
  }

  get start(): number {
    return this.#startedAt;
  }

  get upstreamStart(): number {
    return this.#upstream.startedAt;
  }

  get upstreamHeaders(): number {
    return this.#upstream.headersAt;
  }

  /** An exchange not yet settled when the call finished (a 5xx settled early) ended with the call. */
  get upstreamEnd(): number {
    const { startedAt, endedAt } = this.#upstream;
    return Number.isNaN(endedAt) && !Number.isNaN(startedAt) ? this.#finishedAt : endedAt;
  }

  /**
   * Records the span once; later calls return the first result (a stream can end and abort at once). Never
   * throws: it runs in response listeners, where an exception would take the process down, so a fault in
   * metering is recorded on the span, logged and counted instead (ADR 1001).
   */
  finish(end: CallEnd): Span {
    if (this.#finished) return this.#finished;
    // Released and charged in one turn of the event loop: no call is admitted in between.
    const release = this.#release;
    this.#release = null;
    const problems: string[] = [];
    const usage = this.#plausible(withRequestUnits(end, this.call.units), problems);
    // Rate windows settle to the real tokens (ADR 1309); a budget hold ignores them.
    release?.(usage);
    const cost = this.#cost(end, usage);
    if (cost.failure !== undefined) problems.push(`metering_failed: ${cost.failure}`);
    const span = this.#span(end, usage, cost, problems);
    this.#finished = span;
    this.#writer.record(span);
    // Charged what the span says it cost, whatever its status: an aborted stream still cost what it used.
    if (span.userId !== null && span.costUsd > 0) this.#spend?.charge(span.userId, span.costUsd, Date.now());
    const unpriced = usage !== null && !cost.priced && cost.failure === undefined;
    logCall(this.#logger, span, unpriced ? (cost.problem ?? `no price for ${span.provider} model ${span.model}`) : null, this.#upstream.endpoint, end.toolCalls?.dropped ?? 0);
    this.#notify(span, cost.model ?? null);
    return span;
  }

  /** The usage, unless it cannot be true (then the problem is noted and the usage not recorded). */
  #plausible(usage: TokenUsage | null, problems: string[]): TokenUsage | null {
    const implausible = usage ? implausibleUsage(usage) : null;
    if (implausible === null) return usage;
    this.#stats.implausibleUsage++;
    problems.push(`usage_implausible: ${implausible}; usage not recorded`);
    return null;
  }

  #span(end: CallEnd, usage: TokenUsage | null, cost: { costUsd: number; priced: boolean }, problems: string[]): Span {
    const { call } = this;
    // The connection went because shutdown cut it at the drain deadline, not because the caller left.
    const cutByShutdown = end.status === 'client_aborted' && this.#shutdown.cutting;
    const waited = this.#shutdown.drainTimeoutMs !== undefined ? ` after waiting ${this.#shutdown.drainTimeoutMs} ms for the call to finish` : '';
    const cause = cutByShutdown ? `shutting_down: the proxy stopped and closed the connection${waited}` : end.error;
    // Most calls have neither a cause nor a problem: no array, no join.
    const error = problems.length === 0 ? cause || null : [cause, ...problems].filter((text) => text).join('; ') || null;
    // A call whose usage could not be metered is not a clean record, whatever the caller received.
    const status = cutByShutdown || (problems.length > 0 && end.status === 'ok') ? 'error' : end.status;
    const units = unitCounts(usage);
    return {
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
      // Written out rather than spread from a helper: one object literal of one shape for every span.
      inputTokens: usage?.inputTokens ?? 0,
      outputTokens: usage?.outputTokens ?? 0,
      totalTokens: usage?.totalTokens ?? 0,
      cachedTokens: usage?.cacheReadTokens ?? 0,
      cacheWriteTokens: usage?.cacheWriteTokens ?? 0,
      reasoningTokens: usage?.reasoningTokens ?? 0,
      images: units.images,
      audioSeconds: units.audioSeconds,
      characters: units.characters,
      costUsd: cost.costUsd,
      priced: cost.priced,
      usageEstimated: usage !== null && end.usageEstimated === true,
      alias: call.alias ?? null,
      attempt: null,
      unmetered: call.unmetered === true,
      durationMs: Math.round(((this.#finishedAt = performance.now()) - this.#startedAt) * 1000) / 1000,
      status,
      statusCode: end.statusCode,
      error,
      startTime: new Date(this.#startTime).toISOString(),
      toolCalls: end.toolCalls?.calls,
    };
  }

  /** Tells the observers (metrics, OTLP export); an observer is reporting, not metering: its fault is logged, never thrown. */
  #notify(span: Span, model: string | null): void {
    const sampled = this.call.trace.flags === '01';
    for (const observer of this.#observers) {
      try {
        observer.callFinished(span, model, this, sampled);
      } catch (error) {
        this.#logger.error({ err: (error as Error).message, request_id: span.requestId }, 'call observer failed');
      }
    }
  }

  #cost(end: CallEnd, usage: TokenUsage | null): { costUsd: number; priced: boolean; failure?: string; model?: string | undefined; problem?: string } {
    const { call } = this;
    const provider = call.provider;
    if (provider === 'unknown') return { costUsd: 0, priced: false };
    try {
      if (!usage) {
        if (costsNothing(provider)) return { costUsd: 0, priced: true };
        const entry = end.prices.resolve(provider, call.model);
        return { costUsd: 0, priced: entry !== undefined, model: entry?.model };
      }
      if (end.charge !== undefined) return { ...end.charge };
      let cost = end.prices.cost(provider, call.model, usage);
      // Some callers send an alias the table lacks while the upstream reports the canonical id.
      if (!cost.priced && end.responseModel && end.responseModel !== call.model) {
        cost = end.prices.cost(provider, end.responseModel, usage);
      }
      if (!Number.isFinite(cost.costUsd)) throw new RangeError(`cost of ${cost.costUsd} USD is not a finite number`);
      return cost;
    } catch (error) {
      this.#stats.meteringErrors++;
      const message = error instanceof Error ? error.message : String(error);
      this.#logger.error(
        {
          err: { type: error instanceof Error ? error.name : typeof error, message },
          request_id: call.requestId,
          route: call.route,
          model: call.model,
          metering_errors: this.#stats.meteringErrors,
        },
        'metering failed; call recorded with cost 0',
      );
      return { costUsd: 0, priced: false, failure: message };
    }
  }
}

/** The span's counts of billed units other than tokens (ADR 0910), 0 for those the call did not bill. */
function unitCounts(usage: TokenUsage | null): { images: number; audioSeconds: number; characters: number } {
  const units = usage?.units;
  return { images: units?.images ?? 0, audioSeconds: units?.audioSeconds ?? 0, characters: units?.characters ?? 0 };
}

/**
 * The usage with the request's billed units merged under the answer's (ADR 0910): what the answer says wins (a
 * GPT image answer names its size). An answer without usage (speech is audio bytes) that succeeded is billed
 * the request's units alone.
 */
function withRequestUnits(end: CallEnd, units: BilledUnits | undefined): TokenUsage | null {
  if (units === undefined) return end.usage;
  if (end.usage !== null) return { ...end.usage, units: { ...units, ...end.usage.units } };
  if (end.statusCode === null || end.statusCode < 200 || end.statusCode > 299) return null;
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0, units: { ...units } };
}

/**
 * The `llm call` line, one per call; `unpriced` says why its cost is 0, `endpoint` which of its route's endpoints
 * answered (ADR 0008), `toolCallsDropped` how many tool calls past the span's bound were not recorded (ADR 1603).
 */
function logCall(logger: Logger, span: Span, unpriced: string | null, endpoint: string | undefined, toolCallsDropped: number): void {
  const level = span.status === 'ok' ? 'info' : 'warn';
  logger[level](
    {
      request_id: span.requestId,
      trace_id: span.traceId,
      span_id: span.spanId,
      route: span.route,
      provider: span.provider,
      model: span.model,
      ...(span.alias !== null ? { alias: span.alias } : {}),
      ...(endpoint !== undefined ? { endpoint } : {}),
      user_id: span.userId,
      status: span.status,
      status_code: span.statusCode,
      input_tokens: span.inputTokens,
      output_tokens: span.outputTokens,
      cached_tokens: span.cachedTokens,
      total_tokens: span.totalTokens,
      cost_usd: span.costUsd,
      priced: span.priced,
      ...(span.usageEstimated ? { usage_estimated: true } : {}),
      ...(span.unmetered ? { unmetered: 'forwarded on a path its route cannot meter; usage and cost are not the bill' } : {}),
      latency_ms: span.durationMs,
      ...(span.error ? { error: span.error } : {}),
      ...(unpriced !== null ? { pricing: `${unpriced}: cost recorded as 0` } : {}),
      ...(toolCallsDropped > 0 ? { tool_calls_dropped: toolCallsDropped } : {}),
    },
    'llm call',
  );
}
