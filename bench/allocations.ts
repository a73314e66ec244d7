// Bytes allocated per metered call, and what allocates them, in Tollgate and in the bare Node relay side by side:
// each runs with its inspector on a loopback port, in front of the same fast fake upstream (nginx) and under
// wrk at 16 connections as bench/stage-profile.ts runs them (the sidecar with the image's own flags). After a
// warm-up, V8's sampling heap profiler runs for the measured seconds with objects that garbage collection has
// already freed kept in the profile (includeObjectsCollectedByMajorGC / MinorGC): what is counted is every byte
// allocated, not what is still alive at the end. Bytes per call are the profile's bytes over the calls wrk
// counted; each function's bytes go to the stage stage-profile.ts would give its innermost named frame.
//
//   ./tollgatew npm run build
//   ./tollgatew node bench/allocations.ts                  # 6 s per path, the sidecar image's flags
//   options: --seconds N, --rounds N (interleaved runs of every path, each its own processes; default 1),
//            --dist DIR (a second compiled tree, e.g. a copy of dist/ before a change, measured in the same
//            rounds as dist/), --interval BYTES (the sampling interval, default 1024), --top N (sites listed
//            per path, default 20), --json FILE
//
// Accuracy. V8 samples an allocation on average every `interval` bytes (a Poisson process) and scales each
// sample up by its chance of being taken, so the total is an unbiased estimate of the bytes allocated; a site's
// figure carries a relative error near sqrt(interval / bytes it allocated over the run). At 1024 bytes and tens
// of thousands of calls the total is good to well under 1 % and a site of 100 bytes per call to a few per cent;
// a smaller interval costs the process throughput (each sample walks the stack), never bytes per call. Checked
// by hand: a process allocating 100,000 arrays of 126 numbers (1,056 bytes each: a 32-byte JSArray and a
// 1,024-byte backing store) read back 1,055.9 bytes per array at 512, 1,057.7 at 1024 and 1,055.3 at 4096.
// Only the main thread is profiled: the span writer's worker (sqlite-span-store.ts) has its own heap, not
// counted here. A site is a function (its name and the line it starts on), not the line that allocates.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureBenchTools, startBareRelay } from './bare-relay.ts';
import { connectInspector, inspectFlag } from './inspector.ts';
import { startNodeRelay } from './node-relay.ts';
import { startSidecar } from './sidecar-process.ts';
import { frameStage, STAGES, type Stage } from './stage-profile.ts';
import { wrk } from './wrk.ts';
import { freePort } from '../test/e2e/proxy-process.ts';

const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface HeapNode {
  callFrame: CallFrame;
  /** Bytes allocated by this function itself, scaled from the samples. */
  selfSize: number;
  children: HeapNode[];
}

interface Allocations {
  totalBytes: number;
  stages: Map<Stage, number>;
  /** Per site (`function file:line`) and stage (a builtin such as Map is called from many), its bytes. */
  sites: Map<string, { site: string; stage: Stage; bytes: number }>;
}

/** A script's address short enough to read: from its package or Tollgate folder on, or node:*. */
function shortUrl(url: string): string {
  if (url.startsWith('node:')) return url;
  const at = /\/(node_modules\/.*|sidecar\/src\/.*|contracts\/.*|cmd\/.*|bench\/.*)$/.exec(url);
  if (at) return at[1]!.replace(/^node_modules\/(.*\/node_modules\/)?/, '');
  return url.split('/').slice(-2).join('/');
}

/** The stage of bytes no named frame owns: V8's own (no JS on the stack), Node's internals, or other code. */
function unnamedStage(frame: CallFrame): Stage {
  if (frame.url === '' && (frame.functionName.startsWith('(') || frame.functionName === '')) return 'V8 and native code outside JS functions';
  if (frame.url === '' || frame.url.startsWith('node:')) return 'Node HTTP server and sockets';
  return 'other';
}

/** Sums a sampling heap profile by stage and by site; a frame's stage is its own or its innermost named caller's. */
export function allocationsBySite(head: HeapNode): Allocations {
  const result: Allocations = { totalBytes: 0, stages: new Map(), sites: new Map() };
  const pending: { node: HeapNode; inherited: Stage | null }[] = [{ node: head, inherited: null }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { node, inherited } = next;
    const named = frameStage(node.callFrame) ?? inherited;
    for (const child of node.children) pending.push({ node: child, inherited: named });
    if (node.selfSize === 0) continue;
    const stage = named ?? unnamedStage(node.callFrame);
    const { functionName, url, lineNumber } = node.callFrame;
    const site = url === '' ? functionName || '(anonymous)' : `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}`;
    const key = `${stage}\n${site}`;
    result.sites.set(key, { site, stage, bytes: (result.sites.get(key)?.bytes ?? 0) + node.selfSize });
    result.stages.set(stage, (result.stages.get(stage) ?? 0) + node.selfSize);
    result.totalBytes += node.selfSize;
  }
  return result;
}

interface PathRun {
  calls: number;
  /** Under the profiler, which slows every path. */
  requestsPerSecond: number;
  bytesPerCall: number;
  stageBytesPerCall: Partial<Record<Stage, number>>;
  /** The run's sites by bytes per call, costliest first: [site, stage, bytes per call]. */
  sites: [string, Stage, number][];
}

interface Started {
  url: string;
  stop(): Promise<void>;
}

/** Starts a path with its inspector open, warms it up, and measures what it allocates under wrk. */
async function measure(start: (nodeArgs: string[]) => Promise<Started>, path: string, opts: { seconds: number; interval: number }): Promise<PathRun> {
  const port = await freePort();
  const target = await start([inspectFlag(port)]);
  try {
    await wrk(`${target.url}${path}`, { connections: 16, seconds: 3, body: CHAT_BODY });
    const inspector = await connectInspector(port);
    let head: HeapNode;
    let run: Awaited<ReturnType<typeof wrk>>;
    try {
      await inspector.send('HeapProfiler.enable');
      await inspector.send('HeapProfiler.startSampling', {
        samplingInterval: opts.interval,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      run = await wrk(`${target.url}${path}`, { connections: 16, seconds: opts.seconds, body: CHAT_BODY });
      ({ head } = (await inspector.send<{ profile: { head: HeapNode } }>('HeapProfiler.stopSampling')).profile);
    } finally {
      inspector.close();
    }
    if (run.errors > 0) throw new Error(`${target.url}${path}: ${run.errors} failed calls`);
    const { totalBytes, stages, sites } = allocationsBySite(head);
    const perCall = (bytes: number) => bytes / run.requests;
    return {
      calls: run.requests,
      requestsPerSecond: run.requestsPerSecond,
      bytesPerCall: perCall(totalBytes),
      stageBytesPerCall: Object.fromEntries([...stages].map(([stage, bytes]) => [stage, perCall(bytes)])),
      sites: [...sites.values()].sort((a, b) => b.bytes - a.bytes).map(({ site, stage, bytes }) => [site, stage, perCall(bytes)]),
    };
  } finally {
    await target.stop();
  }
}

/** The paths measured in each round: the bare relay, dist/, and the --dist build when given. */
function paths(dir: string, upstreamUrl: string, dist: string | undefined): Record<string, (round: number) => [(nodeArgs: string[]) => Promise<Started>, string]> {
  const sidecar = (name: string, build?: string) => (round: number) =>
    [
      (nodeArgs: string[]) =>
        startSidecar(join(dir, `${name}-${round}`), {
          config: { upstreams: { beta: { baseUrl: upstreamUrl } } },
          credentials: { openaiApiKey: 'sk-bench' },
          extraNodeArgs: nodeArgs,
          ...(build ? { dist: build } : {}),
        }),
      '/proxy/beta/v1/chat/completions',
    ] as [(nodeArgs: string[]) => Promise<Started>, string];
  return {
    nodeRelay: () => [(nodeArgs) => startNodeRelay(upstreamUrl, nodeArgs), '/v1/chat/completions'],
    tollgate: sidecar('tollgate'),
    ...(dist ? { 'tollgate --dist': sidecar('tollgate-dist', resolve(dist)) } : {}),
  };
}

/** Over a path's rounds: bytes per call per stage, and the top sites (bytes summed over rounds, over the calls). */
function summary(list: PathRun[], top: number) {
  const calls = list.reduce((sum, r) => sum + r.calls, 0);
  const weighted = (of: (r: PathRun) => number) => list.reduce((sum, r) => sum + of(r) * r.calls, 0) / calls;
  const sites = new Map<string, { site: string; stage: Stage; bytes: number }>();
  for (const r of list) {
    for (const [site, stage, perCall] of r.sites) {
      const key = `${stage}\n${site}`;
      sites.set(key, { site, stage, bytes: (sites.get(key)?.bytes ?? 0) + perCall * r.calls });
    }
  }
  return {
    requestsPerSecond: list.reduce((sum, r) => sum + r.requestsPerSecond, 0) / list.length,
    bytesPerCall: weighted((r) => r.bytesPerCall),
    stage: (stage: Stage) => weighted((r) => r.stageBytesPerCall[stage] ?? 0),
    topSites: [...sites.values()]
      .sort((a, b) => b.bytes - a.bytes)
      .slice(0, top)
      .map(({ site, stage, bytes }) => [site, stage, bytes / calls] as const),
  };
}

function report(runs: Record<string, PathRun[]>, header: string[], top: number): string {
  const names = Object.keys(runs);
  const summaries = names.map((n) => summary(runs[n]!, top));
  const bytes = (n: number) => Math.round(n).toLocaleString('en-US');
  const lines = [
    ...header,
    '',
    `| bytes allocated per call | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    `| req/s under the profiler (wrk, 16 conns) | ${summaries.map((s) => s.requestsPerSecond.toFixed(0)).join(' | ')} |`,
    `| **all** (main thread) | ${summaries.map((s) => `**${bytes(s.bytesPerCall)}**`).join(' | ')} |`,
  ];
  for (const stage of STAGES) {
    const cells = summaries.map((s) => s.stage(stage));
    if (cells.every((c) => c < 0.5)) continue;
    lines.push(`| ${stage} | ${cells.map(bytes).join(' | ')} |`);
  }
  names.forEach((name, i) => {
    const s = summaries[i]!;
    lines.push('', `${name}: top ${top} allocation sites`, '', '| function file:line | stage | bytes per call | share |', '|---|---|---|---|');
    for (const [site, stage, perCall] of s.topSites) lines.push(`| ${site} | ${stage} | ${bytes(perCall)} | ${((100 * perCall) / s.bytesPerCall).toFixed(1)} % |`);
  });
  return lines.join('\n');
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '6' },
      rounds: { type: 'string', default: '1' },
      dist: { type: 'string' },
      interval: { type: 'string', default: '1024' },
      top: { type: 'string', default: '20' },
      json: { type: 'string' },
    },
  });
  const missing = await ensureBenchTools((line) => process.stderr.write(`${line}\n`));
  if (missing) throw new Error(missing);
  const opts = { seconds: Number(values.seconds), interval: Number(values.interval) };
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-allocations-'));
  const load = { start: loadavg() };
  const nginx = await startBareRelay(dir);
  const runs: Record<string, PathRun[]> = {};
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const [name, path] of Object.entries(paths(dir, nginx.upstreamUrl, values.dist))) {
        process.stderr.write(`round ${round + 1}: ${name}\n`);
        const [start, urlPath] = path(round);
        (runs[name] ??= []).push(await measure(start, urlPath, opts));
      }
    }
  } finally {
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const header = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; load average ${load.start.map((n) => n.toFixed(2)).join(' ')} → ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
    `${values.rounds} round(s) of ${opts.seconds} s at 16 connections per path, interleaved; sampling interval ${opts.interval} bytes, objects freed by GC counted`,
  ];
  console.log(report(runs, header, Number(values.top)));
  if (values.json) writeFileSync(values.json, JSON.stringify({ load: { ...load, end: loadavg() }, interval: opts.interval, runs }, null, 2));
}
