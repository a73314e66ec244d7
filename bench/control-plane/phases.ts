// The measurements of bench/control-plane-scale.ts, one function each, in the order a run makes them for each N.

import { parseUsd, UNITS_PER_USD } from '../../contracts/money.ts';
import { BUDGET_POLICY, PROXY_CONFIG, type BudgetPolicy, type ProxyConfig } from '../../crds/index.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { ADMIT_NAMESPACE, BASELINE_NAMESPACE, type ClusterBed, FLEET_NAMESPACE, type OperatorReplica } from './cluster-bed.ts';
import type { Fleets } from './fleets.ts';
import {
  activity,
  admissionBuckets,
  cpuMeter,
  distribution,
  type Distribution,
  type ProcessSample,
  sampleProcess,
  serverCounters,
  type ServerActivity,
  timeline,
  type TimelinePoint,
} from './measure.ts';

export interface RunContext {
  bed: ClusterBed;
  fleets: Fleets;
  caPem: string;
  realSidecars: { url: string }[];
  price: number;
  /** The control plane's processes, for timelines. */
  apiServerPid?: number | undefined;
  etcdPid?: number | undefined;
  log(line: string): void;
}

/** Who used the CPU while `until` ran, every 5 s, with the fleet's connected count and the operators' event-loop lag. */
function watch(ctx: RunContext, until: Promise<unknown>, since: number): Promise<TimelinePoint[]> {
  const pids: Record<string, number | number[]> = { fleets: ctx.fleets.pids };
  for (const [id, o] of ctx.bed.operators) pids[id] = o.process.pid;
  if (ctx.apiServerPid) pids.apiserver = ctx.apiServerPid;
  if (ctx.etcdPid) pids.etcd = ctx.etcdPid;
  return timeline(pids, 5_000, until, async () => {
    const connected = (await ctx.fleets.delivered()).filter((t) => t > since).length;
    const lag: Record<string, number> = {};
    for (const id of ctx.bed.operators.keys()) {
      const body = await ctx.bed.operatorMetrics(id).catch(() => '');
      const p99 = /^nodejs_eventloop_lag_p99_seconds (\S+)/m.exec(body)?.[1];
      if (p99) lag[id] = Math.round(Number(p99) * 1000);
    }
    return { connected, lagMs: lag };
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const POLICY = `${FLEET_NAMESPACE}/everyone`;
const LIMIT_USD = '1000';

export function periodStart(at = new Date()): string {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)).toISOString();
}

async function proxyConfig(ctx: RunContext): Promise<ProxyConfig> {
  return ctx.bed.api.get<ProxyConfig>(`/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}/namespaces/${FLEET_NAMESPACE}/${PROXY_CONFIG.plural}/default`);
}

async function budgetPolicy(ctx: RunContext): Promise<BudgetPolicy> {
  return ctx.bed.api.get<BudgetPolicy>(`/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${FLEET_NAMESPACE}/${BUDGET_POLICY.plural}/everyone`);
}

async function kubectlApply(ctx: RunContext, yaml: string): Promise<void> {
  const applied = await ctx.bed.cp.kubectl(['apply', '-f', '-'], { input: yaml });
  if (applied.code !== 0) throw new Error(`kubectl apply: ${applied.stderr}`);
}

/** Grows the fleet to n sidecars; resolves with how long the new ones took to be connected and configured. */
export async function connect(ctx: RunContext, n: number): Promise<{ podsSeconds: number; connectSeconds: number }> {
  const started = Date.now();
  // The real sidecars' pods came first: the pods are numbered across both.
  const pods = await ctx.bed.growPods(n + ctx.realSidecars.length);
  const podsDone = Date.now();
  await ctx.fleets.add(pods);
  await waitFor(
    `${n} sidecars connected`,
    async () => {
      const s = await ctx.fleets.summary();
      return s.connected >= n;
    },
    { timeoutMs: 600_000, intervalMs: 1_000 },
  );
  return { podsSeconds: (podsDone - started) / 1000, connectSeconds: (Date.now() - podsDone) / 1000 };
}

export interface RestResult {
  leader: ProcessSample;
  follower: ProcessSample;
  webhook: ProcessSample | undefined;
  /** Requests the operators and the webhook made, per minute, while nothing changed. */
  apiRequestsPerMinute: number;
}

export async function atRest(ctx: RunContext, settleMs: number, sampleMs: number): Promise<RestResult> {
  await sleep(settleMs);
  const leader = await ctx.bed.leader();
  const follower = [...ctx.bed.operators.values()].find((o) => o !== leader && !o.process.hasExited())!;
  const before = await serverCounters(ctx.bed.cp);
  const [l, f, w] = await Promise.all([
    sampleProcess(leader.process.pid, sampleMs),
    sampleProcess(follower.process.pid, sampleMs),
    ctx.bed.webhook ? sampleProcess(ctx.bed.webhook.pid, sampleMs) : Promise.resolve(undefined),
  ]);
  const a = activity(before, await serverCounters(ctx.bed.cp));
  return { leader: l, follower: f, webhook: w, apiRequestsPerMinute: (a.serviceAccountRequests / a.seconds) * 60 };
}

export interface PriceResult {
  /** From the start of `kubectl apply` to each sidecar's ack of the new version, every change pooled (ms). */
  latency: Distribution;
  /** The slowest sidecar of each change (ms). */
  lastAck: number[];
  missing: number;
}

export async function priceChanges(ctx: RunContext, n: number, changes: number): Promise<PriceResult> {
  const all: number[] = [];
  const lastAck: number[] = [];
  let missing = 0;
  for (let i = 0; i < changes; i++) {
    const old = (await proxyConfig(ctx)).status?.configVersion;
    ctx.price = Math.round((ctx.price + 0.01) * 100) / 100;
    const t0 = Date.now();
    await kubectlApply(ctx, ctx.bed.proxyConfigYaml(ctx.price));
    const version = await waitFor(
      'the new config version',
      async () => {
        const v = (await proxyConfig(ctx)).status?.configVersion;
        return v && v !== old ? v : undefined;
      },
      60_000,
    );
    let acks: (number | undefined)[] = [];
    await waitFor(
      `${n} acks of ${version}`,
      async () => {
        acks = await ctx.fleets.acks(version);
        return acks.every((t) => t !== undefined);
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    ).catch(() => undefined);
    const got = acks.filter((t): t is number => t !== undefined).map((t) => t - t0);
    missing += acks.length - got.length;
    all.push(...got);
    lastAck.push(Math.max(...got));
    ctx.log(`  price change ${i + 1}: version ${version}, last of ${got.length} acks after ${Math.max(...got)} ms`);
    await sleep(2_000);
  }
  return { latency: distribution(all), lastAck, missing };
}

export interface BudgetResult {
  leaderCores: number;
  apiServerCores: number | undefined;
  server: ServerActivity;
  reportsPerSecond: number;
  usageEntriesPerSecond: number;
  /** From a probe's report leaving its sidecar to each other sidecar holding the probe user's usage (ms). */
  visibility: Distribution;
  probesUnseen: number;
  /** Everything charged was acknowledged, and the policy's spend grew by exactly that. */
  drained: boolean;
  spendDifference: string;
}

export async function budgets(ctx: RunContext, n: number, opts: { seconds: number; users: number; apiServerPid?: number }): Promise<BudgetResult> {
  const bed = ctx.bed;
  await kubectlApply(ctx, bed.budgetPolicyYaml(LIMIT_USD));
  await waitFor('the BudgetPolicy to be Ready', async () => (await budgetPolicy(ctx)).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 60_000);
  const spentBefore = statusUnits((await budgetPolicy(ctx)).status?.spentUsd);
  const chargedBefore = (await ctx.fleets.summary()).charged;
  const start = periodStart();
  await ctx.fleets.startSpend({ policy: POLICY, users: opts.users, replicas: 10, usersPerTick: 1, units: 1_000_000n }, start);
  await sleep(10_000);
  const leader = await bed.leader();
  const before = await serverCounters(bed.cp);
  const summaryBefore = await ctx.fleets.summary();
  const leaderCpu = cpuMeter(leader.process.pid);
  const apiCpu = opts.apiServerPid ? cpuMeter(opts.apiServerPid) : undefined;
  const probes: string[] = [];
  const limitUnits = parseUsd(LIMIT_USD) as bigint;
  for (let t = 0; t < opts.seconds; t += 3) {
    const user = `probe-${n}-${probes.length}`;
    probes.push(user);
    await ctx.fleets.probe(Math.floor(Math.random() * n), { policy: POLICY, user, periodStart: start, units: limitUnits });
    await sleep(3_000);
  }
  const leaderCores = leaderCpu.stop().cores;
  const apiServerCores = apiCpu?.stop().cores;
  const server = activity(before, await serverCounters(bed.cp));
  const summaryAfter = await ctx.fleets.summary();
  await sleep(5_000);
  const delays: number[] = [];
  let unseen = 0;
  for (const user of probes) {
    const { sentAt, seen } = await ctx.fleets.probeSeen(user);
    if (sentAt === undefined) {
      unseen += seen.length;
      continue;
    }
    for (const at of seen) {
      if (at === undefined) unseen++;
      else if (at >= sentAt) delays.push(at - sentAt);
    }
  }
  await ctx.fleets.stopSpend();
  const drained = await waitFor(
    'every charge acknowledged',
    async () => {
      const s = await ctx.fleets.summary();
      return s.charged === s.acknowledged;
    },
    { timeoutMs: 180_000, intervalMs: 1_000 },
  )
    .then(() => true)
    .catch(() => false);
  const chargedDuring = (await ctx.fleets.summary()).charged - chargedBefore;
  const spentDuring = await waitFor(
    'the policy status to show the spend',
    async () => {
      const spent = statusUnits((await budgetPolicy(ctx)).status?.spentUsd) - spentBefore;
      return spent >= chargedDuring ? spent : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 1_000 },
  ).catch(async () => statusUnits((await budgetPolicy(ctx)).status?.spentUsd) - spentBefore);
  const seconds = server.seconds;
  return {
    leaderCores,
    apiServerCores,
    server,
    reportsPerSecond: (summaryAfter.reportsSent - summaryBefore.reportsSent) / seconds,
    usageEntriesPerSecond: (summaryAfter.usageEntries - summaryBefore.usageEntries) / seconds,
    visibility: distribution(delays),
    probesUnseen: unseen,
    drained,
    spendDifference: (spentDuring - chargedDuring).toString(),
  };
}

export interface FailoverResult {
  /** From the kill to the last sidecar's first snapshot on the new leader (s), and the median. */
  allBackSeconds: number;
  medianBackSeconds: number;
  leaseTakenSeconds: number;
  server: ServerActivity;
  realCalls: number;
  realFailures: number;
  timeline: TimelinePoint[];
}

/** Calls every real sidecar every 100 ms until stopped; counts what failed. */
function realWorkload(ctx: RunContext): { stop(): Promise<{ calls: number; failures: number }> } {
  let calls = 0;
  let failures = 0;
  let running = true;
  const loops = ctx.realSidecars.map(async (s) => {
    while (running) {
      calls++;
      try {
        const res = await fetch(`${s.url}/proxy/beta/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-tollgate-user': 'real-caller' },
          body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
        });
        await res.arrayBuffer();
        if (res.status !== 200) failures++;
      } catch {
        failures++;
      }
      await sleep(100);
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { calls, failures };
    },
  };
}

export async function failover(ctx: RunContext, n: number): Promise<FailoverResult> {
  const bed = ctx.bed;
  const leader: OperatorReplica = await bed.leader();
  const before = await serverCounters(bed.cp);
  const workload = realWorkload(ctx);
  await sleep(2_000);
  const killedAt = Date.now();
  process.kill(leader.process.pid, 'SIGKILL');
  await leader.process.exited;
  let delivered: number[] = [];
  const back = (async () => {
    const next = await bed.leader();
    const leaseTakenSeconds = (Date.now() - killedAt) / 1000;
    await waitFor(
      `${n} sidecars back on ${next.identity}`,
      async () => {
        delivered = await ctx.fleets.delivered();
        return delivered.every((t) => t > killedAt);
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    ).catch(() => undefined);
    return leaseTakenSeconds;
  })();
  const points = await watch(ctx, back, killedAt);
  const leaseTakenSeconds = await back;
  const backAfter = delivered.filter((t) => t > killedAt).map((t) => (t - killedAt) / 1000);
  await sleep(2_000);
  const real = await workload.stop();
  const server = activity(before, await serverCounters(bed.cp));
  bed.startOperator(leader.identity);
  const d = distribution(backAfter);
  return {
    allBackSeconds: backAfter.length === n ? d.max : NaN,
    medianBackSeconds: d.p50,
    leaseTakenSeconds,
    server,
    realCalls: real.calls,
    realFailures: real.failures,
    timeline: points,
  };
}

export interface AdmissionResult {
  rate: number;
  /** Pod creation as the client sees it, with the webhook and without (ms). */
  withWebhook: Distribution;
  baseline: Distribution;
  /** The API server's own histogram of the webhook call: cumulative counts per bucket (s). */
  apiServerBuckets: { le: string; count: number }[];
  webhookCores: number;
  errors: number;
}

async function createAtRate(ctx: RunContext, namespace: string, rate: number, seconds: number): Promise<{ latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const total = rate * seconds;
  const started = Date.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    if (due > Date.now()) await sleep(due - Date.now());
    const t0 = performance.now();
    inflight.push(
      ctx.bed.api
        .post(`/api/v1/namespaces/${namespace}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `web-${rate}-${i}` },
          spec: { containers: [{ name: 'app', image: 'example.invalid/web:1' }] },
        })
        .then(() => void latencies.push(performance.now() - t0))
        .catch(() => void errors++),
    );
  }
  await Promise.all(inflight);
  await ctx.bed.api.request('DELETE', `/api/v1/namespaces/${namespace}/pods`);
  return { latencies, errors };
}

export async function admission(ctx: RunContext, rate: number, seconds: number): Promise<AdmissionResult> {
  const baseline = await createAtRate(ctx, BASELINE_NAMESPACE, rate, seconds);
  const before = await serverCounters(ctx.bed.cp);
  const meter = cpuMeter(ctx.bed.webhook!.pid);
  const withWebhook = await createAtRate(ctx, ADMIT_NAMESPACE, rate, seconds);
  const webhookCores = meter.stop().cores;
  const after = await serverCounters(ctx.bed.cp);
  return {
    rate,
    withWebhook: distribution(withWebhook.latencies),
    baseline: distribution(baseline.latencies),
    apiServerBuckets: admissionBuckets(before, after),
    webhookCores,
    errors: withWebhook.errors + baseline.errors,
  };
}

/**
 * The status's spentUsd in ledger units. It is formatUsd's exact text (up to 10 decimals: the real sidecars'
 * calls cost fractions of a micro-USD), which parseUsd, made for the 6 decimals of a spec, refuses.
 */
function statusUnits(text: string | undefined): bigint {
  const [whole = '0', fraction = ''] = (text ?? '0').split('.');
  return BigInt(whole) * UNITS_PER_USD + BigInt(fraction.padEnd(10, '0'));
}
