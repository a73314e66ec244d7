// Tollgate side by side with two bare relays, in one run on one machine: the same load generator (wrk) calls the
// fast fake upstream directly, through nginx (proxy_pass), through a bare Node relay (bench/node-relay.ts:
// node:http piping to an undici Pool, no logic: the same runtime and client as Tollgate) and through Tollgate
// started as the injected sidecar (bench/sidecar-process.ts: the image's flags, config pushed by a stand-in
// operator, spans on tmpfs, log lines at info). Overheads and throughput are reported next to both relays', so
// numbers from a busy shared machine still compare; memory is reported as RSS and as private memory (RssAnon).
//
//   ./tollgatew npm run build
//   ./tollgatew node bench/side-by-side.ts                  # the full run (about 6 minutes; BENCHMARKS.md used --minutes 10)
//   ./tollgatew node bench/side-by-side.ts --quick          # seconds: what the test suite's smoke runs
//   options: --seconds N (per latency/throughput phase), --minutes N (loaded-memory minutes), --json FILE,
//            --record (write Tollgate's measured share of the bare Node relay to bench/recorded.json for the smoke),
//            --node-args="FLAGS" (node flags after the ENTRYPOINT's, to try one before it goes in the Dockerfile),
//            --env="NAME=VALUE ..." (environment over the image's, e.g. a malloc variable)

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { parse as parseYaml } from 'yaml';
import { startFakeUpstream } from '../test/fakes/llm-upstream.ts';
import { ensureBenchTools, REPLY_HEADER, startBareRelay } from './bare-relay.ts';
import { startNodeRelay } from './node-relay.ts';
import { peakMemory, processMemory, startSidecar, type ProcessMemory } from './sidecar-process.ts';
import { wrk, type WrkResult } from './wrk.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const STREAM_BODY = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Say hello.' }] });
const ANTHROPIC_STREAM_BODY = JSON.stringify({ model: 'claude-sonnet-4-20250514', max_tokens: 1024, stream: true, messages: [{ role: 'user', content: 'Write a long story.' }] });
const KEYS = { openaiApiKey: 'sk-bench', anthropicApiKey: 'sk-ant-bench' };

export interface SideBySideOptions {
  quick: boolean;
  seconds: number;
  minutes: number;
  /** node flags after the image's (trying a flag before it goes in the Dockerfile); reported with the run. */
  extraNodeArgs?: string[];
  /** Environment added to the image's (e.g. a malloc variable), reported with the run. */
  extraEnv?: Record<string, string>;
  log: (line: string) => void;
}

/** The measured paths: the upstream itself, nginx's relay, the bare Node relay, Tollgate. */
const PATHS = ['direct', 'relay', 'nodeRelay', 'tollgate'] as const;
type PathName = (typeof PATHS)[number];
type Relayed = Exclude<PathName, 'direct'>;

export type PathLatency = Record<PathName, WrkResult>;

/** Tollgate's throughput as a share of each relay's, measured in the same minute. */
export interface ThroughputShares {
  /** Of nginx's relay. */
  nginx: number;
  /** Of the bare Node relay: the share bench/recorded.json keeps and the smoke guards. */
  nodeRelay: number;
}

export interface SideBySideReport {
  machine: string;
  /** 1-, 5- and 15-minute load averages when the run started and ended: other work on the same cores. */
  loadAverage: { start: number[]; end: number[] };
  command: string;
  tollgate: { nodeArgs: string[]; env: Record<string, string> };
  oneConnection: PathLatency & { addedP50Ms: Record<Relayed, number>; addedP99Ms: Record<Relayed, number> };
  sixteenConnections: PathLatency & { tollgateShare: ThroughputShares };
  streamingTtfbMs: Record<PathName, { p50: number; p99: number }> & { addedP50: Record<Relayed, number> };
  memory: {
    idle: ProcessMemory;
    loadedMinutes: ProcessMemory[];
    /** Private memory gained from the first loaded minute to the last. */
    growthMb: number;
    burst: { streams: number; aborted: number; completed: number; failed: number; peak: ProcessMemory; after: ProcessMemory };
    bigStream: { mb: number; before: ProcessMemory; peak: ProcessMemory };
    chartLimitMb: number;
  };
  relay: { idle: ProcessMemory; loaded: ProcessMemory };
  nodeRelay: { idle: ProcessMemory; loaded: ProcessMemory };
  spansRecorded: number;
}

/** One path's two halves of a phase as one result: calls and errors summed, rates and percentiles averaged. */
function bothHalves(halves: WrkResult[]): WrkResult {
  const mean = (of: (r: WrkResult) => number) => halves.reduce((sum, r) => sum + of(r), 0) / halves.length;
  return {
    requestsPerSecond: mean((r) => r.requestsPerSecond),
    p50Ms: mean((r) => r.p50Ms),
    p99Ms: mean((r) => r.p99Ms),
    requests: halves.reduce((sum, r) => sum + r.requests, 0),
    errors: halves.reduce((sum, r) => sum + r.errors, 0),
  };
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** The chart's default sidecar memory limit, in MiB. */
export function chartSidecarLimitMb(): number {
  const values = parseYaml(readFileSync(join(ROOT, 'charts/tollgate/values.yaml'), 'utf8')) as { sidecar: { resources: { limits: { memory: string } } } };
  const limit = values.sidecar.resources.limits.memory;
  const m = /^(\d+)(Mi|Gi)$/.exec(limit);
  if (!m) throw new Error(`sidecar.resources.limits.memory ${limit} is not in Mi or Gi`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

/** Time to the first body byte of a streamed answer, one call at a time over one connection. */
async function ttfb(url: string, path: string, calls: number): Promise<{ p50: number; p99: number }> {
  const pool = new Pool(url, { connections: 1 });
  const times: number[] = [];
  try {
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json', [REPLY_HEADER]: 'sse' }, body: STREAM_BODY });
      let first = NaN;
      for await (const _chunk of res.body) if (Number.isNaN(first)) first = performance.now() - start;
      if (res.statusCode !== 200) throw new Error(`${url}${path}: status ${res.statusCode}`);
      times.push(first);
    }
  } finally {
    await pool.close();
  }
  times.sort((a, b) => a - b);
  return { p50: pct(times, 50), p99: pct(times, 99) };
}

/** `streams` streamed calls at once; `abortShare` of the callers leave after their first bytes. */
async function burst(url: string, streams: number, abortShare: number): Promise<{ aborted: number; completed: number; failed: number }> {
  const pool = new Pool(url, { connections: streams });
  let aborted = 0;
  let completed = 0;
  let failed = 0;
  try {
    await Promise.all(
      Array.from({ length: streams }, async (_, i) => {
        const leave = i % Math.round(1 / abortShare) === 0;
        const controller = new AbortController();
        try {
          const res = await pool.request({
            method: 'POST',
            path: '/proxy/gamma-direct/v1/messages',
            headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
            body: ANTHROPIC_STREAM_BODY,
            signal: controller.signal,
          });
          for await (const _chunk of res.body) {
            if (leave) {
              controller.abort();
              break;
            }
          }
          if (leave) aborted++;
          else if (res.statusCode === 200) completed++;
          else failed++;
        } catch {
          if (leave && controller.signal.aborted) aborted++;
          else failed++;
        }
      }),
    );
  } finally {
    await pool.destroy();
  }
  return { aborted, completed, failed };
}

export async function runSideBySide(opts: SideBySideOptions): Promise<SideBySideReport> {
  const { log } = opts;
  const missing = await ensureBenchTools(log);
  if (missing) throw new Error(missing);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-side-by-side-'));
  const startLoad = loadavg();
  const relay = await startBareRelay(dir);
  const nodeRelay = await startNodeRelay(relay.upstreamUrl);
  const anthropic = await startFakeUpstream('anthropic', { expectApiKey: KEYS.anthropicApiKey });
  const sidecar = await startSidecar(dir, {
    config: { upstreams: { beta: { baseUrl: relay.upstreamUrl }, 'gamma-direct': { baseUrl: anthropic.url } } },
    credentials: KEYS,
    ...(opts.extraNodeArgs ? { extraNodeArgs: opts.extraNodeArgs } : {}),
    ...(opts.extraEnv ? { extraEnv: opts.extraEnv } : {}),
  });
  try {
    const paths = {
      direct: `${relay.upstreamUrl}/v1/chat/completions`,
      relay: `${relay.relayUrl}/v1/chat/completions`,
      nodeRelay: `${nodeRelay.url}/v1/chat/completions`,
      tollgate: `${sidecar.url}/proxy/beta/v1/chat/completions`,
    };
    await new Promise((r) => setTimeout(r, 2000));
    const idle = processMemory(sidecar.pid);
    const relayIdle = processMemory(relay.pids());
    const nodeRelayIdle = processMemory(nodeRelay.pid);
    log(`idle: sidecar RSS ${idle.rssMb.toFixed(1)} MB, private ${idle.privateMb.toFixed(1)} MB`);

    // Each path in two halves, the paths in one order and then in the reverse (ABBA): a neighbour's load that
    // rises or falls during the phase weighs on every path alike, so the shares compare.
    const each = async (connections: number, seconds: number): Promise<PathLatency> => {
      const halves = Object.fromEntries(PATHS.map((name) => [name, [] as WrkResult[]])) as Record<PathName, WrkResult[]>;
      for (const name of [...PATHS, ...[...PATHS].reverse()]) {
        const half = await wrk(paths[name], { connections, seconds: Math.max(1, Math.round(seconds / 2)), body: CHAT_BODY });
        if (half.errors > 0) throw new Error(`${name} at ${connections} connections: ${half.errors} failed calls`);
        halves[name].push(half);
      }
      return Object.fromEntries(PATHS.map((name) => [name, bothHalves(halves[name])])) as PathLatency;
    };
    log('warming up (JIT, connections)');
    await each(16, opts.quick ? 1 : 3);
    log('1 connection');
    const one = await each(1, opts.seconds);
    log('16 connections');
    const sixteen = await each(16, opts.seconds);
    log('streaming time to first byte');
    const ttfbCalls = opts.quick ? 200 : 2000;
    const streaming = {
      direct: await ttfb(relay.upstreamUrl, '/v1/chat/completions', ttfbCalls),
      relay: await ttfb(relay.relayUrl, '/v1/chat/completions', ttfbCalls),
      nodeRelay: await ttfb(nodeRelay.url, '/v1/chat/completions', ttfbCalls),
      tollgate: await ttfb(sidecar.url, '/proxy/beta/v1/chat/completions', ttfbCalls),
    };

    const loadedMinutes: ProcessMemory[] = [];
    const loadSeconds = opts.quick ? 5 : 60;
    for (let minute = 0; minute < (opts.quick ? 1 : opts.minutes); minute++) {
      log(`loaded: ${loadSeconds} s at 16 connections (${minute + 1})`);
      const r = await wrk(paths.tollgate, { connections: 16, seconds: loadSeconds, body: CHAT_BODY });
      if (r.errors > 0) throw new Error(`loaded minute ${minute + 1}: ${r.errors} failed calls`);
      loadedMinutes.push(processMemory(sidecar.pid));
    }
    const relayLoaded = processMemory(relay.pids());
    const nodeRelayLoaded = processMemory(nodeRelay.pid);

    const streams = 200;
    log(`burst: ${streams} streams at once, 30 % of the callers leaving early`);
    anthropic.behave({ bigBodyBytes: opts.quick ? 64 * 1024 : 512 * 1024 });
    const burstRun = await peakMemory(sidecar.pid, () => burst(sidecar.url, streams, 0.3));
    anthropic.behave({});
    const afterBurst = processMemory(sidecar.pid);

    const bigMb = 50;
    log(`one ${bigMb} MB streamed answer`);
    anthropic.behave({ bigBodyBytes: bigMb * 1024 * 1024 });
    const beforeBig = processMemory(sidecar.pid);
    const big = await peakMemory(sidecar.pid, async () => {
      const r = await fetch(`${sidecar.url}/proxy/gamma-direct/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: ANTHROPIC_STREAM_BODY,
      });
      let bytes = 0;
      for await (const chunk of r.body!) bytes += (chunk as Uint8Array).length;
      return bytes;
    });
    anthropic.behave({});
    if (big.result < bigMb * 1024 * 1024) throw new Error(`the ${bigMb} MB stream arrived short: ${big.result} bytes`);

    const traces = (await (await fetch(`${sidecar.url}/_local/api/traces?limit=1`)).json()) as { count: number };
    const round = (n: number) => Math.round(n * 1000) / 1000;
    const added = (of: (path: PathName) => number): Record<Relayed, number> => ({
      relay: round(of('relay') - of('direct')),
      nodeRelay: round(of('nodeRelay') - of('direct')),
      tollgate: round(of('tollgate') - of('direct')),
    });
    const report: SideBySideReport = {
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`,
      loadAverage: { start: startLoad.map((n) => round(n)), end: loadavg().map((n) => round(n)) },
      command: `node bench/side-by-side.ts ${process.argv.slice(2).join(' ')}`.trim(),
      tollgate: { nodeArgs: [...sidecar.image.nodeArgs, ...(opts.extraNodeArgs ?? [])], env: { ...sidecar.image.env, ...opts.extraEnv } },
      oneConnection: {
        ...one,
        addedP50Ms: added((path) => one[path].p50Ms),
        addedP99Ms: added((path) => one[path].p99Ms),
      },
      sixteenConnections: {
        ...sixteen,
        tollgateShare: {
          nginx: round(sixteen.tollgate.requestsPerSecond / sixteen.relay.requestsPerSecond),
          nodeRelay: round(sixteen.tollgate.requestsPerSecond / sixteen.nodeRelay.requestsPerSecond),
        },
      },
      streamingTtfbMs: {
        ...streaming,
        addedP50: added((path) => streaming[path].p50),
      },
      memory: {
        idle,
        loadedMinutes,
        growthMb: round(loadedMinutes.at(-1)!.privateMb - loadedMinutes[0]!.privateMb),
        burst: { streams, ...burstRun.result, peak: burstRun.peak, after: afterBurst },
        bigStream: { mb: bigMb, before: beforeBig, peak: big.peak },
        chartLimitMb: chartSidecarLimitMb(),
      },
      relay: { idle: relayIdle, loaded: relayLoaded },
      nodeRelay: { idle: nodeRelayIdle, loaded: nodeRelayLoaded },
      spansRecorded: traces.count,
    };
    return report;
  } finally {
    await sidecar.stop();
    await anthropic.close();
    await nodeRelay.stop();
    await relay.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The gross regressions a run shows, in words (none: an empty list). Never a slow machine nor a noisy one: the
 * throughput is Tollgate's share of the bare Node relay measured in the same minute (the same runtime and client,
 * so both slow down together), and only a share below half the one in bench/recorded.json counts; memory is
 * compared with the chart's sidecar limit; a 50 MB stream against being held whole.
 */
export function regressions(r: SideBySideReport, recordedShare: number): string[] {
  const found: string[] = [];
  const share = r.sixteenConnections.tollgateShare.nodeRelay;
  if (!(share >= recordedShare / 2)) {
    found.push(`throughput: Tollgate served ${(share * 100).toFixed(0)} % of the bare Node relay's calls, below half the recorded ${(recordedShare * 100).toFixed(0)} %`);
  }
  const { memory } = r;
  const peak = Math.max(...memory.loadedMinutes.map((m) => m.rssMb), memory.burst.peak.rssMb, memory.bigStream.peak.rssMb);
  if (!(peak < memory.chartLimitMb)) found.push(`memory: peak RSS ${peak.toFixed(1)} MiB, not under the chart's sidecar limit of ${memory.chartLimitMb} MiB`);
  const held = memory.bigStream.peak.privateMb - memory.bigStream.before.privateMb;
  if (!(held < memory.bigStream.mb)) found.push(`streaming: private memory grew ${held.toFixed(1)} MiB over a ${memory.bigStream.mb} MB stream, as if it were held whole`);
  return found;
}

/** Tollgate's share of the bare Node relay's throughput in the last recorded run (bench/recorded.json, `--record`). */
export function recordedShareOfNodeRelay(): number {
  const recorded = JSON.parse(readFileSync(join(ROOT, 'bench/recorded.json'), 'utf8')) as { shareOfNodeRelay?: unknown };
  const share = recorded.shareOfNodeRelay;
  if (typeof share !== 'number' || !(share > 0 && share <= 2)) throw new Error(`bench/recorded.json: shareOfNodeRelay ${JSON.stringify(share)} is not a share (a number above 0)`);
  return share;
}

/** The table BENCHMARKS.md shows, from a report. */
export function reportTable(r: SideBySideReport): string {
  const ms = (n: number) => `${(n * 1000).toFixed(0)} µs`;
  const mem = (m: ProcessMemory) => `${m.rssMb.toFixed(1)} / ${m.privateMb.toFixed(1)}`;
  const pct = (share: number) => `${(share * 100).toFixed(0)} %`;
  const one = r.oneConnection;
  const sixteen = r.sixteenConnections;
  const ttfb = r.streamingTtfbMs;
  const cells = (text: (path: Relayed) => string) => (['relay', 'nodeRelay', 'tollgate'] as const).map(text).join(' | ');
  const rows = [
    '| | direct | bare relay (nginx) | bare Node relay | Tollgate sidecar |',
    '|---|---|---|---|---|',
    `| 1 conn p50 / added | ${ms(one.direct.p50Ms)} | ${cells((p) => `${ms(one[p].p50Ms)} / +${ms(one.addedP50Ms[p])}`)} |`,
    `| 1 conn p99 / added | ${ms(one.direct.p99Ms)} | ${cells((p) => `${ms(one[p].p99Ms)} / +${ms(one.addedP99Ms[p])}`)} |`,
    `| 16 conns req/s | ${sixteen.direct.requestsPerSecond.toFixed(0)} | ${sixteen.relay.requestsPerSecond.toFixed(0)} | ${sixteen.nodeRelay.requestsPerSecond.toFixed(0)} | ${sixteen.tollgate.requestsPerSecond.toFixed(0)} (${pct(sixteen.tollgateShare.nginx)} of nginx, ${pct(sixteen.tollgateShare.nodeRelay)} of the Node relay) |`,
    `| 16 conns p99 | ${sixteen.direct.p99Ms.toFixed(2)} ms | ${cells((p) => `${sixteen[p].p99Ms.toFixed(2)} ms`)} |`,
    `| streaming TTFB p50 / added | ${ms(ttfb.direct.p50)} | ${cells((p) => `${ms(ttfb[p].p50)} / +${ms(ttfb.addedP50[p])}`)} |`,
    `| RSS / private MiB, idle | | ${mem(r.relay.idle)} | ${mem(r.nodeRelay.idle)} | ${mem(r.memory.idle)} |`,
    `| RSS / private MiB, after each loaded minute | | ${mem(r.relay.loaded)} | ${mem(r.nodeRelay.loaded)} | ${r.memory.loadedMinutes.map(mem).join(', ')} |`,
    `| peak RSS / private MiB, ${r.memory.burst.streams}-stream burst (${r.memory.burst.aborted} left early) | | | | ${mem(r.memory.burst.peak)} (limit ${r.memory.chartLimitMb} MiB) |`,
    `| peak RSS / private MiB, one ${r.memory.bigStream.mb} MB stream (before) | | | | ${mem(r.memory.bigStream.peak)} (${mem(r.memory.bigStream.before)}) |`,
  ];
  return rows.join('\n');
}

/** `--env="A=1 B=2"` as a record; an entry without `=` is refused rather than guessed at. */
function environmentAssignments(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of text.split(/\s+/).filter(Boolean)) {
    const at = entry.indexOf('=');
    if (at <= 0) throw new Error(`--env: ${JSON.stringify(entry)} is not NAME=VALUE`);
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      seconds: { type: 'string' },
      minutes: { type: 'string' },
      json: { type: 'string' },
      record: { type: 'boolean', default: false },
      'node-args': { type: 'string' },
      env: { type: 'string' },
    },
  });
  const quick = values.quick ?? false;
  if (values.record && (values['node-args'] || values.env)) {
    throw new Error('--record keeps the share of the image as built; run it without --node-args or --env');
  }
  const report = await runSideBySide({
    quick,
    seconds: Number(values.seconds ?? (quick ? 2 : 10)),
    minutes: Number(values.minutes ?? 3),
    ...(values['node-args'] ? { extraNodeArgs: values['node-args'].split(/\s+/).filter(Boolean) } : {}),
    ...(values.env ? { extraEnv: environmentAssignments(values.env) } : {}),
    log: (line) => process.stderr.write(`[side-by-side] ${line}\n`),
  });
  console.log(JSON.stringify(report, null, 2));
  console.log(`\n${reportTable(report)}`);
  if (values.json) writeFileSync(values.json, JSON.stringify(report, null, 2));
  const found = regressions(report, recordedShareOfNodeRelay());
  console.log(found.length === 0 ? '\nno gross regression' : `\ngross regressions:\n${found.map((line) => `- ${line}`).join('\n')}`);
  if (found.length > 0) process.exitCode = 1;
  if (values.record) {
    const recorded = {
      shareOfNodeRelay: report.sixteenConnections.tollgateShare.nodeRelay,
      shareOfNginx: report.sixteenConnections.tollgateShare.nginx,
      measured: new Date().toISOString().slice(0, 10),
      machine: report.machine,
      loadAverage: report.loadAverage.start,
    };
    writeFileSync(join(ROOT, 'bench/recorded.json'), `${JSON.stringify(recorded, null, 2)}\n`);
  }
}
