// Model aliases with fallback (issue 36, ADR 0902): what an alias costs per call, and what callers see while
// its primary goes down.
//
// 1. In process: alias resolution as the /v1 gateway does it per call (the alias looked up in the config's
//    aliases, then attemptOrder over a 3-target alias with the real TargetHealth and CircuitBreakers behind
//    `available`), against the plain model's resolution (the configured routes, then findModel in the price
//    table); and AliasCall.run() around an attempt that answers at once (the deadline timer, the abort, the
//    promises), against calling that attempt directly. Median ns per call over several rounds, after warm-up.
// 2. A real `tollgate proxy` with an alias of two targets on two fake upstreams in this process (the openai
//    fake behind route beta, priority 0; the anthropic fake behind gamma-direct, priority 1), called by 16
//    connections (undici, closed loop) on /v1/chat/completions, unstreamed:
//    - steady: the alias, the plain model (gpt-4o-mini, the same upstream) and the secondary's own model
//      (claude-haiku-4-5 on gamma-direct, a translated call) in rotating blocks on one proxy, nothing failing:
//      the latency an alias adds, and what the secondary's path costs without any fallback;
//    - refused / 503: a fresh proxy each; halfway through the primary goes down (its server closed, in-flight
//      connections destroyed and new ones refused; or every answer a 503). Calls, calls failed (non-2xx or an
//      error, as the caller saw them) and latency before, in the first second after (by the time each call
//      ended) and after;
//    - plain-refused: the plain model with the same outage, what callers see without an alias.
// Usage: node bench/fallback.ts [seconds-per-run=12] [--compiled] [--micro-only] [--macro-only] [--json FILE]
//   --compiled runs the proxy from dist/ (npm run build) with the sidecar image's flags and environment.
// Results go in BENCHMARKS.md.

import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { Pool } from 'undici';
import type { AliasTarget, ModelAlias } from '../contracts/model-aliases.ts';
import { parseConfigYaml } from '../sidecar/src/config/config-file.ts';
import { ConfigStore } from '../sidecar/src/config/config-store.ts';
import { AliasCall } from '../sidecar/src/fallback/alias-call.ts';
import { attemptOrder } from '../sidecar/src/fallback/attempt-order.ts';
import { configuredAliases } from '../sidecar/src/fallback/configured-aliases.ts';
import { TargetHealth } from '../sidecar/src/fallback/target-health.ts';
import { routeCatalog } from '../sidecar/src/routes/route-catalog.ts';
import { findModel } from '../sidecar/src/routes/v1-plan.ts';
import { CircuitBreaker } from '../sidecar/src/upstream/breaker.ts';
import type { UpstreamResponse } from '../sidecar/src/upstream/upstream-client.ts';
import { startProxyProcess, type ProxyProcess } from '../test/e2e/proxy-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../test/fakes/llm-upstream.ts';
import { compiledLikeTheImage } from './sidecar-process.ts';

const args = process.argv.slice(2);
const positional = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--json');
const seconds = Number(positional[0] ?? 12);
const compiled = args.includes('--compiled');
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : undefined;
const CONNECTIONS = 16;
const OPENAI_KEY = 'sk-bench-openai';
const ANTHROPIC_KEY = 'sk-ant-bench';
const ALIAS = 'chat';
const PLAIN = 'gpt-4o-mini';
const SECONDARY_MODEL = 'claude-haiku-4-5';

const load = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

function median(values: readonly number[]): number {
  return pct(
    [...values].sort((a, b) => a - b),
    50,
  );
}

// ---------------------------------------------------------------------------------------------------------
// 1. Per call, in process

const MICRO_CONFIG = `
models:
  claude-sonnet:
    targets:
      - { route: gamma-direct, model: claude-sonnet-4-5 }
      - { route: gamma, model: "claude-sonnet-4-5@20250929", priority: 1 }
      - { route: gamma-cloudb, model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", priority: 1 }
`;

interface MicroResult {
  name: string;
  nsPerCall: number;
  rounds: number[];
}

/** Median ns per call of `op` over `rounds` rounds of `iterations` calls, after a warm-up round. */
function measureSync(name: string, iterations: number, rounds: number, op: (i: number) => number): MicroResult {
  let sink = 0;
  for (let i = 0; i < iterations; i++) sink += op(i);
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) sink += op(i);
    perRound.push(Number(process.hrtime.bigint() - started) / iterations);
  }
  if (sink === -1) console.log('unreachable'); // keeps the results in use
  return { name, nsPerCall: median(perRound), rounds: perRound };
}

async function measureAsync(name: string, iterations: number, rounds: number, op: () => Promise<unknown>): Promise<MicroResult> {
  for (let i = 0; i < iterations; i++) await op();
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await op();
    perRound.push(Number(process.hrtime.bigint() - started) / iterations);
  }
  return { name, nsPerCall: median(perRound), rounds: perRound };
}

async function micro(): Promise<MicroResult[]> {
  const snapshot = new ConfigStore(parseConfigYaml(MICRO_CONFIG, 'bench')).current();
  const { config, prices } = snapshot;
  const logger = pino({ level: 'silent' });
  const health = new TargetHealth();
  // UpstreamClient.breakerOpen for a route without endpoints: the route's states, its one implicit endpoint, its
  // breaker's state (EndpointPool.refusing).
  const breakers = new Map<string, Map<string, CircuitBreaker>>(
    ['gamma-direct', 'gamma', 'gamma-cloudb'].map((route) => [route, new Map([['', new CircuitBreaker(route, config.breaker, logger)]])]),
  );
  const breakerOpen = (route: string) => breakers.get(route)?.get('')?.state() === 'open';
  const N = 200_000;
  const R = 7;
  const results: MicroResult[] = [];

  // gateway.ts's aliasOf: every /v1 call pays this, alias or not.
  const aliasOf = (model: string): ModelAlias | undefined => {
    const aliases = configuredAliases(config);
    return aliases.size === 0 ? undefined : aliases.get(model);
  };
  results.push(measureSync('alias lookup: configuredAliases(config).get(name)', N, R, () => aliasOf('claude-sonnet')!.attempts));
  results.push(measureSync('the same lookup for a model that is no alias (a miss)', N, R, () => (aliasOf('claude-sonnet-4-5') === undefined ? 1 : 0)));
  // AliasCall's first round: what is known now decides which targets are available.
  const order = (alias: ModelAlias): AliasTarget[] => {
    const now = Date.now();
    return attemptOrder(alias, (target) => health.coolingUntil(target, now) === 0 && !breakerOpen(target.route), Math.random);
  };
  const definition = aliasOf('claude-sonnet')!;
  results.push(measureSync('attemptOrder alone, 3 targets, no health lookups', N, R, () => attemptOrder(definition, () => true, Math.random)[0]!.priority));
  results.push(measureSync('alias lookup + attemptOrder, 3 targets', N, R, () => order(aliasOf('claude-sonnet')!)[0]!.priority));
  // gateway.ts's aliasTarget for the first target tried: its route and its price entry.
  const resolveAlias = (): number => {
    const first = order(aliasOf('claude-sonnet')!)[0]!;
    const module = routeCatalog(config).get(first.route)!;
    return prices.resolve(module.provider, first.model) === undefined ? 0 : 1;
  };
  results.push(measureSync('... + the first target\u2019s route and price entry', N, R, resolveAlias));
  // gateway.ts's resolveModel for a priced model, synchronous part: configured routes, then findModel.
  const resolvePlain = (model: string): number => {
    const catalog = routeCatalog(config);
    if (catalog.configuredForModel(model) !== undefined) return 2;
    return findModel(prices, model, catalog.configuredProviders) === undefined ? 0 : 1;
  };
  results.push(measureSync('plain model: configuredForModel + findModel (claude-sonnet-4-5)', N, R, () => resolvePlain('claude-sonnet-4-5')));
  results.push(measureSync('plain model: configuredForModel + findModel (gpt-4o-mini)', N, R, () => resolvePlain('gpt-4o-mini')));

  // The alias machinery around one attempt that answers 200 at once, against calling that attempt directly.
  const answered = { statusCode: 200, headers: {} } as Partial<UpstreamResponse> as UpstreamResponse;
  const attempt = async (target: AliasTarget) => ({ plan: target.model, upstream: answered });
  results.push(
    await measureAsync('AliasCall.run(), the first attempt answering 200', 50_000, R, () =>
      new AliasCall<string>({ alias: 'claude-sonnet', definition, health, breakerOpen, attempt }).run(),
    ),
  );
  results.push(await measureAsync('the same attempt awaited directly', 50_000, R, () => attempt(definition.targets[0]!)));
  return results;
}

// ---------------------------------------------------------------------------------------------------------
// 2. A real proxy under 16 connections

const chatBody = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });

interface Call {
  startedAt: number;
  endedAt: number;
  ms: number;
  status: number;
}

interface PhaseStats {
  calls: number;
  failed: number;
  callsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Non-2xx statuses and errors the caller saw, with their counts. */
  failures: Record<string, number>;
}

function stats(calls: readonly Call[], spanMs: number): PhaseStats {
  const ms = calls.map((c) => c.ms).sort((a, b) => a - b);
  const failures: Record<string, number> = {};
  let failed = 0;
  for (const c of calls) {
    if (c.status >= 200 && c.status < 300) continue;
    failed++;
    const key = c.status === 0 ? 'error' : String(c.status);
    failures[key] = (failures[key] ?? 0) + 1;
  }
  const r = (n: number) => Math.round(n * 1000) / 1000;
  return {
    calls: calls.length,
    failed,
    callsPerSecond: Math.round(calls.length / (spanMs / 1000)),
    p50Ms: r(pct(ms, 50)),
    p99Ms: r(pct(ms, 99)),
    maxMs: r(ms.at(-1) ?? Number.NaN),
    failures,
  };
}

/** `connections` callers in a closed loop for `ms`, each call's end time, latency and status recorded. */
async function drive(pool: Pool, model: string, ms: number, calls: Call[], onTick?: () => void): Promise<void> {
  const body = chatBody(model);
  const end = performance.now() + ms;
  const ticker = onTick ? setInterval(onTick, 250) : undefined;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const start = performance.now();
        let status = 0;
        try {
          const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
          await res.body.arrayBuffer();
          status = res.statusCode;
        } catch {
          status = 0;
        }
        const endedAt = performance.now();
        calls.push({ startedAt: start, endedAt, ms: endedAt - start, status });
      }
    }),
  );
  if (ticker) clearInterval(ticker);
}

interface Bed {
  primary: FakeUpstream;
  secondary: FakeUpstream;
  proxy: ProxyProcess;
  pool: Pool;
  /** Requests each fake received since the last call (the fakes keep every request; this empties them). */
  drain(): { primary: number; secondary: number };
  close(): Promise<void>;
}

async function startBed(): Promise<Bed> {
  const primary = await startFakeUpstream('openai', { expectApiKey: OPENAI_KEY });
  const secondary = await startFakeUpstream('anthropic', { expectApiKey: ANTHROPIC_KEY });
  const image = compiledLikeTheImage();
  const proxy = await startProxyProcess({
    configYaml: `
upstreams:
  beta: { baseUrl: "${primary.url}" }
  gamma-direct: { baseUrl: "${secondary.url}" }
storage: { kind: sqlite, path: spans.db }
models:
  ${ALIAS}:
    targets:
      - { route: beta, model: ${PLAIN} }
      - { route: gamma-direct, model: ${SECONDARY_MODEL}, priority: 1 }
`,
    env: { ...(compiled ? image.env : {}), OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY, TOLLGATE_LOG_LEVEL: 'warn' },
    ...(compiled ? { cli: image.cli, nodeArgs: image.nodeArgs } : {}),
  });
  const pool = new Pool(proxy.url, { connections: CONNECTIONS });
  const drain = () => {
    const counts = { primary: primary.requests.length, secondary: secondary.requests.length };
    primary.requests.length = 0;
    secondary.requests.length = 0;
    return counts;
  };
  // Warm-up: both paths, so the JIT, the connections and the span writer are past their first calls.
  for (const model of [ALIAS, PLAIN, SECONDARY_MODEL]) await drive(pool, model, 1000, []);
  drain();
  return {
    primary,
    secondary,
    proxy,
    pool,
    drain,
    async close() {
      await pool.close();
      await proxy.stop();
      await Promise.all([primary.close(), secondary.close()]);
    },
  };
}

/** tollgate_fallbacks_total summed over its series, from the proxy's /metrics. */
async function fallbacksCounted(proxy: ProxyProcess): Promise<number> {
  const text = await (await fetch(`${proxy.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith('tollgate_fallbacks_total{')) sum += Number(line.split(' ').at(-1));
  return sum;
}

interface SteadyResult {
  loadBefore: string;
  loadAfter: string;
  blocks: number;
  /** gpt-4o-mini: the primary's route, no alias. */
  plain: PhaseStats;
  /** The alias, answered by its primary. */
  alias: PhaseStats;
  /** claude-haiku-4-5 on gamma-direct, no alias: the secondary's own path (a translated call), for the phase after a switch. */
  plainSecondary: PhaseStats;
  addedP50Ms: number;
  addedP99Ms: number;
}

/**
 * Nothing fails: the plain model, the alias and the secondary's own model in rotating blocks on one proxy, so
 * all three meet the same neighbours.
 */
async function steady(): Promise<SteadyResult> {
  const bed = await startBed();
  const loadBefore = load();
  const blockMs = 2000;
  const blocks = Math.max(1, Math.round(seconds / 2 / (blockMs / 1000)));
  const plain: Call[] = [];
  const alias: Call[] = [];
  const secondary: Call[] = [];
  try {
    for (let b = 0; b < blocks; b++) {
      await drive(bed.pool, PLAIN, blockMs, plain, () => bed.drain());
      await drive(bed.pool, ALIAS, blockMs, alias, () => bed.drain());
      await drive(bed.pool, SECONDARY_MODEL, blockMs, secondary, () => bed.drain());
    }
  } finally {
    await bed.close();
  }
  const p = stats(plain, blocks * blockMs);
  const a = stats(alias, blocks * blockMs);
  const r = (n: number) => Math.round(n * 1000) / 1000;
  return {
    loadBefore,
    loadAfter: load(),
    blocks,
    plain: p,
    alias: a,
    plainSecondary: stats(secondary, blocks * blockMs),
    addedP50Ms: r(a.p50Ms - p.p50Ms),
    addedP99Ms: r(a.p99Ms - p.p99Ms),
  };
}

type Outage = 'refused' | '503';

interface OutageResult {
  model: string;
  outage: Outage;
  loadBefore: string;
  loadAfter: string;
  total: PhaseStats;
  before: PhaseStats;
  switching: PhaseStats;
  /** The calls under way when the primary went down (started before, ended after): the ones that met it. */
  inFlightAtDown: PhaseStats;
  after: PhaseStats;
  /** Requests each fake upstream received in each phase. */
  upstreamRequests: { before: { primary: number; secondary: number }; switching: { primary: number; secondary: number }; after: { primary: number; secondary: number } };
  fallbacksCounted: number;
  /** When the proxy logged that the primary's breaker tripped, ms after the primary went down. */
  breakerTrippedAfterMs: number | null;
  /**
   * The longest this process's event loop (the callers' and the fakes') was held up, before the primary went
   * down and in the second after: a caller's latency includes it, and on a loaded machine it can dominate.
   */
  benchLoopDelayMaxMs: { before: number; switching: number };
}

/**
 * `seconds` of calls to `model`; halfway through the primary goes down. The phases count from the moment it
 * did (a busy machine runs the timer late), by the time each call ended as its caller saw it.
 */
async function outage(model: string, kind: Outage): Promise<OutageResult> {
  const bed = await startBed();
  const loadBefore = load();
  const calls: Call[] = [];
  const began = performance.now();
  let downAt = Number.NaN;
  let downWallClock = 0;
  const upstream = { before: { primary: 0, secondary: 0 }, switching: { primary: 0, secondary: 0 }, after: { primary: 0, secondary: 0 } };
  let phase = upstream.before;
  const add = () => {
    const n = bed.drain();
    phase.primary += n.primary;
    phase.secondary += n.secondary;
  };
  let endSwitch: NodeJS.Timeout | undefined;
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const loopMax = { before: 0, switching: 0 };
  const goDown = setTimeout(
    () => {
      add();
      loopMax.before = loopDelay.max / 1e6;
      loopDelay.reset();
      phase = upstream.switching;
      downAt = performance.now();
      downWallClock = Date.now();
      if (kind === '503') bed.primary.behave({ status: 503 });
      else void bed.primary.close();
      endSwitch = setTimeout(() => {
        add();
        loopMax.switching = loopDelay.max / 1e6;
        loopDelay.disable();
        phase = upstream.after;
      }, 1000);
    },
    (seconds * 1000) / 2,
  );
  let fallbacks = 0;
  let trippedAt: number | null = null;
  try {
    await drive(bed.pool, model, seconds * 1000, calls, add);
    add();
    fallbacks = await fallbacksCounted(bed.proxy);
    const tripped = bed.proxy.logs.find((line) => line.msg === 'circuit breaker tripped' && line.upstream === 'beta');
    const time = tripped === undefined ? Number.NaN : new Date(tripped.time as string | number).getTime();
    if (Number.isFinite(time)) trippedAt = time - downWallClock;
  } finally {
    clearTimeout(goDown);
    clearTimeout(endSwitch);
    loopDelay.disable();
    await bed.close();
  }
  let end = downAt + 1000;
  for (const c of calls) if (c.endedAt > end) end = c.endedAt;
  return {
    model,
    outage: kind,
    loadBefore,
    loadAfter: load(),
    total: stats(calls, end - began),
    before: stats(
      calls.filter((c) => c.endedAt < downAt),
      downAt - began,
    ),
    switching: stats(
      calls.filter((c) => c.endedAt >= downAt && c.endedAt < downAt + 1000),
      1000,
    ),
    inFlightAtDown: stats(
      calls.filter((c) => c.startedAt < downAt && c.endedAt >= downAt),
      1000,
    ),
    after: stats(
      calls.filter((c) => c.endedAt >= downAt + 1000),
      end - downAt - 1000,
    ),
    upstreamRequests: upstream,
    fallbacksCounted: fallbacks,
    breakerTrippedAfterMs: trippedAt,
    benchLoopDelayMaxMs: { before: Math.round(loopMax.before), switching: Math.round(loopMax.switching) },
  };
}

// ---------------------------------------------------------------------------------------------------------

const report: Record<string, unknown> = {
  machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
  proxy_run: compiled
    ? `dist/ (compiled) with the sidecar image's ${JSON.stringify(compiledLikeTheImage().env)} ${compiledLikeTheImage().nodeArgs.join(' ')}`
    : 'cmd/tollgate.ts (type stripping)',
  load_at_start: load(),
};

if (!args.includes('--macro-only')) {
  const results = await micro();
  report.micro_ns_per_call = Object.fromEntries(results.map((r) => [r.name, { median: Math.round(r.nsPerCall), rounds: r.rounds.map((n) => Math.round(n)) }]));
  report.load_after_micro = load();
  for (const r of results) console.error(`${r.name.padEnd(66)} ${Math.round(r.nsPerCall).toString().padStart(7)} ns/call`);
}

if (!args.includes('--micro-only')) {
  report.connections = CONNECTIONS;
  report.seconds_per_run = seconds;
  report.steady = await steady();
  console.error(`steady: ${JSON.stringify(report.steady)}`);
  const runs: OutageResult[] = [];
  for (const [model, kind] of [
    [ALIAS, 'refused'],
    [ALIAS, '503'],
    [PLAIN, 'refused'],
  ] as const) {
    const result = await outage(model, kind);
    console.error(`${model} ${kind}: ${JSON.stringify(result)}`);
    runs.push(result);
  }
  report.outages = runs;
}
report.load_at_end = load();
console.log(JSON.stringify(report, null, 2));
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(report, null, 2));
