// budgets.store redis on a real API server and a real redis-server (ADR 1314): two operators elect a leader
// that keeps the cluster ledger in Redis, two sidecar processes spend through it, and both the leader and the
// store are SIGKILLed in the middle of the spending, and the store is later emptied. What a platform team checks: the limit holds across the
// pods, the spend already in the ConfigMap ledger when they switched stores is kept, the final spend equals
// the spans' costs exactly (nothing lost or counted twice), and no ledger write reaches the API server.

import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatUsd, unitsFromCostUsd } from '../../contracts/money.ts';
import { BUDGET_POLICY, type BudgetPolicy } from '../../crds/index.ts';
import { LEDGER_LABEL, LedgerStore } from '../../operator/src/budgets/ledger-store.ts';
import { RedisLedgerStore } from '../../operator/src/budgets/redis-ledger-store.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import type { ManagedProcess } from '../control-plane/managed-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { type RedisServer, startRedisServer } from '../support/redis-server.ts';
import { recentSpans } from '../support/spans.ts';
import {
  ensureNamespace,
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  putSecret,
  startOperatorProcess,
  startPodSidecar,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';

const NS = 'till';
const KEY = 'sk-budget-redis-cluster-test';
const LEASE_FLAGS = ['--lease-duration=4', '--renew-deadline=3', '--retry-period=1'];
const PREFIX = 'tollgate:budgets';

let cp: ControlPlane;
let api: KubeApi;
let dir: ReturnType<typeof tempDir>;
let upstream: FakeUpstream;
let redis: RedisServer;
let grpcPort: number;
const operators: OperatorProcess[] = [];
const sidecars: { proc: ManagedProcess; url: string; pod: string }[] = [];

/** This month's start in UTC: the policy's period, where the spend kept before the switch must be. */
const PERIOD = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)).toISOString();

const BUDGET_POLICY_YAML = `apiVersion: tollgate.dev/v1alpha1
kind: BudgetPolicy
metadata: { name: till-monthly, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: till } }
  users: ["*"]
  limitUsd: "0.02"
  period: month
  timeZone: UTC
`;

async function startSidecar(name: string, caFile: string): Promise<{ proc: ManagedProcess; url: string; pod: string }> {
  const pod = await podWithToken(api, { namespace: NS, name, labels: { app: 'till' }, dir: dir.path });
  return startPodSidecar({ pod, dir: dir.path, grpcPort, caFile });
}

async function call(url: string, user: string): Promise<number> {
  const res = await fetch(`${url}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function ledgerConfigMaps(): Promise<string[]> {
  const list = await api.get<{ items: { metadata: { name: string } }[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/configmaps`, {
    query: { labelSelector: `${LEDGER_LABEL}=true` },
  });
  return list.items.map((cm) => cm.metadata.name).sort();
}

beforeAll(async () => {
  [cp, redis] = await Promise.all([startControlPlane(), startRedisServer()]);
  dir = tempDir('tollgate-budgets-redis-');
  api = new KubeApi(cp.kubeConfig);
  upstream = await startFakeUpstream('openai', { expectApiKey: KEY });
  upstream.behave({ usage: { input: 1000, output: 0 } }); // 0.001 USD a call at 1 USD per million input tokens
  const kubeconfig = await installOperatorPrerequisites(cp, dir.path);
  // The policy exists before the operators start: a leader drops the ledger of a policy that is gone.
  await ensureNamespace(api, NS);
  const policy = await cp.kubectl(['apply', '-f', '-'], { input: BUDGET_POLICY_YAML });
  expect(policy.code, policy.stderr).toBe(0);
  // What the operator had kept in ConfigMaps before the switch: dave spent 0.005 USD this month.
  const units = (usd: string) => String(unitsFromCostUsd(Number(usd)));
  await new LedgerStore(api, OPERATOR_NAMESPACE).writePatch(
    1,
    0,
    JSON.stringify({ v: 2, policies: { [`${NS}/till-monthly`]: { periods: { [PERIOD]: { dave: [units('0.005'), units('0.005'), 0] } } } } }),
  );
  grpcPort = await freePort();
  const flags = [...LEASE_FLAGS, `--ledger-redis-url=${redis.url}`];
  operators.push(startOperatorProcess({ kubeconfig, identity: 'redis-a', grpcPort, logDir: dir.path, extraArgs: flags }));
  await eventually('redis-a to lead', async () => (await leaseHolder(api)) === 'redis-a', 60_000);
  operators.push(startOperatorProcess({ kubeconfig, identity: 'redis-b', grpcPort, logDir: dir.path, extraArgs: flags }));
  await putSecret(api, NS, 'llm-keys', { openai: KEY });
  const applied = await cp.kubectl(['apply', '-f', '-'], {
    input: `apiVersion: tollgate.dev/v1alpha1
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
`,
  });
  expect(applied.code, applied.stderr).toBe(0);
  const caFile = await operatorCaFile(api, dir.path);
  sidecars.push(await startSidecar('till-a', caFile), await startSidecar('till-b', caFile));
  // The warm-up is counted only by a sidecar that has the policy: one that connected before the leader had
  // reconciled it serves calls unbudgeted until it arrives (docs/known-limitations.md). Wait for it here, so
  // the test measures the ledger through its failures, not that start-up window.
  await Promise.all(
    sidecars.map((s) =>
      eventually(
        `sidecar ${s.pod} to have the BudgetPolicy`,
        async () => ((await (await fetch(`${s.url}/_local/api/health`)).json()) as { budgets?: { policies?: number } }).budgets?.policies === 1,
        60_000,
      ),
    ),
  );
  await Promise.all(sidecars.map((s) => eventually(`sidecar ${s.pod} to serve with the pushed key`, async () => (await call(s.url, 'warm-up')) === 200, 60_000)));
}, 180_000);

afterAll(async () => {
  await Promise.all(sidecars.map((s) => s.proc.stop()));
  await Promise.all(operators.map((o) => o.stop(2_000)));
  await upstream?.close();
  await redis?.stop();
  await cp?.stop();
  if (!process.env.KEEP_TEST_DIR) dir?.remove();
});

describe('budgets.store redis: the operator keeps the cluster ledger in Redis', () => {
  it('holds a 0.02 USD limit across two pods through a leader kill, a store kill and an emptied store, keeps the spend from before the switch, and writes no ledger ConfigMap', async () => {
    const before = await ledgerConfigMaps();
    expect(before).toEqual(['tollgate-budget-log-000000000001']);
    const path = `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/till-monthly`;
    await eventually('the BudgetPolicy to show the spend kept before the switch', async () => (await api.get<BudgetPolicy>(path)).status?.spentUsd === '0.005', 60_000);

    // alice spends through both pods in turn; the leader dies after 6 calls; the store is down from 10 to 18
    // (about six seconds of reports: longer than the leader keeps sealing patches it cannot write, and its pushes
    // must go on) and comes back empty at 19.
    const [a, b] = sidecars as [(typeof sidecars)[0], (typeof sidecars)[0]];
    let answered = 0;
    let refusedAt = -1;
    for (let i = 0; i < 40 && refusedAt < 0; i++) {
      if (i === 6) operators[0]!.kill();
      if (i === 10) await redis.kill();
      if (i > 10 && i < 18) {
        // A call every 800 ms while the store is down: more than the four patches a second the leader seals
        // unwritten, so it must go on applying and pushing without sealing more.
        const since = Date.now();
        await eventually('800 ms between calls', () => Date.now() - since >= 800, 5_000);
      }
      if (i === 18) await redis.start();
      // Then the store comes back empty (a new pod on an empty emptyDir): the leader writes it again from memory.
      if (i === 19) {
        const client = new Redis(redis.url);
        await client.flushall();
        client.disconnect();
      }
      const status = await call(i % 2 === 0 ? a.url : b.url, 'alice');
      if (status === 200) answered++;
      else if (status === 429) refusedAt = i;
      else throw new Error(`call ${i} answered ${status}`);
      // Each pod learns of the other's spend through the leader once it has charged alice itself (ADR 1307's
      // fan-out by interest); give that the time a report and push take, so the test measures the ledger, not
      // the lag the docs state (one report-and-push round trip).
      if (i === 0) continue;
      await eventually(
        `both pods to agree on alice after call ${i}`,
        async () => {
          const views = await Promise.all(
            sidecars.map(async (s) => ((await (await fetch(`${s.url}/_local/api/budgets/alice`)).json()) as { spent_usd_exact?: string }).spent_usd_exact),
          );
          return views[0] === views[1];
        },
        30_000,
      );
    }
    expect(refusedAt).toBeGreaterThan(0);
    expect(answered).toBe(20);
    await eventually('redis-b to lead', async () => (await leaseHolder(api)) === 'redis-b', 60_000);

    await Promise.all(
      sidecars.map((s) =>
        eventually(
          `${s.pod} to have every report acknowledged`,
          async () => {
            const budgets = ((await (await fetch(`${s.url}/_local/api/health`)).json()) as { budgets: { pendingDeductions: number } }).budgets;
            return budgets.pendingDeductions === 0;
          },
          60_000,
        ),
      ),
    );
    // Every call the pods made: the two warm-ups (the policy already limited them) and alice's twenty.
    const spans = (await Promise.all(sidecars.map((s) => recentSpans(s.url)))).flat();
    const costOf = (user: string) => formatUsd(spans.filter((s) => s.user_id === user).reduce((total, s) => total + unitsFromCostUsd(s.cost_usd), 0n));
    expect([costOf('alice'), costOf('warm-up')]).toEqual(['0.02', '0.002']);
    const status = await eventually(
      'the status to show the final spend',
      async () => {
        const bp = await api.get<BudgetPolicy>(path);
        if (bp.status?.spentUsd !== '0.027') {
          throw new Error(
            `status.spentUsd is ${bp.status?.spentUsd}, want 0.027 (0.022 in spans and dave's 0.005 from before); top spenders ${JSON.stringify(bp.status?.topSpenders)}`,
          );
        }
        return bp.status;
      },
      30_000,
    );
    expect(status.topSpenders).toEqual([
      { user: 'alice', spentUsd: '0.02', percent: 100 },
      { user: 'dave', spentUsd: '0.005', percent: 25 },
      { user: 'warm-up', spentUsd: '0.002', percent: 10 },
    ]);

    // The outage was felt: the leader's writes failed (and the reports they carried stayed unacknowledged).
    const failed = readFileSync(operators[1]!.logPath, 'utf8')
      .split('\n')
      .filter((l) => l.includes('failed to deduct spend: the budget ledger write failed'));
    expect(failed.length).toBeGreaterThan(0);
    expect(readFileSync(operators[1]!.logPath, 'utf8')).toContain('budget ledger lost by its store: writing the whole ledger from memory again');
    expect(JSON.parse(failed[0]!)).toMatchObject({ err: expect.stringContaining(`the Redis store at 127.0.0.1:${redis.port} cannot be reached`) as unknown });

    // The ledger is in Redis, read back as a new leader reads it; the API server holds only what was there.
    expect(await ledgerConfigMaps()).toEqual(before);
    const client = new Redis(redis.url);
    try {
      const loaded = await new RedisLedgerStore(client, { keyPrefix: PREFIX, url: redis.url, before: () => Promise.reject(new Error('the ConfigMaps were read again')) }).load();
      const users = loaded.state.policies.get(`${NS}/till-monthly`)!.periods.get(Date.parse(PERIOD))!;
      expect(formatUsd(users.get('alice')!.spent)).toBe('0.02');
      expect(formatUsd(users.get('dave')!.spent)).toBe('0.005');
    } finally {
      client.disconnect();
    }
  });
});
