// The control plane at scale (issue 28): the real operator (two replicas, one leading) and the real webhook on
// the real etcd + kube-apiserver of the cluster tests, and N simulated sidecars (test/cluster/sidecar-fleet.ts)
// in a few load-generator processes, each with its own TLS stream and a real bound token of a real Pod. For each
// N: the operators' CPU and memory at rest, `kubectl apply` of a price change to the last ack, a BudgetPolicy
// over all of them with every sidecar reporting spend each 250 ms for 10,000 users (operator CPU, API-server
// writes, a report's way to every other sidecar), and kill -9 of the leader (time until all are back, what the
// reconnect storm cost the API server, calls through real sidecars beside them). Then the webhook's admission
// latency at 20 and 100 pod creations per second. Results in BENCHMARKS.md.
//
//   ./tollgatew npm run build                                   # the operator and webhook run from dist/, as the image does
//   ./tollgatew node bench/control-plane-scale.ts               # N = 100, 500, 1000, 2000 (about 16 minutes)
//   ./tollgatew node bench/control-plane-scale.ts --n 100,500 --skip failover --json /tmp/scale.json
//
// --store redis runs the operators with the cluster ledger on a local redis-server (budgets.store redis,
// ADR 1314; Debian's, installed as the Redis tests install it) instead of ConfigMaps.
//
// Options: --store configmaps|redis, --n LIST, --per-process N (simulated sidecars per load generator, default 500), --skip LIST (rest,
// price, budget, failover, webhook), --rest-seconds, --budget-seconds, --price-changes, --users, --source (run
// the operator and webhook from TypeScript source instead of dist/), --operator-node-args="FLAGS" (e.g.
// --cpu-prof --cpu-prof-dir=DIR), --json FILE, --keep (leave the log folder).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/control-plane/control-plane.ts';
import { type RedisServer, startRedisServer } from '../test/support/redis-server.ts';
import { ClusterBed, FLEET_NAMESPACE } from './control-plane/cluster-bed.ts';
import { Fleets } from './control-plane/fleets.ts';
import { loadAverage, pidsMatching, processName } from './control-plane/measure.ts';
import * as phase from './control-plane/phases.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '100,500,1000,2000' },
    store: { type: 'string', default: 'configmaps' },
    'per-process': { type: 'string', default: '500' },
    skip: { type: 'string', default: '' },
    'rest-seconds': { type: 'string', default: '30' },
    'budget-seconds': { type: 'string', default: '30' },
    'price-changes': { type: 'string', default: '5' },
    users: { type: 'string', default: '10000' },
    source: { type: 'boolean', default: false },
    'operator-node-args': { type: 'string', default: '' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const sizes = values.n.split(',').map(Number);
if (values.store !== 'configmaps' && values.store !== 'redis') throw new Error(`--store must be configmaps or redis (got ${JSON.stringify(values.store)})`);
const skip = new Set(values.skip.split(',').filter(Boolean));
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)} load ${loadAverage()}] ${line}\n`);

interface Row {
  n: number;
  load: string;
  connect?: Awaited<ReturnType<typeof phase.connect>>;
  rest?: phase.RestResult;
  price?: phase.PriceResult;
  budget?: phase.BudgetResult;
  failover?: phase.FailoverResult;
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-scale-'));
const cp = await startControlPlane();
const rows: Row[] = [];
let admission: phase.AdmissionResult[] = [];
let bed: ClusterBed | undefined;
let fleets: Fleets | undefined;
let redis: RedisServer | undefined;
try {
  if (values.store === 'redis') redis = await startRedisServer();
  bed = await ClusterBed.start(cp, dir, {
    fromSource: values.source,
    operatorNodeArgs: values['operator-node-args'].split(' ').filter(Boolean),
    ...(redis ? { ledgerRedisUrl: redis.url } : {}),
  });
  const controlPlanePids = pidsMatching(basename(cp.workDir));
  const apiServerPid = controlPlanePids.find((pid) => processName(pid) === 'kube-apiserver');
  const etcdPid = controlPlanePids.find((pid) => processName(pid) === 'etcd');
  bed.startOperator('operator-a');
  await bed.leader();
  bed.startOperator('operator-b');
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: bed.proxyConfigYaml(0.15) });
  if (applied.code !== 0) throw new Error(applied.stderr);
  const caPem = await bed.operatorCaPem();
  await bed.startWebhook(caPem);
  fleets = new Fleets({ address: `127.0.0.1:${bed.grpcPort}`, caPem }, Number(values['per-process']));
  // Two real sidecars beside the simulated ones: calls through them must not fail while the leader changes.
  const realPods = await bed.growPods(2);
  const real = await Promise.all(realPods.map((p) => bed!.startRealSidecar(p, caPem)));
  const ctx: phase.RunContext = { bed, fleets, caPem, realSidecars: real, price: 0.15, apiServerPid, etcdPid, log };

  for (const n of sizes) {
    const row: Row = { n, load: loadAverage() };
    rows.push(row);
    log(`N = ${n}: connecting`);
    row.connect = await phase.connect(ctx, n);
    log(`N = ${n}: connected in ${row.connect.connectSeconds} s`);
    if (!skip.has('rest')) {
      row.rest = await phase.atRest(ctx, 10_000, Number(values['rest-seconds']) * 1000);
      log(`N = ${n}: at rest ${JSON.stringify(row.rest)}`);
    }
    if (!skip.has('price')) {
      row.price = await phase.priceChanges(ctx, n, Number(values['price-changes']));
      log(`N = ${n}: price ${JSON.stringify(row.price)}`);
    }
    if (!skip.has('budget')) {
      row.budget = await phase.budgets(ctx, n, { seconds: Number(values['budget-seconds']), users: Number(values.users), ...(apiServerPid ? { apiServerPid } : {}) });
      log(`N = ${n}: budgets ${JSON.stringify(row.budget, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`);
    }
    if (!skip.has('failover')) {
      row.failover = await phase.failover(ctx, n);
      const { timeline, ...failover } = row.failover;
      log(`N = ${n}: failover ${JSON.stringify(failover)}`);
      for (const point of timeline) log(`  failover +${point.t} s: ${JSON.stringify({ ...point, t: undefined })}`);
      await new Promise((resolve) => setTimeout(resolve, 15_000));
    }
  }
  if (!skip.has('webhook')) admission = [await phase.admission(ctx, 20, 15), await phase.admission(ctx, 100, 15)];
  for (const a of admission) log(`webhook at ${a.rate}/s: ${JSON.stringify(a)}`);
} finally {
  await fleets?.stop();
  await bed?.stop();
  await cp.stop();
  await redis?.stop();
  if (!values.keep) rmSync(dir, { recursive: true, force: true });
  else log(`logs kept in ${dir}`);
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
const report = {
  machine: `${cpus().length} × ${cpu}`,
  node: process.version,
  store: values.store,
  sizes,
  rows,
  admission,
  memInfo: readFileSync('/proc/meminfo', 'utf8').split('\n')[0],
};
if (values.json)
  writeFileSync(
    values.json,
    JSON.stringify(report, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2),
  );
process.stdout.write(`${renderTable(rows)}\n`);

function renderTable(all: Row[]): string {
  const f = (v: number | undefined, digits = 0) => (v === undefined || Number.isNaN(v) ? '–' : v.toFixed(digits));
  const line = (label: string, cell: (r: Row) => string) => `| ${label} | ${all.map(cell).join(' | ')} |`;
  return [
    `| ${FLEET_NAMESPACE} sidecars (N) | ${all.map((r) => r.n).join(' | ')} |`,
    `|---|${all.map(() => '---').join('|')}|`,
    line('load average at start', (r) => r.load),
    line('leader RSS / private MiB at rest', (r) => `${f(r.rest?.leader.rssMb, 1)} / ${f(r.rest?.leader.privateMb, 1)}`),
    line('leader CPU at rest (cores)', (r) => f(r.rest?.leader.cores, 3)),
    line('follower RSS / private MiB', (r) => `${f(r.rest?.follower.rssMb, 1)} / ${f(r.rest?.follower.privateMb, 1)}`),
    line('API requests/min at rest (operators + webhook)', (r) => f(r.rest?.apiRequestsPerMinute, 0)),
    line('price change → last ack p50 / p99 / max (ms)', (r) => `${f(r.price?.latency.p50)} / ${f(r.price?.latency.p99)} / ${f(r.price?.latency.max)}`),
    line('spend: reports/s, leader CPU (cores)', (r) => `${f(r.budget?.reportsPerSecond)}, ${f(r.budget?.leaderCores, 2)}`),
    line('spend: API writes/s, etcd growth MiB', (r) => `${f(r.budget?.server.writesPerSecond, 1)}, ${f(r.budget?.server.etcdDbGrowthMb, 1)}`),
    line(
      'spend: etcd KB/s put, KB/s WAL',
      (r) => `${f((r.budget?.server.etcdPutBytesPerSecond ?? NaN) / 1000, 1)}, ${f((r.budget?.server.etcdWalBytesPerSecond ?? NaN) / 1000, 1)}`,
    ),
    line('spend: report → all others p50 / p99 / max (ms)', (r) => `${f(r.budget?.visibility.p50)} / ${f(r.budget?.visibility.p99)} / ${f(r.budget?.visibility.max)}`),
    line('failover: all back (s), lease taken (s)', (r) => `${f(r.failover?.allBackSeconds, 1)}, ${f(r.failover?.leaseTakenSeconds, 1)}`),
    line(
      'failover: TokenReviews, API requests, 429s',
      (r) => `${f(r.failover?.server.tokenReviews)}, ${f(r.failover?.server.serviceAccountRequests)}, ${f(r.failover?.server.throttled)}`,
    ),
    line('failover: real sidecar calls failed', (r) => `${f(r.failover?.realFailures)} of ${f(r.failover?.realCalls)}`),
  ].join('\n');
}
