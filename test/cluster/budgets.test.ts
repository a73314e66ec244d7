// Budgets in a cluster, on a real API server: `kubectl apply` a BudgetPolicy, run two sidecar processes for two
// pods (real projected tokens), spend through one until the user's budget is exhausted, and see the other pod
// refuse the user within seconds; BudgetPolicy status and Events; and the leader operator SIGKILLed in the
// middle of the spending, after which the ledger's final spend equals the sum of the span costs exactly.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatUsd, parseUsd, unitsFromCostUsd } from '../../contracts/money.ts';
import { BUDGET_POLICY, type BudgetPolicy } from '../../crds/index.ts';
import { LEDGER_LABEL, LedgerStore } from '../../operator/src/budgets/ledger-store.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import type { ManagedProcess } from '../control-plane/managed-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { recentSpans } from '../support/spans.ts';
import {
  ensureNamespace,
  eventsFor,
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  type PodWithToken,
  putSecret,
  startOperatorProcess,
  startPodSidecar,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';

const NS = 'shop';
const KEY = 'sk-budget-cluster-test';
/** Short leases so the failover takes seconds (each shorter than the one before it). */
const LEASE_FLAGS = ['--lease-duration=4', '--renew-deadline=3', '--retry-period=1'];

let cp: ControlPlane;
let api: KubeApi;
let dir: ReturnType<typeof tempDir>;
let upstream: FakeUpstream;
let kubeconfig: string;
let grpcPort: number;
const operators: OperatorProcess[] = [];
const sidecars: { proc: ManagedProcess; url: string; pod: string }[] = [];

const proxyConfigYaml = () => `apiVersion: tollgate.dev/v1alpha1
kind: ProxyConfig
metadata: { name: default, namespace: ${NS} }
spec:
  pricing:
    models:
      - { provider: openai, model: gpt-4o-mini, input_per_million: 1, output_per_million: 0 }
  upstreams:
    beta: { baseUrl: "${upstream.url}" }
  credentials:
    openaiApiKey: { secretName: llm-keys, key: openai }
`;

// 20 calls of 0.001 USD each.
const budgetPolicyYaml = `apiVersion: tollgate.dev/v1alpha1
kind: BudgetPolicy
metadata: { name: checkout-monthly, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: checkout } }
  users: ["*"]
  limitUsd: "0.02"
  period: month
  alertThresholds: [50, 100]
`;

let caFile: string;
const pods = new Map<string, PodWithToken>();

/** A sidecar process for pod `name`; started again for the same pod, it keeps its state directory (a container restart). */
async function startSidecar(name: string): Promise<{ proc: ManagedProcess; url: string; pod: string }> {
  let pod = pods.get(name);
  if (!pod) {
    pod = await podWithToken(api, { namespace: NS, name, labels: { app: 'checkout' }, dir: dir.path });
    pods.set(name, pod);
  }
  return startPodSidecar({ pod, dir: dir.path, grpcPort, caFile });
}

/** One chat call as `user` (or as nobody): its status and body. */
async function call(sidecarUrl: string, user: string | null): Promise<{ status: number; text: string }> {
  const res = await fetch(`${sidecarUrl}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(user ? { 'x-tollgate-user': user } : {}) },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, text: await res.text() };
}

async function budgetPolicy(): Promise<BudgetPolicy> {
  return api.get<BudgetPolicy>(`/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/checkout-monthly`);
}

async function sidecarHealth(url: string): Promise<{ pendingDeductions: number; policies: number; connected: boolean }> {
  return ((await (await fetch(`${url}/_local/api/health`)).json()) as { budgets: { pendingDeductions: number; policies: number; connected: boolean } }).budgets;
}

beforeAll(async () => {
  cp = await startControlPlane();
  dir = tempDir('tollgate-budgets-cluster-');
  api = new KubeApi(cp.kubeConfig);
  upstream = await startFakeUpstream('openai', { expectApiKey: KEY });
  upstream.behave({ usage: { input: 1000, output: 0 } }); // 0.001 USD at 1 USD per million input tokens
  kubeconfig = await installOperatorPrerequisites(cp, dir.path);
  grpcPort = await freePort();
  operators.push(startOperatorProcess({ kubeconfig, identity: 'operator-a', grpcPort, logDir: dir.path, extraArgs: LEASE_FLAGS }));
  await eventually('operator-a to lead', async () => (await leaseHolder(api)) === 'operator-a', 60_000);
  // Same push port: only the leader listens, so after a failover the sidecars find the new leader there.
  operators.push(startOperatorProcess({ kubeconfig, identity: 'operator-b', grpcPort, logDir: dir.path, extraArgs: LEASE_FLAGS }));
  await ensureNamespace(api, NS);
  await putSecret(api, NS, 'llm-keys', { openai: KEY });
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: proxyConfigYaml() });
  expect(applied.code, applied.stderr).toBe(0);
  caFile = await operatorCaFile(api, dir.path);
  sidecars.push(await startSidecar('checkout-a'), await startSidecar('checkout-b'));
  await Promise.all(sidecars.map((s) => eventually(`sidecar ${s.pod} to serve with the pushed key`, async () => (await call(s.url, 'warm-up')).status === 200, 60_000)));
}, 180_000);

afterAll(async () => {
  await Promise.all(sidecars.map((s) => s.proc.stop()));
  await Promise.all(operators.map((o) => o.stop(2_000)));
  await upstream?.close();
  await cp?.stop();
  dir?.remove();
});

describe('a BudgetPolicy caps a user across two sidecars', () => {
  it('the sample BudgetPolicy is accepted by the API server, and a bad one is refused naming the field', async () => {
    const sample = await cp.kubectl(['apply', '--dry-run=server', '-n', NS, '-f', join(import.meta.dirname, '../../crds/samples/budget-policy.yaml')]);
    expect(sample.code, sample.stderr).toBe(0);
    const both = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], {
      input: budgetPolicyYaml.replace('limitUsd: "0.02"', 'limitUsd: "0.02"\n  limitMicroUsd: 20000'),
    });
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain('set exactly one of limitUsd and limitMicroUsd');
    const float = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: budgetPolicyYaml.replace('limitUsd: "0.02"', 'limitUsd: 0.02') });
    expect(float.code).not.toBe(0);
    expect(float.stderr).toContain('spec.limitUsd');
    // ADR 1312: one kind of subject, a known scope, a team with members.
    const twoKinds = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: budgetPolicyYaml.replace('users: ["*"]', 'users: ["*"]\n  scope: Namespace') });
    expect(twoKinds.code).not.toBe(0);
    expect(twoKinds.stderr).toContain('set at most one of users, serviceAccounts, team, scope');
    const cluster = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: budgetPolicyYaml.replace('users: ["*"]', 'scope: Cluster') });
    expect(cluster.code).not.toBe(0);
    expect(cluster.stderr).toMatch(/spec\.scope: Unsupported value: "Cluster"/);
    const empty = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: budgetPolicyYaml.replace('users: ["*"]', 'team: { name: buyers }') });
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toContain('spec.team');
    expect(empty.stderr).toContain('a team lists users, serviceAccounts or both');
    const noPods = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], {
      input: budgetPolicyYaml.replace('users: ["*"]', 'scope: Workload').replace(/ {2}selector: .*\n/, ''),
    });
    expect(noPods.code).not.toBe(0);
    expect(noPods.stderr).toContain('scope Workload needs a selector');
  });

  it('kubectl apply reaches both sidecars, spend through one exhausts the user in both, and a killed leader loses nothing', async () => {
    const applied = await cp.kubectl(['apply', '-f', '-'], { input: budgetPolicyYaml });
    expect(applied.code, applied.stderr).toBe(0);
    await eventually('the BudgetPolicy to be Ready', async () => (await budgetPolicy()).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 60_000);
    await Promise.all(sidecars.map((s) => eventually(`${s.pod} to enforce the policy`, async () => (await sidecarHealth(s.url)).policies === 1, 30_000)));
    const [a, b] = sidecars as [(typeof sidecars)[0], (typeof sidecars)[0]];

    // A call without a user id is charged to the pod's service account.
    const anonymous = await call(b.url, null);
    expect(anonymous.status).toBe(200);
    expect((await recentSpans(b.url, 1))[0]).toMatchObject({ user_id: `system:serviceaccount:${NS}:app`, status: 'ok' });

    // Spend through pod A; kill the leader half-way through.
    let answered = 0;
    let refused: { status: number; text: string } | undefined;
    for (let i = 0; i < 40 && !refused; i++) {
      if (i === 8) {
        operators[0]!.kill();
        console.log('budgets: leader operator-a killed after 8 calls');
      }
      const res = await call(a.url, 'alice');
      if (res.status === 200) answered++;
      else if (res.status === 429) refused = res;
      else throw new Error(`unexpected ${res.status}`);
    }
    expect(refused).toBeDefined();
    // Pod A alone counted every call it made: it refuses exactly at the limit.
    expect(answered).toBe(20);
    const body = JSON.parse(refused!.text) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('budget_exceeded');
    expect(body.error.message).toContain('user "alice" has spent the 0.02 USD monthly budget of policy "shop/checkout-monthly"');

    // Pod B refuses alice within seconds of the spend reaching the new leader; other users still pass.
    await eventually('operator-b to lead', async () => (await leaseHolder(api)) === 'operator-b', 60_000);
    const started = Date.now();
    // Watch pod B's view rather than calling: a call admitted before B knows would spend more of alice's budget.
    await eventually(
      'pod B to see alice exhausted',
      async () => ((await (await fetch(`${b.url}/_local/api/budgets/alice`)).json()) as { state: string }).state === 'exhausted',
      30_000,
    );
    console.log(`budgets: pod B knew alice's budget was spent ${((Date.now() - started) / 1000).toFixed(1)} s after operator-b led`);
    expect((await call(b.url, 'alice')).status).toBe(429);
    expect((await call(b.url, 'bob')).status).toBe(200);

    // Every report acknowledged; the ledger then holds exactly what the spans cost, nothing lost or doubled
    // by the failover.
    await Promise.all(sidecars.map((s) => eventually(`${s.pod} to have every report acknowledged`, async () => (await sidecarHealth(s.url)).pendingDeductions === 0, 60_000)));
    // The warm-up calls came before the policy existed: nothing limited or charged them.
    const spans = (await Promise.all(sidecars.map((s) => recentSpans(s.url)))).flat().filter((s) => s.user_id !== 'warm-up');
    const sum = (list: typeof spans) => formatUsd(list.reduce((total, s) => total + unitsFromCostUsd(s.cost_usd), 0n));
    const expected = sum(spans);
    // The anonymous call, 20 calls of alice, one of bob: 22 charged calls of 0.001 USD.
    expect(expected).toBe('0.022');
    const status = await eventually(
      'the status to show the final spend',
      async () => {
        const bp = await budgetPolicy();
        if (bp.status?.spentUsd !== expected) throw new Error(`status.spentUsd is ${bp.status?.spentUsd}, the spans add up to ${expected}`);
        return bp.status;
      },
      30_000,
    );
    expect(status).toMatchObject({
      limitUsd: '0.02',
      users: 3,
      usersOverThreshold: 1,
      usersExhausted: 1,
      thresholds: [
        { percent: 50, users: 1 },
        { percent: 100, users: 1 },
      ],
      sidecars: 2,
    });
    expect(status.topSpenders).toEqual([
      { user: 'alice', spentUsd: '0.02', percent: 100 },
      { user: 'bob', spentUsd: '0.001', percent: 5 },
      { user: `system:serviceaccount:${NS}:app`, spentUsd: '0.001', percent: 5 },
    ]);
    expect(status.periodStart).toMatch(/^\d{4}-\d{2}-01T00:00:00(\.000)?Z$/);

    const table = await cp.kubectl(['get', 'budgetpolicies', '-n', NS]);
    expect(table.stdout).toMatch(/NAME\s+LEVEL\s+LIMIT\s+PERIOD\s+SPENT\s+OVER\s+READY\s+AGE/);
    expect(table.stdout).toMatch(new RegExp(`checkout-monthly\\s+User\\s+0\\.02\\s+month\\s+${expected.replace('.', '\\.')}\\s+1\\s+True`));

    // The thresholds were reached once each, across the failover: an Event each, and `budget alert` logged once.
    const events = await eventually('two BudgetThresholdReached events', async () => {
      const list = (await eventsFor(api, NS, 'checkout-monthly')).filter((e) => e.reason === 'BudgetThresholdReached');
      return list.length >= 2 ? list : undefined;
    });
    expect(events.map((e) => e.note).sort()).toEqual([
      expect.stringContaining('User alice reached 100% of the budget'),
      expect.stringContaining('User alice reached 50% of the budget'),
    ]);
    // The operators' log lines reach their files in their own time, possibly after the Events are visible.
    const alertLines = await eventually('two `budget alert` lines', () => {
      const lines = operators
        .map((o) => readFileSync(o.logPath, 'utf8'))
        .join('\n')
        .split('\n')
        .filter((l) => l.includes('budget alert'));
      return lines.length >= 2 ? lines : undefined;
    });
    expect(alertLines).toHaveLength(2);
    expect(JSON.parse(alertLines.find((l) => l.includes('"threshold":100'))!)).toMatchObject({
      level: 40,
      user_id: 'alice',
      policy: 'shop/checkout-monthly',
      threshold: 100,
      limit_usd: 0.02,
    });
  });

  it('a sidecar killed right after its calls loses no spend: restarted on the same disk, it reports it once', async () => {
    const a = sidecars[0]!;
    const before = (await budgetPolicy()).status!.spentUsd!;
    upstream.reset();
    upstream.behave({ usage: { input: 1000, output: 0 } });
    for (let i = 0; i < 5; i++) expect((await call(a.url, 'carol')).status).toBe(200);
    process.kill(-a.proc.pid, 'SIGKILL'); // no drain, no final report: the charges are only on the pod's disk
    await a.proc.exited;
    sidecars[0] = await startSidecar('checkout-a');
    await eventually(
      'the restarted sidecar to report and be acknowledged',
      async () => {
        const health = await sidecarHealth(sidecars[0]!.url);
        return health.connected && health.pendingDeductions === 0;
      },
      60_000,
    );
    // Five calls reached the provider; the ledger has exactly five more calls' cost, carol's included once.
    expect(upstream.requests).toHaveLength(5);
    // The status is written at most about once a second: it may show part of carol's spend (what the killed
    // sidecar had reported) before it shows all of it. Every report is acknowledged by now, so the ledger is
    // final: a lost or doubled call would keep the status from ever showing this total.
    const total = formatUsd((parseUsd(before) as bigint) + (parseUsd('0.005') as bigint));
    const status = await eventually(
      'the status to count carol’s five calls',
      async () => {
        const bp = await budgetPolicy();
        const carol = bp.status?.topSpenders?.find((t) => t.user === 'carol')?.spentUsd;
        if (carol !== '0.005' || bp.status?.spentUsd !== total) throw new Error(`carol ${carol ?? 'absent'}, spentUsd ${bp.status?.spentUsd} (want 0.005 and ${total})`);
        return bp.status;
      },
      30_000,
    );
    expect(status.spentUsd).toBe(total);
  });

  it('a policy the API server accepts but the operator cannot use is Ready=False InvalidSpec naming the field, until it is fixed', async () => {
    // No pod is labelled app: nightly: this policy limits nobody, whatever it says.
    const yaml = (timeZone: string) =>
      budgetPolicyYaml.replace('checkout-monthly', 'nightly').replace('app: checkout', 'app: nightly').replace('period: month', `period: day\n  timeZone: ${timeZone}`);
    const path = `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/nightly`;
    const readyAt = (reason: string) =>
      eventually(`the Ready condition with reason ${reason}`, async () => {
        const bp = await api.get<BudgetPolicy>(path);
        const ready = bp.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.reason === reason && ready.observedGeneration === bp.metadata?.generation ? { ready, generation: bp.metadata?.generation } : undefined;
      });

    expect((await cp.kubectl(['apply', '-f', '-'], { input: yaml('Europe/Berlinn') })).code).toBe(0);
    const invalid = await readyAt('InvalidSpec');
    expect(invalid.ready).toMatchObject({ status: 'False', message: expect.stringContaining('Europe/Berlinn') });
    expect(invalid.ready.message).toMatch(/timeZone/);

    expect((await cp.kubectl(['apply', '-f', '-'], { input: yaml('Europe/Berlin') })).code).toBe(0);
    const fixed = await eventually('the fixed policy to be Ready', async () => {
      const bp = await api.get<BudgetPolicy>(path);
      const ready = bp.status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.status === 'True' && ready.observedGeneration === bp.metadata?.generation ? { ready, generation: bp.metadata?.generation } : undefined;
    });
    expect(fixed.generation).toBe((invalid.generation ?? 0) + 1);
    const events = await eventually('Rejected and Accepted events', async () => {
      const reasons = (await eventsFor(api, NS, 'nightly')).map((e) => e.reason);
      return reasons.includes('Rejected') && reasons.includes('Accepted') ? reasons : undefined;
    });
    expect(events).not.toContain('BudgetThresholdReached');
    expect((await cp.kubectl(['delete', 'budgetpolicy', 'nightly', '-n', NS])).code).toBe(0);
  });

  it('the ledger is in the API server: patches and a base in ConfigMaps of the operator namespace, with the pods’ watermarks', async () => {
    const list = await api.get<{ items: { metadata: { name: string } }[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/configmaps`, {
      query: { labelSelector: `${LEDGER_LABEL}=true` },
    });
    expect(list.items.length).toBeGreaterThan(0);
    for (const cm of list.items) expect(cm.metadata.name).toMatch(/^tollgate-budget-(log-\d{12}|base-\d+-\d+|ledger)$/);
    // Read back as a new leader reads it.
    const loaded = await new LedgerStore(api, OPERATOR_NAMESPACE).load();
    expect([...loaded.state.policies.keys()]).toEqual(['shop/checkout-monthly']);
    const ledger = loaded.state.policies.get('shop/checkout-monthly')!;
    expect([...ledger.applied.values()].map((w) => w.pod).sort()).toEqual(['shop/checkout-a', 'shop/checkout-b']);
  });
});

// ADR 1312: a team's budget above the users', kept by the operator like a user's under @team:<name>.
describe('a team BudgetPolicy above the per-user one', () => {
  const teamYaml = (name: string) => `apiVersion: tollgate.dev/v1alpha1
kind: BudgetPolicy
metadata: { name: ${name}, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: checkout } }
  team: { name: buyers, users: [tina, tom] }
  limitUsd: "0.002"
`;
  const path = (name: string) => `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/${name}`;

  it("stops a member with room of their own once the team's 0.002 is spent through two sidecars, shows the level, and refuses a second policy naming the team", async () => {
    expect((await cp.kubectl(['apply', '-f', '-'], { input: teamYaml('checkout-team') })).code).toBe(0);
    await eventually('both sidecars to have the team policy', async () => {
      const health = await Promise.all(sidecars.map((s) => sidecarHealth(s.url)));
      if (health.every((h) => h.policies === 2)) return true;
      const ready = (await api.get<BudgetPolicy>(path('checkout-team'))).status?.conditions?.find((c) => c.type === 'Ready');
      throw new Error(`policies per sidecar ${health.map((h) => h.policies).join(', ')}; Ready ${ready?.status} ${ready?.reason}: ${ready?.message}`);
    });
    const [a, b] = [sidecars[0]!.url, sidecars.at(-1)!.url];
    // 0.001 a call: tina through one pod, tom through the other; each has 0.02 of their own (checkout-monthly).
    expect((await call(a, 'tina')).status).toBe(200);
    expect((await call(b, 'tom')).status).toBe(200);
    const status = await eventually('the team spent 0.002 in the status', async () => {
      const s = (await api.get<BudgetPolicy>(path('checkout-team'))).status;
      return s?.spentUsd === '0.002' && s.usersExhausted === 1 ? s : undefined;
    });
    expect(status).toMatchObject({ level: 'Team', subject: 'team buyers', limitUsd: '0.002', users: 1, topSpenders: [{ user: '@team:buyers', spentUsd: '0.002', percent: 100 }] });
    // tina has spent 0.001 of her 0.02, but her team has nothing left: refused by either pod.
    const refused = await call(a, 'tina');
    expect(refused.status).toBe(429);
    expect(refused.text).toContain('the team \\"buyers\\" (of user \\"tina\\") has spent the 0.002 USD monthly budget of policy \\"shop/checkout-team\\"');
    expect((await call(b, 'tom')).status).toBe(429);

    const table = await cp.kubectl(['get', 'budgetpolicies', '-n', NS, '-o', 'wide']);
    expect(table.stdout).toMatch(/NAME\s+LEVEL\s+SUBJECT\s+LIMIT/);
    expect(table.stdout).toMatch(/checkout-team\s+Team\s+team buyers\s+0\.002\s+month\s+0\.002\s+1\s+1\s+True/);

    // A second policy for the same pods naming the same team: Ready=False SubjectConflict naming the field.
    expect((await cp.kubectl(['apply', '-f', '-'], { input: teamYaml('checkout-team-2') })).code).toBe(0);
    const conflict = await eventually('the second team policy refused', async () => {
      const bp = await api.get<BudgetPolicy>(path('checkout-team-2'));
      const ready = bp.status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.reason === 'SubjectConflict' && ready.observedGeneration === bp.metadata?.generation ? ready : undefined;
    });
    expect(conflict).toMatchObject({ status: 'False', message: 'spec.team.name names the team buyers, which the older policy checkout-team already names at the same level' });
    expect((await cp.kubectl(['delete', 'budgetpolicy', 'checkout-team', 'checkout-team-2', '-n', NS])).code).toBe(0);
    await eventually('the team policy gone from the sidecars', async () => (await Promise.all(sidecars.map((s) => sidecarHealth(s.url)))).every((h) => h.policies === 1));
  });
});

describe('a Workload BudgetPolicy: the pods its selector picks share one budget', () => {
  it("stops any user once the two checkout pods together spent the workload's 0.002, and shows the level", async () => {
    const yaml = `apiVersion: tollgate.dev/v1alpha1
kind: BudgetPolicy
metadata: { name: checkout-pods, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: checkout } }
  scope: Workload
  limitUsd: "0.002"
`;
    expect((await cp.kubectl(['apply', '-f', '-'], { input: yaml })).code).toBe(0);
    await eventually('both sidecars to have the workload policy', async () => (await Promise.all(sidecars.map((s) => sidecarHealth(s.url)))).every((h) => h.policies === 2));
    const [a, b] = [sidecars[0]!.url, sidecars.at(-1)!.url];
    // 0.001 a call, two users through two pods: 0.002 of 0.002 for the pods together.
    expect((await call(a, 'wendy')).status).toBe(200);
    expect((await call(b, 'walt')).status).toBe(200);
    const status = await eventually('the workload spent 0.002 in the status', async () => {
      const s = (await api.get<BudgetPolicy>(`/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/checkout-pods`)).status;
      return s?.spentUsd === '0.002' && s.usersExhausted === 1 ? s : undefined;
    });
    expect(status).toMatchObject({ level: 'Workload', subject: 'the selected pods', topSpenders: [{ user: '@workload:shop/checkout-pods', spentUsd: '0.002', percent: 100 }] });
    // wanda has spent nothing, but the pods she calls through have.
    const refused = await call(b, 'wanda');
    expect(refused.status).toBe(429);
    expect(refused.text).toContain('the workload budget (over user \\"wanda\\") has spent the 0.002 USD monthly budget of policy \\"shop/checkout-pods\\"');
    expect((await cp.kubectl(['delete', 'budgetpolicy', 'checkout-pods', '-n', NS])).code).toBe(0);
  });
});
