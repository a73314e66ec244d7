// What recording one finished call costs the metrics on the request path (ADR 1500): the time of
// ProxyMetrics.recordCall and the heap it allocates, once its label sets exist, against prom-client's own label
// children doing the same counting. In-process, so the shared machine's load barely moves it.
// Usage: node --expose-gc bench/metrics-record.ts [calls=1000000]

import { PerformanceObserver } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, Histogram, Registry } from 'prom-client';
import { ProxyMetrics, type CallTimings } from '../sidecar/src/metrics/proxy-metrics.ts';
import { sampleSpan } from '../test/support/sample-span.ts';

const calls = Number(process.argv[2] ?? 1_000_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const spans = [
  sampleSpan(),
  sampleSpan({ route: 'gamma-direct', provider: 'anthropic', model: 'claude-sonnet-4-5', userId: 'bob' }),
  sampleSpan({ status: 'upstream_error', statusCode: 503 }),
];
const models = ['gpt-4o-mini', 'claude-sonnet-4-5', 'gpt-4o-mini'];
const timings: CallTimings = { start: 0, upstreamStart: 1.5, upstreamHeaders: 80, upstreamEnd: 120 };

/** Garbage collections while `fn` runs: none means the loop allocated (next to) nothing. */
async function collections(fn: () => void): Promise<number> {
  let count = 0;
  const observer = new PerformanceObserver((list) => (count += list.getEntries().length));
  observer.observe({ entryTypes: ['gc'] });
  fn();
  await sleep(200); // gc entries are delivered asynchronously
  observer.disconnect();
  return count;
}

async function measure(label: string, record: (i: number) => void): Promise<void> {
  for (let i = 0; i < 100_000; i++) record(i); // warm-up: JIT, and every label set seen once
  gc!();
  let ns = 0;
  const gcs = await collections(() => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) record(i);
    ns = Number(process.hrtime.bigint() - start) / calls;
  });
  console.log(JSON.stringify({ label, calls, ns_per_call: Math.round(ns), garbage_collections: gcs }));
}

const metrics = new ProxyMetrics({ defaultMetrics: false });
await measure('ProxyMetrics.recordCall', (i) => metrics.recordCall(spans[i % 3]!, models[i % 3]!, timings));

// The same counting with prom-client's label children, for comparison (one child per label set, kept).
const registry = new Registry();
const requests = new Counter({ name: 'r_total', help: 'r', labelNames: ['route', 'provider', 'model', 'status', 'code'], registers: [registry] });
const tokens = new Counter({ name: 't_total', help: 't', labelNames: ['route', 'provider', 'model', 'type'], registers: [registry] });
const cost = new Counter({ name: 'c_total', help: 'c', labelNames: ['route', 'provider', 'model'], registers: [registry] });
const duration = new Histogram({
  name: 'd_seconds',
  help: 'd',
  labelNames: ['route', 'provider'],
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300],
  registers: [registry],
});
const children = spans.map((s, i) => ({
  requests: requests.labels(s.route, s.provider, models[i]!, s.status, '2xx'),
  input: tokens.labels(s.route, s.provider, models[i]!, 'input'),
  output: tokens.labels(s.route, s.provider, models[i]!, 'output'),
  cached: tokens.labels(s.route, s.provider, models[i]!, 'cache_read'),
  cost: cost.labels(s.route, s.provider, models[i]!),
  duration: duration.labels(s.route, s.provider),
  upstream: duration.labels(s.route, s.provider),
}));
await measure('prom-client label children', (i) => {
  const s = spans[i % 3]!;
  const c = children[i % 3]!;
  c.requests.inc();
  c.input.inc(s.inputTokens);
  c.output.inc(s.outputTokens);
  c.cached.inc(s.cachedTokens);
  c.cost.inc(s.costUsd);
  c.duration.observe(s.durationMs / 1000);
  c.upstream.observe(0.1185);
});
