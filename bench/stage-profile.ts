// Where each microsecond of a call goes, per stage, in Tollgate and in the bare Node relay side by side: both run
// under node --cpu-prof in front of the same fast fake upstream (nginx), wrk drives each at 16 connections, and
// every CPU sample of the measured seconds is given to the stage of the innermost frame that names one (a write
// to a socket under the relay's code is response writing, under undici the upstream request). CPU per call is
// the stage's sampled time over the calls wrk counted, next to the process's user+system time from /proc.
//
//   ./tollgatew npm run build
//   ./tollgatew node bench/stage-profile.ts                         # 10 s per path, the sidecar image's flags
//   options: --seconds N, --rounds N (interleaved runs of both paths, each its own processes; default 1),
//            --dist DIR (a second compiled tree, e.g. a copy of dist/ before a change, measured in the same
//            rounds as dist/: an A/B of two builds; --dist-env="NAME=VALUE ..." gives that build the image's
//            environment as it was then), --no-profile (CPU per call from /proc only, no profiler
//            overhead), --node-args="FLAGS" (a variant of dist/ with node flags after the image's, measured in
//            the same rounds), --env="NAME=VALUE ..." (likewise, with environment over the image's; repeatable), --json FILE, --keep-profiles DIR (leave the .cpuprofile files there, for cpu-profile.ts),
//            --fastify-relay (also the bare relay served from one hijacked fastify route: what fastify alone adds),
//            --relay-node-args="FLAGS" (also the bare relay with these node flags, e.g. the sidecar image's heap flags)

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureBenchTools, startBareRelay } from './bare-relay.ts';
import { startNodeRelay } from './node-relay.ts';
import { cpuSeconds, startSidecar } from './sidecar-process.ts';
import { wrk } from './wrk.ts';

const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The stages of a call, in the order a call meets them. */
export const STAGES = [
  'routing and hooks',
  'identity and request guard',
  'request body',
  'budget check',
  'upstream request',
  'usage extraction',
  'pricing',
  'span write',
  'metrics',
  'log line',
  'response writing',
  'config push client',
  'Node HTTP server and sockets',
  'garbage collection',
  'V8 and native code outside JS functions',
  'other',
] as const;
export type Stage = (typeof STAGES)[number];

// A Tollgate file's stage; functions of proxy.ts are split by what they do. Files not named here (shared
// helpers such as contracts/header-value.ts) are transparent: their time goes to the caller's stage.
const FILE_STAGES: [RegExp, Stage][] = [
  [/\/inbound\//, 'identity and request guard'],
  [/\/http\/request-body\./, 'request body'],
  [/\/http\/budget-refusal\.|\/budgets\//, 'budget check'],
  [/\/upstream\/|\/auth\//, 'upstream request'],
  [/\/pricing\/|\/wire-formats\/(.*\/cost|token-rates)\./, 'pricing'],
  [/\/usage\/|\/wire-formats\//, 'usage extraction'],
  [/\/spans\/|\/metering\/|\/pipeline\/call-outcome\./, 'span write'],
  [/\/metrics\//, 'metrics'],
  // Before ADR 1700 the relay sat at sidecar/src/relay and caller-connection in http/: builds from then compare.
  [/\/http\/(proxy-headers|json-answer|caller-connection)\.|\/pipeline\/(caller-connection|relay)\.|\/sidecar\/src\/relay\./, 'response writing'],
  [/\/operator-link\.|\/push-/, 'config push client'],
  [/\/routes\/|\/config\/|\/http\/(listener-options|h2c-server|proxy)\.|\/sidecar\/src\/(app|lifecycle)\./, 'routing and hooks'],
  [/\/bench\/node-relay\./, 'response writing'],
];

const PROXY_FUNCTIONS: Record<string, Stage> = {
  callBody: 'request body',
  refusedOverBudget: 'budget check',
  forward: 'upstream request',
  startMetering: 'span write',
  failCall: 'span write',
};

const PACKAGE_STAGES: [RegExp, Stage][] = [
  [/^(fastify|find-my-way|avvio|@fastify\/.*|light-my-request|fast-querystring|safe-regex2|ret|toad-cache|abstract-logging|process-warning|rfdc)$/, 'routing and hooks'],
  [/^undici$/, 'upstream request'],
  [/^(pino|pino-std-serializers|sonic-boom|thread-stream|fast-redact|quick-format-unescaped|on-exit-leak-free|safe-stable-stringify|atomic-sleep)$/, 'log line'],
  [/^(prom-client|tdigest|bintrees)$/, 'metrics'],
  [/^better-sqlite3$/, 'span write'],
  [/^(@grpc\/.*|protobufjs|@protobufjs\/.*)$/, 'config push client'],
];

/** The stage one frame names, or null when it is transparent (Node's internals, natives, unnamed helpers). */
export function frameStage(frame: { functionName: string; url: string }): Stage | null {
  const { url, functionName } = frame;
  if (url === '' || url.startsWith('node:')) return null;
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return PACKAGE_STAGES.find(([pattern]) => pattern.test(pkg[1]!))?.[1] ?? 'other';
  if (/\/http\/proxy\./.test(url) && PROXY_FUNCTIONS[functionName]) return PROXY_FUNCTIONS[functionName];
  if (/\/sidecar\/src\/relay\./.test(url) && functionName === 'responseExtractor') return 'usage extraction';
  return FILE_STAGES.find(([pattern]) => pattern.test(url))?.[1] ?? null;
}

/** The stage of a sample whose stack names no stage: what the leaf is. */
function leafStage(frame: { functionName: string; url: string }): Stage | null {
  const { functionName, url } = frame;
  if (functionName === '(idle)') return null;
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8 and native code outside JS functions';
  if (url === '' || url.startsWith('node:')) return 'Node HTTP server and sockets';
  return 'other';
}

/**
 * Sampled CPU per stage in µs, over the samples taken between `fromUs` and `toUs` (the profile's clock), and per
 * stage the self time of each function (`name file:line`), to see what a stage is made of.
 */
export function timeByStage(
  profile: CpuProfile,
  window?: { fromUs: number; toUs: number },
): { stages: Map<Stage, number>; functions: Map<Stage, Map<string, number>>; totalUs: number } {
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const stageOf = new Map<number, Stage | null>();
  const resolveStage = (id: number): Stage | null => {
    const known = stageOf.get(id);
    if (known !== undefined) return known;
    const leaf = byId.get(id)!;
    let stage = leafStage(leaf.callFrame);
    if (stage !== null) {
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const named = frameStage(byId.get(at)!.callFrame);
        if (named !== null) {
          stage = named;
          break;
        }
      }
    }
    stageOf.set(id, stage);
    return stage;
  };
  const stages = new Map<Stage, number>();
  const functions = new Map<Stage, Map<string, number>>();
  let totalUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length - 1; i++) {
    at += profile.timeDeltas[i]!;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const stage = resolveStage(profile.samples[i]!);
    if (stage === null) continue;
    const us = Math.max(0, profile.timeDeltas[i + 1]!);
    stages.set(stage, (stages.get(stage) ?? 0) + us);
    const { functionName, url } = byId.get(profile.samples[i]!)!.callFrame;
    const name = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}`;
    const inStage = functions.get(stage) ?? new Map<string, number>();
    functions.set(stage, inStage.set(name, (inStage.get(name) ?? 0) + us));
    totalUs += us;
  }
  return { stages, functions, totalUs };
}

interface PathRun {
  calls: number;
  requestsPerSecond: number;
  /** User+system CPU of the process over the measured seconds, per call (all threads). */
  procCpuUsPerCall: number;
  /** Sampled CPU of the main thread per call, per stage (empty with --no-profile). */
  stageUsPerCall: Partial<Record<Stage, number>>;
  /** Per stage, its costliest functions' self time per call. */
  topFunctions: Partial<Record<Stage, [string, number][]>>;
}

interface Measured {
  pid: number;
  url: string;
  stop(): Promise<void>;
}

/** Warms a path up, measures it, stops it, and reads its profile for the measured seconds. */
async function measure(start: (profileDir: string | null) => Promise<Measured>, path: string, seconds: number, profileDir: string | null): Promise<PathRun> {
  const target = await start(profileDir);
  let stopped = false;
  try {
    await wrk(`${target.url}${path}`, { connections: 16, seconds: 3, body: CHAT_BODY });
    const cpuBefore = cpuSeconds(target.pid);
    const from = Date.now();
    const run = await wrk(`${target.url}${path}`, { connections: 16, seconds, body: CHAT_BODY });
    const to = Date.now();
    const cpu = cpuSeconds(target.pid) - cpuBefore;
    if (run.errors > 0) throw new Error(`${target.url}${path}: ${run.errors} failed calls`);
    await target.stop();
    stopped = true;
    const exitedAt = Date.now();
    const stageUsPerCall: Partial<Record<Stage, number>> = {};
    const topFunctions: Partial<Record<Stage, [string, number][]>> = {};
    if (profileDir !== null) {
      const file = readdirSync(profileDir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => join(profileDir, f))
        .sort((a, b) => readFileSync(b).length - readFileSync(a).length)[0];
      if (!file) throw new Error(`no profile in ${profileDir}`);
      const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
      // The profile ends when the process exits: the measured seconds are counted back from there.
      const window = { fromUs: profile.endTime - (exitedAt - from) * 1000, toUs: profile.endTime - (exitedAt - to) * 1000 };
      const { stages, functions } = timeByStage(profile, window);
      for (const [stage, us] of stages) stageUsPerCall[stage] = us / run.requests;
      for (const [stage, inStage] of functions) {
        topFunctions[stage] = [...inStage]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 6)
          .map(([name, us]) => [name, Math.round((us / run.requests) * 10) / 10]);
      }
    }
    return { calls: run.requests, requestsPerSecond: run.requestsPerSecond, procCpuUsPerCall: (cpu * 1e6) / run.requests, stageUsPerCall, topFunctions };
  } finally {
    if (!stopped) await target.stop();
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '1' },
      dist: { type: 'string' },
      'dist-env': { type: 'string' },
      'no-profile': { type: 'boolean', default: false },
      json: { type: 'string' },
      'keep-profiles': { type: 'string' },
      'node-args': { type: 'string' },
      env: { type: 'string', multiple: true },
      'fastify-relay': { type: 'boolean', default: false },
      'relay-node-args': { type: 'string' },
    },
  });
  const missing = await ensureBenchTools((line) => process.stderr.write(`${line}\n`));
  if (missing) throw new Error(missing);
  const seconds = Number(values.seconds);
  const profiling = !values['no-profile'];
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-stage-profile-'));
  const load = { start: loadavg() };
  const nginx = await startBareRelay(dir);
  const variantArgs = (values['node-args'] ?? '').split(/\s+/).filter(Boolean);
  const environment = (text: string) =>
    Object.fromEntries(
      text
        .split(/\s+/)
        .filter(Boolean)
        .map((entry) => [entry.split('=')[0]!, entry.slice(entry.indexOf('=') + 1)]),
    );

  const builds: Record<string, { dist?: string; nodeArgs: string[]; env?: Record<string, string> }> = {
    tollgate: { nodeArgs: [] },
    ...(values.dist ? { 'tollgate --dist': { dist: resolve(values.dist), nodeArgs: [], env: environment(values['dist-env'] ?? '') } } : {}),
    ...(variantArgs.length > 0 ? { [`tollgate ${variantArgs.join(' ')}`]: { nodeArgs: variantArgs } } : {}),
    ...Object.fromEntries((values.env ?? []).map((text) => [`tollgate ${text}`, { nodeArgs: [], env: environment(text) }])),
  };
  const relayArgs = (values['relay-node-args'] ?? '').split(/\s+/).filter(Boolean);
  const relays: Record<string, { nodeArgs: string[]; inFastify: boolean }> = {
    nodeRelay: { nodeArgs: [], inFastify: false },
    ...(values['fastify-relay'] ? { 'nodeRelay in fastify': { nodeArgs: [], inFastify: true } } : {}),
    ...(relayArgs.length > 0 ? { [`nodeRelay ${relayArgs.join(' ')}`]: { nodeArgs: relayArgs, inFastify: false } } : {}),
  };
  const runs: Record<string, PathRun[]> = {};
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      const profileDir = (name: string) => (profiling ? mkdtempSync(join(values['keep-profiles'] ?? dir, `${name.replace(/\W+/g, '-')}-`)) : null);
      for (const [name, relay] of Object.entries(relays)) {
        process.stderr.write(`round ${round + 1}: ${name}\n`);
        (runs[name] ??= []).push(
          await measure(
            (prof) => startNodeRelay(nginx.upstreamUrl, [...relay.nodeArgs, ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [])], relay.inFastify),
            '/v1/chat/completions',
            seconds,
            profileDir(name),
          ),
        );
      }
      for (const [name, build] of Object.entries(builds)) {
        process.stderr.write(`round ${round + 1}: ${name}\n`);
        (runs[name] ??= []).push(
          await measure(
            async (prof) => {
              const sidecar = await startSidecar(join(dir, `${name.replace(/\W+/g, '-')}-${round}`), {
                config: { upstreams: { beta: { baseUrl: nginx.upstreamUrl } } },
                credentials: { openaiApiKey: 'sk-bench' },
                extraNodeArgs: [...build.nodeArgs, ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [])],
                ...(build.dist ? { dist: build.dist } : {}),
                ...(build.env ? { extraEnv: build.env } : {}),
              });
              return { pid: sidecar.pid, url: sidecar.url, stop: () => sidecar.stop() };
            },
            '/proxy/beta/v1/chat/completions',
            seconds,
            profileDir(name),
          ),
        );
      }
    }
  } finally {
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const mean = (list: PathRun[], of: (r: PathRun) => number) => list.reduce((sum, r) => sum + of(r), 0) / list.length;
  const names = Object.keys(runs);
  const us = (n: number) => (n >= 10 ? n.toFixed(0) : n.toFixed(1));
  const lines = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; load average ${load.start.map((n) => n.toFixed(2)).join(' ')} → ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
    `${values.rounds} round(s) of ${seconds} s at 16 connections per path, interleaved`,
    '',
    `| µs of CPU per call | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    `| req/s (wrk, 16 conns) | ${names.map((n) => mean(runs[n]!, (r) => r.requestsPerSecond).toFixed(0)).join(' | ')} |`,
    `| process CPU (/proc, all threads) | ${names.map((n) => us(mean(runs[n]!, (r) => r.procCpuUsPerCall))).join(' | ')} |`,
  ];
  if (profiling) {
    lines.push(`| main thread, sampled | ${names.map((n) => us(mean(runs[n]!, (r) => Object.values(r.stageUsPerCall).reduce((s, v) => s + v, 0)))).join(' | ')} |`);
    for (const stage of STAGES) {
      const cells = names.map((n) => mean(runs[n]!, (r) => r.stageUsPerCall[stage] ?? 0));
      if (cells.every((c) => c < 0.05)) continue;
      lines.push(`| ${stage} | ${cells.map(us).join(' | ')} |`);
    }
  }
  console.log(lines.join('\n'));
  if (values.json) writeFileSync(values.json, JSON.stringify({ load: { ...load, end: loadavg() }, runs }, null, 2));
}
