import { describe, expect, it } from 'vitest';
import { familyTypes, parseSamples, sampleValue } from '../../../test/support/prometheus-text.ts';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import type { SpanWriterStats } from '../spans/span-writer.ts';
import { parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import { parseUsd } from '../../../contracts/money.ts';
import { BudgetBook } from '../budgets/budget-book.ts';
import { ProxyMetrics, type CallTimings } from './proxy-metrics.ts';

const TEXT = 'text/plain';
const OPENMETRICS = 'application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2';

/** A call that started at 0 ms, sent upstream at 2 ms, got headers at 150 ms and ended at 400 ms. */
const timings: CallTimings = { start: 0, upstreamStart: 2, upstreamHeaders: 150, upstreamEnd: 400 };
const notSent: CallTimings = { start: 0, upstreamStart: Number.NaN, upstreamHeaders: Number.NaN, upstreamEnd: Number.NaN };

async function scrape(metrics: ProxyMetrics, accept = TEXT): Promise<string> {
  return (await metrics.exposition.render(accept)).body;
}

describe('ProxyMetrics: calls', () => {
  it('counts requests, tokens and cost per route, provider and price-table model', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    const span = sampleSpan({ inputTokens: 1200, outputTokens: 300, cachedTokens: 200, cacheWriteTokens: 0, reasoningTokens: 64, costUsd: 0.000345, durationMs: 402 });
    metrics.recordCall(span, 'gpt-4o-mini', timings);
    metrics.recordCall({ ...span, model: 'gpt-4o-mini-2024-07-18' }, 'gpt-4o-mini', timings);
    metrics.recordCall(
      { ...span, status: 'upstream_error', statusCode: 503, inputTokens: 0, outputTokens: 0, cachedTokens: 0, reasoningTokens: 0, costUsd: 0 },
      'gpt-4o-mini',
      timings,
    );
    const body = await scrape(metrics);
    const labels = { route: 'beta', provider: 'openai', model: 'gpt-4o-mini' };
    expect(sampleValue(body, 'tollgate_requests_total', { ...labels, status: 'ok', code: '2xx' })).toBe(2);
    expect(sampleValue(body, 'tollgate_requests_total', { ...labels, status: 'upstream_error', code: '5xx' })).toBe(1);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...labels, type: 'input' })).toBe(2400);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...labels, type: 'output' })).toBe(600);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...labels, type: 'cache_read' })).toBe(400);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...labels, type: 'reasoning' })).toBe(128);
    expect(sampleValue(body, 'tollgate_cost_usd_total', labels)).toBeCloseTo(0.00069, 12);
  });

  it('labels a model without a price entry `other`, whatever id the caller sent', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    for (const model of ['my-fine-tune-1', 'my-fine-tune-2', 'x'.repeat(500)]) metrics.recordCall(sampleSpan({ model, priced: false, costUsd: 0 }), null, timings);
    const samples = parseSamples(await scrape(metrics));
    const requests = samples.filter((s) => s.name === 'tollgate_requests_total');
    expect(requests).toEqual([{ name: 'tollgate_requests_total', labels: { route: 'beta', provider: 'openai', model: 'other', status: 'ok', code: '2xx' }, value: 3 }]);
  });

  it("gives the HTTP status class the caller got: relayed, the proxy's own, or none when the caller left first", async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.recordCall(sampleSpan({ status: 'error', statusCode: null, error: 'upstream_unreachable: connect ECONNREFUSED' }), 'gpt-4o-mini', notSent);
    metrics.recordCall(sampleSpan({ status: 'rejected', statusCode: null, error: 'invalid_request: bad JSON' }), 'gpt-4o-mini', notSent);
    metrics.recordCall(sampleSpan({ status: 'client_aborted', statusCode: null }), 'gpt-4o-mini', notSent);
    metrics.recordCall(sampleSpan({ status: 'client_aborted', statusCode: 200 }), 'gpt-4o-mini', timings);
    // A stream that broke after the upstream's 200: the caller got 200 and a cut stream.
    metrics.recordCall(sampleSpan({ status: 'error', statusCode: 200, error: 'upstream_stream_error: truncated' }), 'gpt-4o-mini', timings);
    const body = await scrape(metrics);
    const count = (status: string, code: string) => sampleValue(body, 'tollgate_requests_total', { status, code });
    expect(count('error', '5xx')).toBe(1);
    expect(count('rejected', '4xx')).toBe(1);
    expect(count('client_aborted', 'none')).toBe(1);
    expect(count('client_aborted', '2xx')).toBe(1);
    expect(count('error', '2xx')).toBe(1);
  });

  it('observes the call, the upstream exchange, the first byte and the time the proxy added', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    // 402 ms in all; upstream 2 → 400 ms (398 ms); headers at 150 ms; the proxy added 402 − 398 = 4 ms.
    metrics.recordCall(sampleSpan({ durationMs: 402 }), 'gpt-4o-mini', timings);
    const body = await scrape(metrics);
    const labels = { route: 'beta', provider: 'openai' };
    expect(sampleValue(body, 'tollgate_request_duration_seconds_sum', labels)).toBeCloseTo(0.402, 9);
    expect(sampleValue(body, 'tollgate_request_duration_seconds_bucket', { ...labels, le: '0.25' })).toBe(0);
    expect(sampleValue(body, 'tollgate_request_duration_seconds_bucket', { ...labels, le: '0.5' })).toBe(1);
    expect(sampleValue(body, 'tollgate_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(1);
    expect(sampleValue(body, 'tollgate_upstream_duration_seconds_sum', labels)).toBeCloseTo(0.398, 9);
    expect(sampleValue(body, 'tollgate_time_to_first_byte_seconds_sum', labels)).toBeCloseTo(0.15, 9);
    expect(sampleValue(body, 'tollgate_overhead_seconds_sum', labels)).toBeCloseTo(0.004, 9);
    expect(sampleValue(body, 'tollgate_overhead_seconds_bucket', { ...labels, le: '0.0025' })).toBe(0);
    expect(sampleValue(body, 'tollgate_overhead_seconds_bucket', { ...labels, le: '0.005' })).toBe(1);
  });

  it('does not observe upstream phases of a call that never reached the upstream', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.recordCall(sampleSpan({ status: 'rejected', statusCode: null, durationMs: 3 }), 'gpt-4o-mini', notSent);
    const body = await scrape(metrics);
    expect(sampleValue(body, 'tollgate_request_duration_seconds_count', { route: 'beta' })).toBe(1);
    expect(sampleValue(body, 'tollgate_upstream_duration_seconds_count', { route: 'beta' })).toBe(0);
    expect(sampleValue(body, 'tollgate_time_to_first_byte_seconds_count', { route: 'beta' })).toBe(0);
  });

  it("counts credential failures by the route's credential kind", async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.recordCall(sampleSpan({ route: 'gamma', provider: 'anthropic', status: 'error', statusCode: null, error: 'credential_unavailable: no ADC' }), null, notSent);
    metrics.recordCall(sampleSpan({ route: 'alpha', provider: 'google', status: 'error', statusCode: null, error: 'credential_unavailable: no ADC' }), null, notSent);
    metrics.recordCall(sampleSpan({ route: 'beta', status: 'error', statusCode: null, error: 'credential_unavailable: OPENAI_API_KEY is not set' }), null, notSent);
    metrics.recordCall(sampleSpan({ route: 'beta', status: 'error', statusCode: null, error: 'upstream_timeout: 60 s' }), null, notSent);
    const body = await scrape(metrics);
    expect(sampleValue(body, 'tollgate_credential_failures_total', { kind: 'google-adc' })).toBe(2);
    expect(sampleValue(body, 'tollgate_credential_failures_total', { kind: 'openai-api-key' })).toBe(1);
  });

  it('keeps per-user series off by default, and caps them when on', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.recordCall(sampleSpan({ userId: 'alice' }), 'gpt-4o-mini', timings);
    expect(sampleValue(await scrape(metrics), 'tollgate_user_requests_total', { user: 'alice' })).toBeUndefined();

    metrics.setPerUser({ enabled: true, maxUsers: 2 });
    for (const user of ['alice', 'bob', 'alice', 'carol', 'dave']) metrics.recordCall(sampleSpan({ userId: user, costUsd: 0.5 }), 'gpt-4o-mini', timings);
    const users = parseSamples(await scrape(metrics)).filter((s) => s.name === 'tollgate_user_requests_total');
    expect(users.map((s) => [s.labels.user, s.value])).toEqual([
      ['alice', 2],
      ['bob', 1],
      ['other', 2],
    ]);
    expect(sampleValue(await scrape(metrics), 'tollgate_user_cost_usd_total', { user: 'other' })).toBe(1);
  });
});

describe('ProxyMetrics: state read at scrape time', () => {
  it('reads span store, in-flight calls, breakers and config from their owners', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    const stats: SpanWriterStats = { recorded: 10, written: 7, dropped: 3, buffered: 0, writeErrors: 4, droppedBufferFull: 1, failing: true };
    metrics.watch({
      spans: () => stats,
      spanStoreKind: () => 'bigquery',
      inFlight: () => 5,
      breakers: () => ({ beta: 'open', alpha: 'closed' }),
      config: () => ({ revision: 12, appliedAtMs: 1_700_000_000_500 }),
      rateLimited: () => ({
        user: { requests: 3, tokens: 1, concurrent: 0 },
        team: { requests: 2, tokens: 0, concurrent: 0 },
        workload: { requests: 0, tokens: 0, concurrent: 0 },
        namespace: { requests: 0, tokens: 0, concurrent: 5 },
      }),
    });
    const body = await scrape(metrics);
    expect(sampleValue(body, 'tollgate_rate_limited_total', { limit: 'requests', level: 'user' })).toBe(3);
    expect(sampleValue(body, 'tollgate_rate_limited_total', { limit: 'tokens', level: 'user' })).toBe(1);
    expect(sampleValue(body, 'tollgate_rate_limited_total', { limit: 'concurrent', level: 'user' })).toBe(0);
    expect(sampleValue(body, 'tollgate_rate_limited_total', { limit: 'requests', level: 'team' })).toBe(2);
    expect(sampleValue(body, 'tollgate_rate_limited_total', { limit: 'concurrent', level: 'namespace' })).toBe(5);
    expect(sampleValue(body, 'tollgate_spans_written_total')).toBe(7);
    expect(sampleValue(body, 'tollgate_spans_dropped_total', { reason: 'buffer_full' })).toBe(1);
    expect(sampleValue(body, 'tollgate_spans_dropped_total', { reason: 'write_failed' })).toBe(2);
    expect(sampleValue(body, 'tollgate_span_store_write_errors_total')).toBe(4);
    expect(sampleValue(body, 'tollgate_span_store_failing')).toBe(1);
    expect(sampleValue(body, 'tollgate_span_store_info', { kind: 'bigquery' })).toBe(1);
    expect(sampleValue(body, 'tollgate_inflight_requests')).toBe(5);
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'beta', state: 'open' })).toBe(1);
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'beta', state: 'closed' })).toBe(0);
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'alpha', state: 'closed' })).toBe(1);
    expect(sampleValue(body, 'tollgate_config_revision')).toBe(12);
    expect(sampleValue(body, 'tollgate_config_last_apply_timestamp_seconds')).toBe(1_700_000_000.5);
    // The next scrape sees the state of its own time.
    stats.written = 9;
    stats.failing = false;
    const later = await scrape(metrics);
    expect(sampleValue(later, 'tollgate_spans_written_total')).toBe(9);
    expect(sampleValue(later, 'tollgate_span_store_failing')).toBe(0);
  });

  it('shows users past their first alert threshold, the most used first, at most 100, by user only with metrics.perUser', async () => {
    const at = Date.parse('2026-11-10T12:00:00Z');
    const usd = (text: string) => parseUsd(text) as bigint;
    const book = new BudgetBook(
      new PolicySet(
        parseBudgetPolicies(
          [
            { name: 'team', users: ['*'], limitUsd: 10 },
            { name: 'free', users: ['dee'], limitUsd: 0 },
          ],
          'policies',
        ),
      ),
      { usage: () => undefined, grants: (user) => (user === 'bob' ? [{ id: 'g1', amount: usd('10'), used: 0n, reason: null, createdAt: at - 1000, expiresAt: null }] : []) },
    );
    book.charge('ann', usd('1'), at); // 10 % used, below the threshold: no series
    book.charge('bob', usd('15'), at); // a grant adds to the limit: 15 of 20 used (see below)
    book.charge('cid', usd('12'), at); // overshot: 12 of 10
    book.record('dee', at); // a zero limit is exhausted from the start
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.watch({ budgets: (nearest) => book.standing(at, nearest) });

    // Without per-user series: one per policy (its highest), and counts by state; no user id anywhere.
    let body = await scrape(metrics);
    expect(body).not.toMatch(/user="/);
    expect(sampleValue(body, 'tollgate_budget_utilization_ratio', { policy: 'team' })).toBe(1.2);
    expect(sampleValue(body, 'tollgate_budget_utilization_ratio', { policy: 'free' })).toBe(1);
    expect(sampleValue(body, 'tollgate_budget_users', { policy: 'team', state: 'exhausted' })).toBe(1);
    // bob: the grant's 10 absorb 10 of his 15, the limit 5 of 10 (50 %, under the 80 % threshold): ok.
    expect(sampleValue(body, 'tollgate_budget_users', { policy: 'team', state: 'warning' })).toBe(0);

    metrics.setPerUser({ enabled: true, maxUsers: 10 });
    for (let i = 0; i < 150; i++) book.charge(`user-${i}`, BigInt(800 + i) * 100_000_000n, at); // 8.00 to 9.49 USD of 10: 80 % to 94.9 %
    body = await scrape(metrics);
    const ratio = (user: string) => sampleValue(body, 'tollgate_budget_utilization_ratio', { user });
    expect(ratio('ann')).toBeUndefined();
    expect(sampleValue(body, 'tollgate_budget_utilization_ratio', { policy: 'team', user: 'cid' })).toBe(1.2);
    expect(ratio('dee')).toBe(1);
    // The cap keeps the 100 users nearest their limit: of 150 at 80-94.9 %, the lowest go.
    expect(parseSamples(body).filter((x) => x.name === 'tollgate_budget_utilization_ratio')).toHaveLength(100);
    expect(ratio('user-149')).toBeCloseTo(0.949, 9);
    expect(ratio('user-0')).toBeUndefined();
    expect(sampleValue(body, 'tollgate_budget_users', { policy: 'team', state: 'warning' })).toBe(150);
  });

  it("shows each audit sink's counters, and forgets a sink that is gone", async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    let sinks = [
      { name: 'file', kind: 'jsonl', received: 10, delivered: 8, retried: 2, dropped: 1, deadLettered: 1, queueDepth: 0, failures: 1 },
      { name: 'warehouse', kind: 'bigquery', received: 10, delivered: 4, retried: 0, dropped: 0, deadLettered: 0, queueDepth: 6, failures: 3 },
    ];
    metrics.watch({ audit: () => sinks });
    const body = await scrape(metrics);
    expect(sampleValue(body, 'tollgate_audit_events_delivered_total', { sink: 'file' })).toBe(8);
    expect(sampleValue(body, 'tollgate_audit_events_dead_lettered_total', { sink: 'file', kind: 'jsonl' })).toBe(1);
    expect(sampleValue(body, 'tollgate_audit_sink_write_failures_total', { sink: 'warehouse', kind: 'bigquery' })).toBe(3);
    expect(sampleValue(body, 'tollgate_audit_sink_queue_depth', { sink: 'warehouse' })).toBe(6);
    sinks = sinks.slice(0, 1);
    const later = await scrape(metrics);
    expect(sampleValue(later, 'tollgate_audit_sink_write_failures_total', { sink: 'warehouse' })).toBeUndefined();
    expect(sampleValue(later, 'tollgate_audit_sink_queue_depth', { sink: 'warehouse' })).toBeUndefined();
  });
});

describe('ProxyMetrics: provenance', () => {
  it('counts what the causal trail’s bounds pushed out, by bound', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    const drops = new Map([
      ['trace', 3],
      ['pending', 1],
    ]);
    metrics.watch({ provenanceTrailDrops: () => drops });
    const body = await scrape(metrics);
    expect(sampleValue(body, 'tollgate_provenance_trail_dropped_total', { reason: 'trace' })).toBe(3);
    expect(sampleValue(body, 'tollgate_provenance_trail_dropped_total', { reason: 'pending' })).toBe(1);
    expect(sampleValue(body, 'tollgate_provenance_trail_dropped_total', { reason: 'action' })).toBeUndefined();
  });
});

describe('ProxyMetrics: exposition', () => {
  it('serves OpenMetrics when asked, and the text format keeps its _total names after it', async () => {
    const metrics = new ProxyMetrics();
    metrics.recordCall(sampleSpan(), 'gpt-4o-mini', timings);
    const open = await metrics.exposition.render(OPENMETRICS);
    expect(open.contentType).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    expect(open.body.endsWith('# EOF\n')).toBe(true);
    expect(familyTypes(open.body).get('tollgate_requests')).toBe('counter');
    expect(sampleValue(open.body, 'tollgate_requests_total', { status: 'ok' })).toBe(1);

    const text = await metrics.exposition.render('text/plain;version=0.0.4');
    expect(text.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(familyTypes(text.body).get('tollgate_requests_total')).toBe('counter');
    expect(familyTypes(text.body).get('tollgate_request_duration_seconds')).toBe('histogram');
    expect(sampleValue(text.body, 'tollgate_requests_total', { status: 'ok' })).toBe(1);
    // Node's process metrics come along.
    expect(familyTypes(text.body).has('process_cpu_seconds_total')).toBe(true);
  });

  it('renders concurrent scrapes of both formats each in its own format', async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    metrics.recordCall(sampleSpan(), 'gpt-4o-mini', timings);
    const renders = await Promise.all([OPENMETRICS, TEXT, OPENMETRICS, TEXT].map((accept) => metrics.exposition.render(accept)));
    expect(renders.map((r) => r.body.endsWith('# EOF\n'))).toEqual([true, false, true, false]);
    expect(familyTypes(renders[3]!.body).get('tollgate_requests_total')).toBe('counter');
  });
});
