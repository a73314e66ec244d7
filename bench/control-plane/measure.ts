// What bench/control-plane-scale.ts reads: processes' CPU and memory from /proc, the API server's and etcd's
// own counters from their /metrics, and percentiles.

import { readdirSync, readFileSync } from 'node:fs';
import type { ControlPlane } from '../../test/control-plane/control-plane.ts';
import { parseSamples, type Sample } from '../../test/support/prometheus-text.ts';
import { cpuSeconds, processMemory, type ProcessMemory } from '../sidecar-process.ts';

/** Processes whose command line contains `needle` (the control plane's processes carry its work folder's name). */
export function pidsMatching(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(needle) && !cmdline.includes('control-plane-scale')) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

export function processName(pid: number): string {
  return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
}

/** CPU used by a process between start() and stop(), as a share of one core. */
export function cpuMeter(pid: number): { stop(): { cores: number; seconds: number } } {
  const startedAt = process.hrtime.bigint();
  const before = cpuSeconds(pid);
  return {
    stop() {
      const seconds = Number(process.hrtime.bigint() - startedAt) / 1e9;
      return { cores: (cpuSeconds(pid) - before) / seconds, seconds };
    },
  };
}

export interface ProcessSample extends ProcessMemory {
  cores: number;
}

/** Samples CPU over `ms` and memory at its end. */
export async function sampleProcess(pid: number, ms: number): Promise<ProcessSample> {
  const meter = cpuMeter(pid);
  await new Promise((resolve) => setTimeout(resolve, ms));
  return { ...processMemory(pid), cores: meter.stop().cores };
}

export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

/** Nearest-rank percentile of unsorted numbers (NaN when empty). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export interface Distribution {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export function distribution(values: readonly number[]): Distribution {
  return { count: values.length, p50: percentile(values, 50), p99: percentile(values, 99), max: values.length ? Math.max(...values) : NaN };
}

/** The API server's request counters and etcd's write counters at one moment. */
export interface ServerCounters {
  at: number;
  apiserver: Sample[];
  etcd: Sample[];
}

export async function serverCounters(cp: ControlPlane): Promise<ServerCounters> {
  const raw = await cp.kubectl(['get', '--raw', '/metrics']);
  if (raw.code !== 0) throw new Error(`kubectl get --raw /metrics: ${raw.stderr}`);
  const keep = (s: Sample) =>
    s.name === 'apiserver_request_total' || s.name.startsWith('apiserver_flowcontrol_') || s.name.startsWith('apiserver_admission_webhook_admission_duration_seconds');
  const apiserver = parseSamples(
    raw.stdout
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n'),
  ).filter(keep);
  const etcdText = await (await fetch(`${cp.etcdUrl}/metrics`)).text();
  const etcd = parseSamples(etcdText).filter((s) => s.name.startsWith('etcd_mvcc_') || s.name.startsWith('etcd_debugging_mvcc_') || s.name === 'etcd_disk_wal_write_bytes_total');
  return { at: Date.now(), apiserver, etcd };
}

function sum(samples: Sample[], name: string, match: (labels: Record<string, string>) => boolean = () => true): number {
  return samples.filter((s) => s.name === name && match(s.labels)).reduce((total, s) => total + s.value, 0);
}

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY']);

/** What the API server did between two readings, by what the benchmark reports. */
export interface ServerActivity {
  seconds: number;
  /** Requests from service accounts (the operators and the webhook; the benchmark itself is a system:master). */
  serviceAccountRequests: number;
  tokenReviews: number;
  /** Writes by resource (every client; the benchmark writes nothing while it measures). */
  writes: Record<string, number>;
  writesPerSecond: number;
  /** Answers with 429 Too Many Requests, and requests priority and fairness rejected. */
  throttled: number;
  rejected: number;
  /** etcd: keys put, and how much its database grew. */
  etcdPuts: number;
  etcdDbGrowthMb: number;
  /** Bytes a second etcd was asked to put (the API server's writes), and wrote to its WAL. */
  etcdPutBytesPerSecond: number;
  etcdWalBytesPerSecond: number;
}

export function activity(before: ServerCounters, after: ServerCounters): ServerActivity {
  const delta = (name: string, match?: (labels: Record<string, string>) => boolean) => sum(after.apiserver, name, match) - sum(before.apiserver, name, match);
  const writes: Record<string, number> = {};
  for (const s of after.apiserver) {
    if (s.name !== 'apiserver_request_total' || !WRITE_VERBS.has(s.labels.verb ?? '')) continue;
    const resource = `${s.labels.resource}${s.labels.subresource ? `/${s.labels.subresource}` : ''}`;
    const was = sum(
      before.apiserver,
      'apiserver_request_total',
      (l) => l.verb === s.labels.verb && l.resource === s.labels.resource && l.subresource === s.labels.subresource && l.code === s.labels.code,
    );
    writes[resource] = (writes[resource] ?? 0) + s.value - was;
  }
  for (const [k, v] of Object.entries(writes)) if (v === 0) delete writes[k];
  const seconds = (after.at - before.at) / 1000;
  const etcd = (name: string) => sum(after.etcd, name) - sum(before.etcd, name);
  return {
    seconds,
    serviceAccountRequests: delta('apiserver_flowcontrol_dispatched_requests_total', (l) => l.flow_schema === 'service-accounts'),
    tokenReviews: delta('apiserver_request_total', (l) => l.resource === 'tokenreviews'),
    writes,
    writesPerSecond: Object.values(writes).reduce((a, b) => a + b, 0) / seconds,
    throttled: delta('apiserver_request_total', (l) => l.code === '429'),
    rejected: delta('apiserver_flowcontrol_rejected_requests_total'),
    etcdPuts: etcd('etcd_mvcc_put_total'),
    etcdDbGrowthMb: (sum(after.etcd, 'etcd_mvcc_db_total_size_in_bytes') - sum(before.etcd, 'etcd_mvcc_db_total_size_in_bytes')) / 2 ** 20,
    etcdPutBytesPerSecond: etcd('etcd_debugging_mvcc_total_put_size_in_bytes') / seconds,
    etcdWalBytesPerSecond: etcd('etcd_disk_wal_write_bytes_total') / seconds,
  };
}

/** Admission webhook latency buckets the API server recorded between two readings (its own view of the call). */
export function admissionBuckets(before: ServerCounters, after: ServerCounters): { le: string; count: number }[] {
  const name = 'apiserver_admission_webhook_admission_duration_seconds_bucket';
  const les = [...new Set(after.apiserver.filter((s) => s.name === name).map((s) => s.labels.le!))];
  return les
    .map((le) => ({ le, count: sum(after.apiserver, name, (l) => l.le === le) - sum(before.apiserver, name, (l) => l.le === le) }))
    .sort((a, b) => Number(a.le === '+Inf' ? Infinity : a.le) - Number(b.le === '+Inf' ? Infinity : b.le));
}

/** Whole-machine CPU: busy and total jiffies so far (all cores), from /proc/stat. */
function machineJiffies(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - fields[3]! - fields[4]!, total };
}

export interface TimelinePoint {
  /** Seconds since the timeline started. */
  t: number;
  /** Share of one core each named process used in the interval; `machine` is the whole machine in cores. */
  cores: Record<string, number>;
  [extra: string]: unknown;
}

/**
 * Samples the named processes' CPU (and what `extra` reports) every `everyMs` until `stop` resolves: where a
 * phase's time went, on a machine whose other tenants take their share too.
 */
export async function timeline(
  pids: Record<string, number | number[]>,
  everyMs: number,
  stop: Promise<unknown>,
  extra: () => Promise<Record<string, unknown>>,
): Promise<TimelinePoint[]> {
  const points: TimelinePoint[] = [];
  const started = Date.now();
  let done = false;
  void stop.finally(() => (done = true));
  const cpuOf = (pid: number | number[]) => {
    try {
      return cpuSeconds(pid);
    } catch {
      return NaN; // gone (the killed leader)
    }
  };
  let before = { at: Date.now(), cpu: Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuOf(pid)])), machine: machineJiffies() };
  while (!done) {
    await Promise.race([new Promise((resolve) => setTimeout(resolve, everyMs)), stop]);
    const now = { at: Date.now(), cpu: Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuOf(pid)])), machine: machineJiffies() };
    const seconds = (now.at - before.at) / 1000;
    const cores: Record<string, number> = {};
    for (const k of Object.keys(pids)) cores[k] = Math.round(((now.cpu[k]! - before.cpu[k]!) / seconds) * 100) / 100;
    const cpus = (now.machine.total - before.machine.total) / seconds / 100;
    cores.machine = Math.round(((now.machine.busy - before.machine.busy) / (now.machine.total - before.machine.total)) * cpus * 100) / 100;
    points.push({ t: Math.round((now.at - started) / 100) / 10, cores, ...(await extra().catch(() => ({}))) });
    before = now;
  }
  return points;
}
