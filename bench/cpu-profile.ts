// Where a profiled sidecar's CPU went: reads a V8 .cpuprofile (node --cpu-prof) and sums self time by owner:
// Tollgate's own modules, each npm package, Node's internals, native calls by name (writev, write, ...),
// garbage collection. Idle time is left out, so shares are of the CPU the process used.
//
//   ./tollgatew node bench/side-by-side.ts --quick --node-args="--cpu-prof --cpu-prof-dir=/tmp/prof"
//   ./tollgatew node bench/cpu-profile.ts /tmp/prof/*.cpuprofile
//   ./tollgatew node bench/cpu-profile.ts --by-file /tmp/prof/*.cpuprofile   # Tollgate's modules and packages by file
//
// The sidecar writes its profile when it exits after the benchmark's SIGTERM; with several files (the span
// writer's worker has its own when it runs) each is reported on its own.

import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const TOLLGATE_PARTS = ['/sidecar/src/', '/contracts/', '/cmd/', '/operator/', '/webhook/', '/kube-client/'];
/** --by-file: Tollgate's modules and npm packages by file (the operator's profile: which part of it), not in one row. */
let byFile = false;

/** The owner a sample's function is counted under. */
function ownerOf(frame: { functionName: string; url: string }): string | null {
  const { functionName, url } = frame;
  if (functionName === '(idle)') return null;
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8 and native code outside JS functions';
  if (url === '') return `native: ${functionName || '(anonymous)'}`;
  if (url.startsWith('node:')) return "Node's internals (node:*)";
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return byFile ? url.slice(url.indexOf('/node_modules/') + 1) : pkg[1]!;
  const part = TOLLGATE_PARTS.find((p) => url.includes(p));
  if (part) return byFile ? url.slice(url.indexOf(part) + 1) : "Tollgate's own modules";
  return `other: ${url}`;
}

export function selfTimeByOwner(profile: CpuProfile): { owners: Map<string, number>; totalUs: number } {
  const ownerById = new Map<number, string | null>();
  for (const node of profile.nodes) ownerById.set(node.id, ownerOf(node.callFrame));
  const owners = new Map<string, number>();
  let totalUs = 0;
  // timeDeltas[i] is the time before sample i; it belongs to the sample before it, as V8's own tools count it.
  for (let i = 0; i < profile.samples.length - 1; i++) {
    const owner = ownerById.get(profile.samples[i]!);
    if (owner === undefined) throw new Error(`sample ${i} names node ${profile.samples[i]}, which the profile does not have`);
    if (owner === null) continue;
    const us = Math.max(0, profile.timeDeltas[i + 1]!);
    owners.set(owner, (owners.get(owner) ?? 0) + us);
    totalUs += us;
  }
  return { owners, totalUs };
}

function report(file: string): void {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  if (!Array.isArray(profile.nodes) || !Array.isArray(profile.samples) || !Array.isArray(profile.timeDeltas)) {
    throw new Error(`${file} is not a V8 CPU profile (no nodes, samples and timeDeltas)`);
  }
  const { owners, totalUs } = selfTimeByOwner(profile);
  console.log(`\n${file}: ${(totalUs / 1e6).toFixed(2)} s of CPU (idle left out)\n`);
  console.log('| owner | self time | share |');
  console.log('|---|---|---|');
  const rows = [...owners].sort((a, b) => b[1] - a[1]);
  for (const [owner, us] of rows.slice(0, 20)) console.log(`| ${owner} | ${(us / 1e3).toFixed(0)} ms | ${((100 * us) / totalUs).toFixed(1)} % |`);
  if (rows.length > 20) {
    const rest = rows.slice(20).reduce((sum, [, us]) => sum + us, 0);
    console.log(`| ${rows.length - 20} others | ${(rest / 1e3).toFixed(0)} ms | ${((100 * rest) / totalUs).toFixed(1)} % |`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  byFile = process.argv.includes('--by-file');
  const files = process.argv.slice(2).filter((arg) => arg !== '--by-file');
  if (files.length === 0) {
    console.error('usage: node bench/cpu-profile.ts FILE.cpuprofile ...');
    process.exit(2);
  }
  for (const file of files) report(file);
}
