// Tollgate side by side with a bare relay, in one run on one machine: the same load generator (wrk) calls the
// fast fake upstream directly, through nginx (proxy_pass) and through Tollgate started as the injected sidecar
// (bench/sidecar-process.ts: the image's flags, config pushed by a stand-in operator, spans on tmpfs, log lines
// at info). Overheads are reported next to the bare relay's, so numbers from a busy shared machine still
// compare; memory is reported as RSS and as private memory (RssAnon).
//
//   ./tollgatew npm run build
//   ./tollgatew node bench/side-by-side.ts                  # the full run (about 6 minutes; BENCHMARKS.md used --minutes 10)
//   ./tollgatew node bench/side-by-side.ts --quick          # seconds: what the test suite's smoke runs
//   options: --seconds N (per latency/throughput phase), --minutes N (loaded-memory minutes), --json FILE,
//            --record (write the measured throughput ratio to bench/recorded.json for the smoke),
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

export interface PathLatency {
  direct: WrkResult;
  relay: WrkResult;
  tollgate: WrkResult;
}

export interface SideBySideReport {
  machine: string;
  /** 1-, 5- and 15-minute load averages when the run started and ended: other work on the same cores. */
  loadAverage: { start: number[]; end: number[] };
  command: string;
  tollgate: { nodeArgs: string[]; env: Record<string, string> };
  oneConnection: PathLatency & { addedP50Ms: { relay: number; tollgate: number }; addedP99Ms: { relay: number; tollgate: number } };
  sixteenConnections: PathLatency & { throughputShareOfRelay: number; relayToTollgateThroughput: number };
  streamingTtfbMs: {
    direct: { p50: number; p99: number };
    relay: { p50: number; p99: number };
    tollgate: { p50: number; p99: number };
    addedP50: { relay: number; tollgate: number };
  };
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
  spansRecorded: number;
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
      tollgate: `${sidecar.url}/proxy/beta/v1/chat/completions`,
    };
    await new Promise((r) => setTimeout(r, 2000));
    const idle = processMemory(sidecar.pid);
    const relayIdle = processMemory(relay.pids());
    log(`idle: sidecar RSS ${idle.rssMb.toFixed(1)} MB, private ${idle.privateMb.toFixed(1)} MB`);

    const each = async (connections: number, seconds: number): Promise<PathLatency> => {
      const out = {} as PathLatency;
      for (const name of ['direct', 'relay', 'tollgate'] as const) {
        out[name] = await wrk(paths[name], { connections, seconds, body: CHAT_BODY });
        if (out[name].errors > 0) throw new Error(`${name} at ${connections} connections: ${out[name].errors} failed calls`);
      }
      return out;
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
    const report: SideBySideReport = {
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`,
      loadAverage: { start: startLoad.map((n) => round(n)), end: loadavg().map((n) => round(n)) },
      command: `node bench/side-by-side.ts ${process.argv.slice(2).join(' ')}`.trim(),
      tollgate: { nodeArgs: [...sidecar.image.nodeArgs, ...(opts.extraNodeArgs ?? [])], env: { ...sidecar.image.env, ...opts.extraEnv } },
      oneConnection: {
        ...one,
        addedP50Ms: { relay: round(one.relay.p50Ms - one.direct.p50Ms), tollgate: round(one.tollgate.p50Ms - one.direct.p50Ms) },
        addedP99Ms: { relay: round(one.relay.p99Ms - one.direct.p99Ms), tollgate: round(one.tollgate.p99Ms - one.direct.p99Ms) },
      },
      sixteenConnections: {
        ...sixteen,
        throughputShareOfRelay: round(sixteen.tollgate.requestsPerSecond / sixteen.relay.requestsPerSecond),
        relayToTollgateThroughput: round(sixteen.relay.requestsPerSecond / sixteen.tollgate.requestsPerSecond),
      },
      streamingTtfbMs: {
        ...streaming,
        addedP50: { relay: round(streaming.relay.p50 - streaming.direct.p50), tollgate: round(streaming.tollgate.p50 - streaming.direct.p50) },
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
      spansRecorded: traces.count,
    };
    return report;
  } finally {
    await sidecar.stop();
    await anthropic.close();
    await relay.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The gross regressions a run shows, in words (none: an empty list). Never a slow machine: the throughput is
 * compared as a ratio to the bare relay measured in the same minute, against three times the ratio in
 * bench/recorded.json; memory against the chart's sidecar limit; a 50 MB stream against being held whole.
 */
export function regressions(r: SideBySideReport, recordedRatio: number): string[] {
  const found: string[] = [];
  const ratio = r.sixteenConnections.relayToTollgateThroughput;
  if (!(ratio < 3 * recordedRatio)) found.push(`throughput: the relay served ${ratio.toFixed(1)} times Tollgate's, over three times the recorded ${recordedRatio}`);
  const { memory } = r;
  const peak = Math.max(...memory.loadedMinutes.map((m) => m.rssMb), memory.burst.peak.rssMb, memory.bigStream.peak.rssMb);
  if (!(peak < memory.chartLimitMb)) found.push(`memory: peak RSS ${peak.toFixed(1)} MiB, not under the chart's sidecar limit of ${memory.chartLimitMb} MiB`);
  const held = memory.bigStream.peak.privateMb - memory.bigStream.before.privateMb;
  if (!(held < memory.bigStream.mb)) found.push(`streaming: private memory grew ${held.toFixed(1)} MiB over a ${memory.bigStream.mb} MB stream, as if it were held whole`);
  return found;
}

/** The throughput ratio of the last recorded run (bench/recorded.json, `--record`). */
export function recordedThroughputRatio(): number {
  return (JSON.parse(readFileSync(join(ROOT, 'bench/recorded.json'), 'utf8')) as { relayToTollgateThroughput: number }).relayToTollgateThroughput;
}

/** The table BENCHMARKS.md shows, from a report. */
export function reportTable(r: SideBySideReport): string {
  const ms = (n: number) => `${(n * 1000).toFixed(0)} µs`;
  const mem = (m: ProcessMemory) => `${m.rssMb.toFixed(1)} / ${m.privateMb.toFixed(1)}`;
  const rows = [
    '| | direct | bare relay (nginx) | Tollgate sidecar |',
    '|---|---|---|---|',
    `| 1 conn p50 / added | ${ms(r.oneConnection.direct.p50Ms)} | ${ms(r.oneConnection.relay.p50Ms)} / +${ms(r.oneConnection.addedP50Ms.relay)} | ${ms(r.oneConnection.tollgate.p50Ms)} / +${ms(r.oneConnection.addedP50Ms.tollgate)} |`,
    `| 1 conn p99 / added | ${ms(r.oneConnection.direct.p99Ms)} | ${ms(r.oneConnection.relay.p99Ms)} / +${ms(r.oneConnection.addedP99Ms.relay)} | ${ms(r.oneConnection.tollgate.p99Ms)} / +${ms(r.oneConnection.addedP99Ms.tollgate)} |`,
    `| 16 conns req/s | ${r.sixteenConnections.direct.requestsPerSecond.toFixed(0)} | ${r.sixteenConnections.relay.requestsPerSecond.toFixed(0)} | ${r.sixteenConnections.tollgate.requestsPerSecond.toFixed(0)} (${(r.sixteenConnections.throughputShareOfRelay * 100).toFixed(0)} % of the relay) |`,
    `| 16 conns p99 | ${r.sixteenConnections.direct.p99Ms.toFixed(2)} ms | ${r.sixteenConnections.relay.p99Ms.toFixed(2)} ms | ${r.sixteenConnections.tollgate.p99Ms.toFixed(2)} ms |`,
    `| streaming TTFB p50 / added | ${ms(r.streamingTtfbMs.direct.p50)} | ${ms(r.streamingTtfbMs.relay.p50)} / +${ms(r.streamingTtfbMs.addedP50.relay)} | ${ms(r.streamingTtfbMs.tollgate.p50)} / +${ms(r.streamingTtfbMs.addedP50.tollgate)} |`,
    `| RSS / private MiB, idle | | ${mem(r.relay.idle)} | ${mem(r.memory.idle)} |`,
    `| RSS / private MiB, after each loaded minute | | ${mem(r.relay.loaded)} | ${r.memory.loadedMinutes.map(mem).join(', ')} |`,
    `| peak RSS / private MiB, ${r.memory.burst.streams}-stream burst (${r.memory.burst.aborted} left early) | | | ${mem(r.memory.burst.peak)} (limit ${r.memory.chartLimitMb} MiB) |`,
    `| peak RSS / private MiB, one ${r.memory.bigStream.mb} MB stream (before) | | | ${mem(r.memory.bigStream.peak)} (${mem(r.memory.bigStream.before)}) |`,
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
    throw new Error('--record keeps the ratio of the image as built; run it without --node-args or --env');
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
  const found = regressions(report, recordedThroughputRatio());
  console.log(found.length === 0 ? '\nno gross regression' : `\ngross regressions:\n${found.map((line) => `- ${line}`).join('\n')}`);
  if (found.length > 0) process.exitCode = 1;
  if (values.record) {
    const recorded = {
      relayToTollgateThroughput: report.sixteenConnections.relayToTollgateThroughput,
      measured: new Date().toISOString().slice(0, 10),
      machine: report.machine,
      loadAverage: report.loadAverage.start,
    };
    writeFileSync(join(ROOT, 'bench/recorded.json'), `${JSON.stringify(recorded, null, 2)}\n`);
  }
}
