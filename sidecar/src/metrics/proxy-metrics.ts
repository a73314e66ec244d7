// The proxy's Prometheus metrics (docs/observability.md lists them). Every finished call adds to a few
// numbers held in objects made the first time its label set was seen (ADR 1500); everything else (span
// store, breakers, config, in-flight calls, audit sinks) is read from its owner when Prometheus scrapes.
//
// Labels stay bounded: route and provider come from the route table, `model` is the price table's canonical
// id or `other`, status and code are small enums. User ids appear only in the opt-in per-user series and in the
// budget series of users near their limit, both capped.

import type { ResponseStoreStats } from '../responses/response-store.ts';
import { collectDefaultMetrics, Gauge, Registry, type RegistryContentType } from 'prom-client';
import { MetricsExposition } from '../../../contracts/metrics-exposition.ts';
import type { MeteringStats } from '../metering/call-meter.ts';
import type { CallObserver, CallTimings } from '../spans/call-observer.ts';

export type { CallTimings } from '../spans/call-observer.ts';
import { isRouteName, ROUTES } from '../../../contracts/routes.ts';
import type { Span, SpanStatus } from '../spans/span.ts';
import type { SpanWriterStats } from '../spans/span-writer.ts';
import type { BudgetStanding } from '../budgets/budget-book.ts';
import { CounterFamily, HistogramFamily, type CounterSeries, type HistogramSeries } from './metric-families.ts';

const RATE_LIMIT_KINDS = ['requests', 'tokens', 'concurrent'] as const;
const RATE_LIMIT_LEVELS = ['user', 'team', 'workload', 'namespace'] as const;
type RateLimitKind = (typeof RATE_LIMIT_KINDS)[number];
type RateLimitLevel = (typeof RATE_LIMIT_LEVELS)[number];

/** Seconds; LLM calls run from tens of milliseconds to minutes. */
const CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];
const FIRST_BYTE_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** What the proxy itself adds is meant to stay under a millisecond. */
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

const STATUSES: readonly SpanStatus[] = ['ok', 'upstream_error', 'error', 'client_aborted', 'rejected'];
/** HTTP status class the caller got: the upstream's (relayed), the proxy's own 4xx/5xx, or none (caller left). */
const CODES = ['2xx', '3xx', '4xx', '5xx', 'none'] as const;
type Code = (typeof CODES)[number];
const BREAKER_STATES = ['closed', 'half-open', 'open'] as const;

export const OTHER_MODEL = 'other';
/** User ids longer than this are cut in the label (the span keeps them whole). */
const MAX_USER_LABEL = 128;
/** Budget series: the users nearest their limit, at most this many per scrape. */
const MAX_BUDGET_SERIES = 100;

export interface PerUserMetrics {
  enabled: boolean;
  /** Distinct users with their own series; later users are counted under `other`. */
  maxUsers: number;
}

/** Where the scrape-time metrics come from: each a cheap read of state its owner keeps anyway. */
export interface ProxyMetricSources {
  spans?: () => SpanWriterStats;
  /** The span store's kind (storage.kind), fixed for the process: alerts tell a warehouse from a local file by it. */
  spanStoreKind?: () => string;
  inFlight?: () => number;
  breakers?: () => Readonly<Record<string, string>>;
  /** The breaker of each endpoint of the routes that have `endpoints`, by route and endpoint (ADR 0008). */
  endpointBreakers?: () => Readonly<Record<string, Readonly<Record<string, string>>>>;
  config?: () => { revision: number; appliedAtMs: number };
  metering?: () => MeteringStats;
  audit?: () => AuditSinkCounters[];
  /** Connections from the pod to a provider that did not come from the sidecar, per provider (ADR 1601). */
  provenanceBypass?: () => ReadonlyMap<string, number>;
  /** What the causal trail's bounds pushed out, by bound (ADR 1604). */
  provenanceTrailDrops?: () => ReadonlyMap<string, number>;
  /** Of those, the entries the queue to the operator had no room for (ADR 1605). */
  provenanceBypassReportsDropped?: () => number;
  /** Spans handed to the OTLP exporter and what became of them. */
  otlp?: () => { exported: number; dropped: number; failed: number };
  /** Requests refused by inbound authentication (central server). */
  authFailures?: () => number;
  /** Of those, the ones refused because a tokeninfo lookup would have passed its bounds. */
  tokeninfoThrottled?: () => number;
  /** Budgets per policy and the `nearest` users nearest their limit (sidecar/src/budgets), in one bounded pass. */
  budgets?: (nearest: number) => BudgetStanding;
  /** The /v1/responses store for previous_response_id (sidecar/src/responses). */
  responses?: () => ResponseStoreStats;
  /** Reads on after callers left (metering/leaving-reads.ts): in progress, and refused at a bound. */
  leavingReads?: () => { inUse: number; refused: number };
  /** Calls refused by a budget policy's rate limits, per limit (ADR 1309). */
  /** Per budget level and limit (ADR 1313): a fixed set of series, never a subject's name. */
  rateLimited?: () => Readonly<Record<RateLimitLevel, Readonly<Record<RateLimitKind, number>>>>;
}

/** The per-sink counters of the audit fan-out (SinkStatus has these and more). */
export interface AuditSinkCounters {
  name: string;
  kind: string;
  received: number;
  delivered: number;
  retried: number;
  dropped: number;
  deadLettered: number;
  queueDepth: number;
  failures: number;
}

/** Series of one (route, provider, model): requests by status and code, tokens, cost. */
class ModelSeries {
  readonly requests: (CounterSeries | undefined)[] = new Array<CounterSeries | undefined>(STATUSES.length * CODES.length);
  readonly input: CounterSeries;
  readonly output: CounterSeries;
  readonly cacheRead: CounterSeries;
  readonly cacheWrite: CounterSeries;
  readonly reasoning: CounterSeries;
  readonly cost: CounterSeries;
  readonly model: string;

  constructor(families: ProxyMetrics['families'], route: string, provider: string, model: string) {
    this.model = model;
    this.input = families.tokens.series(route, provider, model, 'input');
    this.output = families.tokens.series(route, provider, model, 'output');
    this.cacheRead = families.tokens.series(route, provider, model, 'cache_read');
    this.cacheWrite = families.tokens.series(route, provider, model, 'cache_write');
    this.reasoning = families.tokens.series(route, provider, model, 'reasoning');
    this.cost = families.cost.series(route, provider, model);
  }
}

/** Latency histograms of one (route, provider). */
class LatencySeries {
  readonly request: HistogramSeries;
  readonly upstream: HistogramSeries;
  readonly firstByte: HistogramSeries;
  readonly overhead: HistogramSeries;

  constructor(families: ProxyMetrics['families'], route: string, provider: string) {
    this.request = families.requestDuration.series(route, provider);
    this.upstream = families.upstreamDuration.series(route, provider);
    this.firstByte = families.firstByte.series(route, provider);
    this.overhead = families.overhead.series(route, provider);
  }
}

function codeOf(status: SpanStatus, statusCode: number | null): Code {
  if (status === 'client_aborted' && statusCode === null) return 'none';
  if (statusCode !== null && statusCode >= 200 && statusCode < 600) return CODES[Math.floor(statusCode / 100) - 2]!;
  // Not relayed from an upstream: the proxy answered itself.
  return status === 'rejected' ? '4xx' : status === 'error' ? '5xx' : 'none';
}

const CREDENTIAL_FAILURE = 'credential_unavailable:';

export class ProxyMetrics implements CallObserver {
  readonly registry: Registry<RegistryContentType> = new Registry();
  readonly exposition = new MetricsExposition(this.registry);
  readonly families;
  #sources: ProxyMetricSources = {};
  #models = new Map<string, Map<string, Map<string, ModelSeries>>>();
  #latency = new Map<string, Map<string, LatencySeries>>();
  #credentialFailures = new Map<string, CounterSeries>();
  #perUser: PerUserMetrics = { enabled: false, maxUsers: 0 };
  #users = new Map<string, { requests: CounterSeries; cost: CounterSeries }>();
  #startupSeconds = Number.NaN;
  /** Bounded by the config: aliases × targets × targets × 5 reasons. */
  #fallbacks = new Map<string, CounterSeries>();
  #unmetered = new Map<string, CounterSeries>();

  /** A native call was forwarded on a path its route cannot meter (http/proxy.ts); routes are bounded by the config. */
  forwarded(route: string): void {
    let series = this.#unmetered.get(route);
    if (series === undefined) this.#unmetered.set(route, (series = this.families.unmetered.series(route)));
    series.value++;
  }

  /** An alias call went on from one target to the next (fallback/alias-call.ts). */
  fallback(alias: string, from: { route: string }, to: { route: string }, reason: string): void {
    const key = `${alias}\u0000${from.route}\u0000${to.route}\u0000${reason}`;
    let series = this.#fallbacks.get(key);
    if (series === undefined) this.#fallbacks.set(key, (series = this.families.fallbacks.series(alias, from.route, to.route, reason)));
    series.value++;
  }

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const r = this.registry;
    // Read at scrape time from the sources; objects created once here and refilled per scrape.
    const spans = () => this.#sources.spans?.();
    const audit = () => this.#sources.audit?.() ?? [];
    this.families = {
      requests: new CounterFamily(
        r,
        'tollgate_requests_total',
        'LLM calls finished, by route, provider, model (price-table id or other), span status and the HTTP status class the caller got.',
        ['route', 'provider', 'model', 'status', 'code'],
      ),
      tokens: new CounterFamily(
        r,
        'tollgate_tokens_total',
        'Tokens of finished calls by type: input (all prompt tokens, cache reads and writes included), output (reasoning included), cache_read, cache_write, reasoning.',
        ['route', 'provider', 'model', 'type'],
      ),
      cost: new CounterFamily(r, 'tollgate_cost_usd_total', 'Cost of finished calls in USD, from the price table.', ['route', 'provider', 'model']),
      requestDuration: new HistogramFamily(
        r,
        'tollgate_request_duration_seconds',
        'Whole call as the caller saw it: request received until the last byte reached the caller.',
        ['route', 'provider'],
        CALL_BUCKETS,
      ),
      upstreamDuration: new HistogramFamily(
        r,
        'tollgate_upstream_duration_seconds',
        'Upstream exchange: request sent until the upstream response ended.',
        ['route', 'provider'],
        CALL_BUCKETS,
      ),
      firstByte: new HistogramFamily(
        r,
        'tollgate_time_to_first_byte_seconds',
        'Request received until the upstream response headers arrived (the first byte the caller can get).',
        ['route', 'provider'],
        FIRST_BYTE_BUCKETS,
      ),
      overhead: new HistogramFamily(
        r,
        'tollgate_overhead_seconds',
        'Time the proxy added: the whole call minus the upstream exchange (reading the request, credentials, signing, relaying the tail).',
        ['route', 'provider'],
        OVERHEAD_BUCKETS,
      ),
      credentialFailures: new CounterFamily(
        r,
        'tollgate_credential_failures_total',
        'Calls that failed because the upstream credential could not be obtained, by credential kind.',
        ['kind'],
      ),
      userRequests: new CounterFamily(r, 'tollgate_user_requests_total', 'LLM calls per user (opt-in: metrics.perUser; users past the cap count as other).', ['user']),
      unmetered: new CounterFamily(
        r,
        'tollgate_unmetered_calls_total',
        "Native calls forwarded on a path their route's format cannot meter, because the route allows it (upstreams.<route>.unmetered: allow); each is logged and its span marked unmetered.",
        ['route'],
      ),
      fallbacks: new CounterFamily(
        r,
        'tollgate_fallbacks_total',
        "Alias calls that went on from one target's route to another's, by alias, the route that failed, the next one and why (rate_limited, server_error, unreachable, timeout, circuit_open).",
        ['alias', 'from', 'to', 'reason'],
      ),
      userCost: new CounterFamily(r, 'tollgate_user_cost_usd_total', 'Cost in USD per user (opt-in: metrics.perUser; users past the cap count as other).', ['user']),
    };
    const mirror = (name: string, help: string, read: () => number | undefined) => {
      const family = new CounterFamily(r, name, help, [], () => (series.value = read() ?? 0));
      const series = family.series();
    };
    mirror('tollgate_spans_written_total', 'Spans written to the span store.', () => spans()?.written);
    mirror('tollgate_span_store_write_errors_total', 'Failed span store writes (a retried batch counts twice).', () => spans()?.writeErrors);
    const dropped = new CounterFamily(r, 'tollgate_spans_dropped_total', 'Spans lost: the writer buffer was full, or a batch failed all its attempts.', ['reason'], () => {
      const stats = spans();
      bufferFull.value = stats?.droppedBufferFull ?? 0;
      // Never backwards: the writer takes back a batch close() gave up on if it lands after all.
      writeFailed.value = Math.max(writeFailed.value, stats ? stats.dropped - stats.droppedBufferFull : 0);
    });
    const bufferFull = dropped.series('buffer_full');
    const writeFailed = dropped.series('write_failed');
    // Counters kept by the parts of the engine, read at scrape time.
    const mirrored: readonly (readonly [string, string, () => number | undefined])[] = [
      ['tollgate_metering_errors_total', 'Calls whose cost arithmetic failed (recorded with cost 0).', () => this.#sources.metering?.().meteringErrors],
      ['tollgate_usage_implausible_total', 'Calls whose reported usage was implausible (recorded without usage).', () => this.#sources.metering?.().implausibleUsage],
      [
        'tollgate_inbound_auth_failures_total',
        'Requests refused by inbound authentication (each is an `all auth strategies failed`, logged or counted).',
        () => this.#sources.authFailures?.(),
      ],
      [
        'tollgate_tokeninfo_lookups_throttled_total',
        'Requests refused with 503 token_lookups_throttled: their access token would have cost a tokeninfo lookup past server.auth.accessTokens.lookupsPerSecond or concurrentLookups.',
        () => this.#sources.tokeninfoThrottled?.(),
      ],
      [
        'tollgate_responses_evicted_total',
        'Stored /v1/responses conversations dropped to stay within the store limits (a later previous_response_id naming one is refused).',
        () => this.#sources.responses?.().evicted,
      ],
      [
        'tollgate_leaving_reads_refused_total',
        "Calls whose caller left and that were not read on for their usage (charged an estimate): a caller's or the process's bound on such reads was reached.",
        () => this.#sources.leavingReads?.().refused,
      ],
      ['tollgate_otlp_spans_exported_total', 'Spans the OTLP exporter delivered to the collector.', () => this.#sources.otlp?.().exported],
      [
        'tollgate_provenance_bypass_reports_dropped_total',
        'Bypass entries not sent to the operator (no ProviderBypass Event): the queue to it was full.',
        () => this.#sources.provenanceBypassReportsDropped?.(),
      ],
    ];
    for (const [name, help, read] of mirrored) mirror(name, help, read);
    const otlpDropped = new CounterFamily(
      r,
      'tollgate_otlp_spans_dropped_total',
      'Spans the OTLP exporter lost: its queue was full, or the collector refused or could not be reached.',
      ['reason'],
      () => {
        const stats = this.#sources.otlp?.();
        otlpQueueFull.value = stats?.dropped ?? 0;
        otlpFailed.value = stats?.failed ?? 0;
      },
    );
    const rateLimited = new CounterFamily(
      r,
      'tollgate_rate_limited_total',
      "Calls refused with 429 rate_limit_exceeded by their budget policy's rate limits, by the limit that refused them (requests, tokens, concurrent) and the level of its policy (user, team, workload, namespace).",
      ['limit', 'level'],
      () => {
        const counts = this.#sources.rateLimited?.();
        for (const [level, limit, series] of rateSeries) series.value = counts?.[level][limit] ?? 0;
      },
    );
    const rateSeries = RATE_LIMIT_LEVELS.flatMap((level) => RATE_LIMIT_KINDS.map((limit) => [level, limit, rateLimited.series(limit, level)] as const));
    const otlpQueueFull = otlpDropped.series('queue_full');
    const otlpFailed = otlpDropped.series('export_failed');

    const gauge = (name: string, help: string, read: () => number | undefined) =>
      new Gauge({
        name,
        help,
        registers: [r],
        collect() {
          const value = read();
          if (value !== undefined && Number.isFinite(value)) this.set(value);
        },
      });
    gauge('tollgate_span_store_failing', "1 while the span store's last write failed.", () => (spans()?.failing ? 1 : 0));
    const storeInfo: Gauge<'kind'> = new Gauge({
      name: 'tollgate_span_store_info',
      help: 'The span store in use: 1, labelled with its kind (sqlite, duckdb, bigquery, firestore, memory).',
      labelNames: ['kind'],
      registers: [r],
      collect: () => {
        storeInfo.reset();
        const kind = this.#sources.spanStoreKind?.();
        if (kind !== undefined) storeInfo.set({ kind }, 1);
      },
    });
    gauge('tollgate_leaving_reads', 'Calls reading on for their usage after their callers left (each holds an upstream connection).', () => this.#sources.leavingReads?.().inUse);
    gauge('tollgate_span_buffer_spans', 'Spans waiting in the writer buffer.', () => spans()?.buffered);
    gauge('tollgate_inflight_requests', 'Calls in flight (streams included).', () => this.#sources.inFlight?.());
    gauge('tollgate_responses_stored', 'Conversations in the /v1/responses store, for previous_response_id.', () => this.#sources.responses?.().stored);
    gauge('tollgate_responses_stored_bytes', 'Bytes of the conversations in the /v1/responses store.', () => this.#sources.responses?.().bytes);
    gauge('tollgate_config_revision', 'Revision of the runtime config in use; it increases with every applied change.', () => this.#sources.config?.().revision);
    gauge('tollgate_config_last_apply_timestamp_seconds', 'When the runtime config last changed (Unix seconds).', () => {
      const applied = this.#sources.config?.().appliedAtMs;
      return applied === undefined ? undefined : applied / 1000;
    });
    gauge('tollgate_startup_duration_seconds', 'Process start until the proxy listened with its config applied.', () => this.#startupSeconds);
    breakerGauges(
      r,
      () => this.#sources.breakers?.(),
      () => this.#sources.endpointBreakers?.(),
    );
    const auditCounter = (name: string, help: string, pick: (s: AuditSinkCounters) => number) => {
      // Audit sinks come and go with the config; the family is rebuilt per scrape from the live sinks.
      const family: CounterFamily = new CounterFamily(r, name, help, ['sink', 'kind'], () => {
        family.clear();
        for (const sink of audit()) family.series(sink.name, sink.kind).value = pick(sink);
      });
    };
    auditCounter('tollgate_audit_events_received_total', 'Audit events offered to each sink.', (s) => s.received);
    auditCounter('tollgate_audit_events_delivered_total', 'Audit events each sink delivered.', (s) => s.delivered);
    auditCounter('tollgate_audit_events_retried_total', 'Audit events sent again after a failed attempt.', (s) => s.retried);
    auditCounter('tollgate_audit_events_dropped_total', 'Audit events dropped (queue full).', (s) => s.dropped);
    auditCounter('tollgate_audit_events_dead_lettered_total', "Audit events written to the sink's dead-letter file.", (s) => s.deadLettered);
    auditCounter('tollgate_audit_sink_write_failures_total', 'Failed write attempts per audit sink.', (s) => s.failures);
    const queue: Gauge<'sink' | 'kind'> = new Gauge({
      name: 'tollgate_audit_sink_queue_depth',
      help: 'Audit events queued per sink.',
      labelNames: ['sink', 'kind'],
      registers: [r],
      collect: () => {
        queue.reset();
        for (const sink of audit()) queue.set({ sink: sink.name, kind: sink.kind }, sink.queueDepth);
      },
    });
    this.#provenanceMetrics(r);
    this.#budgetMetrics(r);
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: r });
  }

  /** Provenance's counters, read from its own sources at scrape time (ADR 1601, ADR 1604). */
  #provenanceMetrics(r: Registry<RegistryContentType>): void {
    const bypass: CounterFamily = new CounterFamily(
      r,
      'tollgate_provenance_bypass_total',
      "Connections from the pod to a provider endpoint that did not come from the sidecar (Tetragon tcp_connect), by the endpoint's provider.",
      ['provider'],
      () => {
        bypass.clear();
        for (const [provider, count] of this.#sources.provenanceBypass?.() ?? []) bypass.series(provider).value = count;
      },
    );
    const trailDropped: CounterFamily = new CounterFamily(
      r,
      'tollgate_provenance_trail_dropped_total',
      'Causal trail entries pushed out by a bound: trace (oldest trace forgotten), action (a trace full), process (exec tree full), pending (an unlinked action waiting for its call).',
      ['reason'],
      () => {
        trailDropped.clear();
        for (const [reason, count] of this.#sources.provenanceTrailDrops?.() ?? []) trailDropped.series(reason).value = count;
      },
    );
  }

  #budgetMetrics(r: Registry<RegistryContentType>): void {
    // One pass over the budgets in memory feeds both families (ADR 1306), so a scrape costs the same however many
    // users the ledger holds. User ids appear only with metrics.perUser, like every other per-user series: the
    // budgets API that shows them is for admins, and so are they. Without it, one series per policy carries the
    // highest utilisation among its users.
    const budgetUsers: Gauge<'policy' | 'state'> = new Gauge({
      name: 'tollgate_budget_users',
      help: "Users past their policy's first alert threshold (state warning) or out of budget (state exhausted) in the current period, among the users in memory.",
      labelNames: ['policy', 'state'],
      registers: [],
    });
    const budgetRatio: Gauge<'policy' | 'user'> = new Gauge({
      name: 'tollgate_budget_utilization_ratio',
      help: "Budget used ÷ budget (the policy's limit plus active grants) in the current period, from the first alert threshold on; 1 or more: exhausted. Per user with metrics.perUser, else the highest per policy.",
      labelNames: ['policy', 'user'],
      registers: [r],
      collect: () => {
        budgetRatio.reset();
        budgetUsers.reset();
        const standing = this.#sources.budgets?.(this.#perUser.enabled ? MAX_BUDGET_SERIES : 0);
        if (standing === undefined) return;
        for (const policy of standing.policies) {
          budgetUsers.set({ policy: policy.policy, state: 'warning' }, policy.warning);
          budgetUsers.set({ policy: policy.policy, state: 'exhausted' }, policy.exhausted);
          if (!this.#perUser.enabled) budgetRatio.set({ policy: policy.policy }, policy.maxRatio);
        }
        for (const near of standing.nearest) {
          budgetRatio.set({ policy: near.policy, user: near.userId.length > MAX_USER_LABEL ? near.userId.slice(0, MAX_USER_LABEL) : near.userId }, near.ratio);
        }
      },
    });
    // Registered after the ratio, whose collect fills it.
    r.registerMetric(budgetUsers);
  }

  watch(sources: ProxyMetricSources): void {
    this.#sources = { ...this.#sources, ...sources };
  }

  setPerUser(settings: PerUserMetrics): void {
    this.#perUser = { ...settings };
  }

  /** Process start to listening, set once by `tollgate proxy`. */
  setStartup(seconds: number): void {
    this.#startupSeconds = seconds;
  }

  callFinished(span: Span, model: string | null, timings: CallTimings): void {
    this.recordCall(span, model, timings);
  }

  /**
   * Adds one finished call. `model` is the price table's canonical id for the call (null when unpriced).
   * Allocation-free once the call's label sets have been seen.
   */
  recordCall(span: Span, model: string | null, timings: CallTimings): void {
    const route = span.route;
    const provider = span.provider;
    const series = this.#modelSeries(route, provider, model ?? OTHER_MODEL);
    const slot = STATUSES.indexOf(span.status) * CODES.length + CODES.indexOf(codeOf(span.status, span.statusCode));
    (series.requests[slot] ??= this.families.requests.series(route, provider, series.model, span.status, codeOf(span.status, span.statusCode))).value++;
    series.input.value += span.inputTokens;
    series.output.value += span.outputTokens;
    series.cacheRead.value += span.cachedTokens;
    series.cacheWrite.value += span.cacheWriteTokens;
    series.reasoning.value += span.reasoningTokens;
    series.cost.value += span.costUsd;

    const latency = this.#latencySeries(route, provider);
    const seconds = span.durationMs / 1000;
    latency.request.observe(seconds);
    const upstream = (timings.upstreamEnd - timings.upstreamStart) / 1000;
    if (upstream >= 0) {
      latency.upstream.observe(upstream);
      latency.overhead.observe(Math.max(0, seconds - upstream));
    }
    const firstByte = (timings.upstreamHeaders - timings.start) / 1000;
    if (firstByte >= 0) latency.firstByte.observe(firstByte);

    if (span.status === 'error' && span.error !== null && span.error.startsWith(CREDENTIAL_FAILURE) && route !== 'v1') {
      // a configured route's own credential is labelled with its route (at most 64 of them)
      const kind = isRouteName(route) ? ROUTES[route].credential : `route:${route}`;
      let failures = this.#credentialFailures.get(kind);
      if (failures === undefined) this.#credentialFailures.set(kind, (failures = this.families.credentialFailures.series(kind)));
      failures.value++;
    }
    if (this.#perUser.enabled && span.userId !== null) {
      const user = this.#userSeries(span.userId);
      user.requests.value++;
      user.cost.value += span.costUsd;
    }
  }

  #modelSeries(route: string, provider: string, model: string): ModelSeries {
    let byProvider = this.#models.get(route);
    if (byProvider === undefined) this.#models.set(route, (byProvider = new Map<string, Map<string, ModelSeries>>()));
    let byModel = byProvider.get(provider);
    if (byModel === undefined) byProvider.set(provider, (byModel = new Map<string, ModelSeries>()));
    let series = byModel.get(model);
    if (series === undefined) byModel.set(model, (series = new ModelSeries(this.families, route, provider, model)));
    return series;
  }

  #latencySeries(route: string, provider: string): LatencySeries {
    let byProvider = this.#latency.get(route);
    if (byProvider === undefined) this.#latency.set(route, (byProvider = new Map<string, LatencySeries>()));
    let series = byProvider.get(provider);
    if (series === undefined) byProvider.set(provider, (series = new LatencySeries(this.families, route, provider)));
    return series;
  }

  #userSeries(id: string): { requests: CounterSeries; cost: CounterSeries } {
    const userId = id.length > MAX_USER_LABEL ? id.slice(0, MAX_USER_LABEL) : id;
    const known = this.#users.get(userId);
    if (known !== undefined) return known;
    // Past the cap every new user shares one `other` series, so a flood of ids cannot grow the scrape.
    const user = this.#users.size < this.#perUser.maxUsers ? userId : OTHER_MODEL;
    const existing = this.#users.get(user);
    if (existing !== undefined) return existing;
    const created = { requests: this.families.userRequests.series(user), cost: this.families.userCost.series(user) };
    this.#users.set(user, created);
    return created;
  }
}

/**
 * tollgate_circuit_breaker_state, each route's breaker (a route with endpoints is open when all of theirs are), and
 * tollgate_endpoint_breaker_state, each endpoint's (ADR 0008). Both read their source at scrape time.
 */
function breakerGauges(
  registry: Registry<RegistryContentType>,
  routes: () => Readonly<Record<string, string>> | undefined,
  endpoints: () => Readonly<Record<string, Readonly<Record<string, string>>>> | undefined,
): void {
  const byRoute: Gauge<'route' | 'state'> = new Gauge({
    name: 'tollgate_circuit_breaker_state',
    help: 'Circuit breaker state per route: 1 for the current state (closed, half-open, open), 0 for the others.',
    labelNames: ['route', 'state'],
    registers: [registry],
    collect: () => {
      for (const [route, current] of Object.entries(routes() ?? {})) {
        for (const state of BREAKER_STATES) byRoute.set({ route, state }, state === current ? 1 : 0);
      }
    },
  });
  const byEndpoint: Gauge<'route' | 'endpoint' | 'state'> = new Gauge({
    name: 'tollgate_endpoint_breaker_state',
    help: 'Circuit breaker state per endpoint of a route with endpoints: 1 for the current state (closed, half-open, open), 0 for the others.',
    labelNames: ['route', 'endpoint', 'state'],
    registers: [registry],
    collect: () => {
      // Endpoints come and go with the config: only the current ones have series.
      byEndpoint.reset();
      for (const [route, each] of Object.entries(endpoints() ?? {})) {
        for (const [endpoint, current] of Object.entries(each)) {
          for (const state of BREAKER_STATES) byEndpoint.set({ route, endpoint, state }, state === current ? 1 : 0);
        }
      }
    },
  });
}
