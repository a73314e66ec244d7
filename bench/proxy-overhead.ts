// What does the proxy add to a call? Sends the same OpenAI chat-completions request to the fake upstream
// directly and through `tollgate proxy` (a separate process, spans on, SQLite), at a fixed arrival rate,
// and reports the added latency at p50/p99, streaming time-to-first-byte overhead, closed-loop throughput,
// the proxy's RSS idle and under load, and its peak RSS while a 50 MB streamed body passes through.
// Usage: node bench/proxy-overhead.ts [seconds-per-phase=10] [rate=500] [--compiled]
//   --compiled runs the proxy from dist/ (npm run build) with the sidecar image's flags and environment (read from the Dockerfile).
// Results go in BENCHMARKS.md.

import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { Pool } from 'undici';
import { startFakeUpstream } from '../test/fakes/llm-upstream.ts';
import { startProxyProcess } from '../test/e2e/proxy-process.ts';
import { compiledLikeTheImage } from './sidecar-process.ts';

const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const compiled = process.argv.includes('--compiled');
const seconds = Number(positional[0] ?? 10);
const rate = Number(positional[1] ?? 500);
const image = compiledLikeTheImage();
const KEY = 'sk-bench';
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const streamBody = JSON.stringify({ model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hello.' }] });

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function call(pool: Pool, path: string, payload: string, headers: Record<string, string>): Promise<{ total: number; ttfb: number }> {
  const start = performance.now();
  const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body: payload });
  let ttfb = NaN;
  for await (const _chunk of res.body) {
    if (Number.isNaN(ttfb)) ttfb = performance.now() - start;
  }
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return { total: performance.now() - start, ttfb };
}

/** Open loop: arrivals on a fixed schedule, whatever the latency, so queueing shows up in the tail. */
async function openLoop(pool: Pool, path: string, payload: string, headers: Record<string, string>): Promise<{ totals: number[]; ttfbs: number[]; errors: number }> {
  const totals: number[] = [];
  const ttfbs: number[] = [];
  let errors = 0;
  const count = seconds * rate;
  const interval = 1000 / rate;
  const began = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const due = began + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(
      call(pool, path, payload, headers).then(
        (r) => {
          totals.push(r.total);
          ttfbs.push(r.ttfb);
        },
        () => void errors++,
      ),
    );
  }
  await Promise.all(inFlight);
  totals.sort((a, b) => a - b);
  ttfbs.sort((a, b) => a - b);
  return { totals, ttfbs, errors };
}

async function closedLoop(pool: Pool, path: string, headers: Record<string, string>, concurrency: number): Promise<number> {
  let done = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await call(pool, path, body, headers);
        done++;
      }
    }),
  );
  return done / seconds;
}

const upstream = await startFakeUpstream('openai', { expectApiKey: KEY });
const proxy = await startProxyProcess({
  configYaml: `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: { kind: sqlite, path: spans.db }\n`,
  env: { ...(compiled ? image.env : {}), OPENAI_API_KEY: KEY, TOLLGATE_LOG_LEVEL: 'warn' },
  ...(compiled ? { cli: image.cli, nodeArgs: image.nodeArgs } : {}),
});
const startRss = rssMb(proxy.child.pid!);
const pid = proxy.child.pid!;
const direct = new Pool(upstream.url, { connections: 64 });
const viaProxy = new Pool(proxy.url, { connections: 64 });
const auth = { authorization: `Bearer ${KEY}` };

// warm up both paths (JIT, connections, the span worker)
await openLoop(direct, '/v1/chat/completions', body, auth);
await openLoop(viaProxy, '/proxy/beta/v1/chat/completions', body, {});
const idleRss = rssMb(pid);

const d = await openLoop(direct, '/v1/chat/completions', body, auth);
const p = await openLoop(viaProxy, '/proxy/beta/v1/chat/completions', body, {});
const loadRss = rssMb(pid);
const ds = await openLoop(direct, '/v1/chat/completions', streamBody, auth);
const ps = await openLoop(viaProxy, '/proxy/beta/v1/chat/completions', streamBody, {});
const directRps = await closedLoop(direct, '/v1/chat/completions', auth, 32);
const proxyRps = await closedLoop(viaProxy, '/proxy/beta/v1/chat/completions', {}, 32);

// 50 MB and 200 MB streamed through: if the proxy held bodies whole, its peak RSS would grow with the size
const bigStreams: Record<string, { rss_before: string; rss_peak: string; seconds: string }> = {};
for (const mb of [50, 200]) {
  upstream.behave({ bigBodyBytes: mb * 1024 * 1024 });
  const before = rssMb(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 10);
  const big = await call(viaProxy, '/proxy/beta/v1/chat/completions', streamBody, {});
  clearInterval(sampler);
  bigStreams[`${mb}MB`] = { rss_before: before.toFixed(1), rss_peak: peak.toFixed(1), seconds: (big.total / 1000).toFixed(2) };
}
upstream.behave({});

const spans = (await (await fetch(`${proxy.url}/_local/api/traces?limit=1`)).json()) as { count: number };
const f = (n: number) => n.toFixed(3);
const report = {
  machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`,
  phase_seconds: seconds,
  rate_per_second: rate,
  non_streaming_ms: {
    direct_p50: f(pct(d.totals, 50)),
    proxy_p50: f(pct(p.totals, 50)),
    overhead_p50: f(pct(p.totals, 50) - pct(d.totals, 50)),
    direct_p99: f(pct(d.totals, 99)),
    proxy_p99: f(pct(p.totals, 99)),
    overhead_p99: f(pct(p.totals, 99) - pct(d.totals, 99)),
    errors: d.errors + p.errors,
  },
  streaming_ttfb_ms: {
    direct_p50: f(pct(ds.ttfbs, 50)),
    proxy_p50: f(pct(ps.ttfbs, 50)),
    overhead_p50: f(pct(ps.ttfbs, 50) - pct(ds.ttfbs, 50)),
    overhead_p99: f(pct(ps.ttfbs, 99) - pct(ds.ttfbs, 99)),
  },
  throughput_rps_32_concurrent: { direct: Math.round(directRps), proxy: Math.round(proxyRps) },
  proxy_run: compiled ? `dist/ (compiled) with the sidecar image's ${JSON.stringify(image.env)} ${image.nodeArgs.join(' ')}` : 'cmd/tollgate.ts (type stripping)',
  proxy_rss_mb: { idle_at_start: startRss.toFixed(1), idle_after_warmup: idleRss.toFixed(1), after_load: loadRss.toFixed(1) },
  big_streams: bigStreams,
  spans_recorded: spans.count > 0,
};
console.log(JSON.stringify(report, null, 2));
await direct.close();
await viaProxy.close();
await proxy.stop();
await upstream.close();
