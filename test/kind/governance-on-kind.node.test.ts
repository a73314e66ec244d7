// Governance on a kind cluster (issue 38): three injected pods of one namespace under one namespace budget and
// one namespace rate limit, with each counter store the chart offers. First the chart's default (the operator's
// ConfigMap ledger): the budget holds across the pods. Then `helm upgrade` to `budgets.store: redis` with the
// release's own Redis: the spend kept in ConfigMaps is carried over, a requests-per-minute limit holds across
// the pods (on ConfigMaps each sidecar counts its own, the documented reason to choose Redis), and the budget
// holds while the Redis pod is deleted in the middle of the spending and comes back empty. Each time the
// BudgetPolicy's status must equal what the sidecars' spans cost: no charge lost or counted twice.

import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../cluster/operator-fixtures.ts';
import { acquireHostLock, type HostLock } from './host-lock.ts';
import { createKindCluster, MACHINE_LOCK, type KindCluster } from './kind-cluster.ts';
import type { KindAssets } from './kind-assets.ts';
import { FAKE_BASE_URL, FAKE_USAGE, FAKES_NAMESPACE, fakeUpstreamManifests, MODEL, OPENAI_KEY } from './tollgate-fixtures.ts';
import { CHART, helmInstall, NAMESPACE, RELEASE } from './tollgate-install.ts';
import { appClientIn, startSteadyCalls, type SteadyResult } from './upgrade-fixtures.ts';

const skipReason = inject('kindSkipReason');
const assets = inject('kindAssets');

const NS = 'till';
/** USD per million input tokens: the fake bills FAKE_USAGE.input (one million) a call, so a call costs this. */
const CALL_USD = 0.001;
const LIMIT_USD = 0.1;
const PODS = 3;

function tillManifests(image: string): string {
  const labels = { app: 'till' };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: { 'tollgate.dev/injection': 'enabled' } } },
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'llm-keys', namespace: NS, labels: { 'tollgate.dev/credentials': 'true' } }, stringData: { openai: OPENAI_KEY } },
    {
      apiVersion: 'tollgate.dev/v1alpha1',
      kind: 'ProxyConfig',
      metadata: { name: 'default', namespace: NS },
      spec: {
        pricing: { models: [{ provider: 'openai', model: MODEL, input_per_million: CALL_USD / (FAKE_USAGE.input / 1e6), output_per_million: 0 }] },
        upstreams: { beta: { baseUrl: FAKE_BASE_URL } },
        credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'till', namespace: NS },
      spec: {
        replicas: PODS,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels, annotations: { 'tollgate.dev/inject-env': 'true' } },
          spec: {
            containers: [
              {
                name: 'app',
                image,
                imagePullPolicy: 'Never',
                args: ['test/kind/in-pod/app.ts'],
                resources: { requests: { cpu: '20m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
              },
            ],
          },
        },
      },
    },
  ]
    .map((o) => stringify(o))
    .join('---\n');
}

/** The namespace as one budget (ADR 1312), with or without a rate limit for all its pods together (ADR 1313). */
function namespacePolicy(name: string, limitUsd: string, rateLimits?: { requestsPerMinute: number }): string {
  return stringify({
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'BudgetPolicy',
    metadata: { name, namespace: NS },
    spec: { scope: 'Namespace', limitUsd, period: 'month', enforcement: 'block', ...(rateLimits ? { rateLimits } : {}) },
  });
}

interface SidecarBudgets {
  policies: number;
  pendingDeductions: number;
}

describe.skipIf(skipReason !== '')('Governance on a one-node kind cluster: a namespace budget and rate limit across three pods, with each store', () => {
  let node: KindCluster;
  let lock: HostLock | undefined;
  const images = (assets as KindAssets).images;
  let pods: string[] = [];
  let ledgerBeforeRedis: string[] = [];

  const kubectl = async (args: string[], input?: string): Promise<string> => {
    const r = await node.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };
  const apply = (yaml: string) => kubectl(['apply', '-f', '-'], yaml);
  const status = async (policy: string) => JSON.parse((await kubectl(['get', 'budgetpolicy', '-n', NS, policy, '-o', 'jsonpath={.status}'])) || '{}') as { spentUsd?: string };
  const budgetsIn = async (pod: string) => (await appClientIn<{ body: { budgets: SidecarBudgets } }>(node, pod, ['health'], NS)).body.budgets;
  /** Every span the pods' sidecars stored, all users: the calls metered and what they cost. */
  const spans = async () => {
    const rows = (await Promise.all(pods.map((pod) => appClientIn<{ rows: Array<{ calls: number; cost_usd: number }> }>(node, pod, ['spend'], NS)))).flatMap((r) => r.rows);
    return { calls: rows.reduce((n, r) => n + r.calls, 0), usd: rows.reduce((n, r) => n + r.cost_usd, 0) };
  };
  const runningPods = async () =>
    (
      JSON.parse(await kubectl(['get', 'pods', '-n', NS, '-l', 'app=till', '-o', 'json'])) as {
        items: Array<{ metadata: { name: string; deletionTimestamp?: string }; status: { phase: string } }>;
      }
    ).items
      .filter((p) => p.status.phase === 'Running' && !p.metadata.deletionTimestamp)
      .map((p) => p.metadata.name);
  /** The ledger's ConfigMaps with their resourceVersions: any write to one changes this. */
  const ledgerConfigMaps = async () =>
    (
      JSON.parse(await kubectl(['get', 'configmaps', '-n', NAMESPACE, '-l', 'tollgate.dev/budget-ledger=true', '-o', 'json'])) as {
        items: Array<{ metadata: { name: string; resourceVersion: string } }>;
      }
    ).items
      .map((cm) => `${cm.metadata.name}@${cm.metadata.resourceVersion}`)
      .sort();
  /** Until every pod's sidecar enforces exactly `count` policies. */
  const policiesEnforced = (count: number) =>
    Promise.all(pods.map((pod) => eventually(`${pod} to enforce ${count} budget policies`, async () => (await budgetsIn(pod)).policies === count, 60_000)));
  /** Until every report of every pod is acknowledged, so the ledger (and soon the status) holds all of it. */
  const allAcknowledged = () =>
    Promise.all(pods.map((pod) => eventually(`${pod} to have every spend report acknowledged`, async () => (await budgetsIn(pod)).pendingDeductions === 0, 120_000)));

  /** One steady caller per pod (its own user) every `intervalMs`, until `until` says stop; their results. */
  async function spendUntil(intervalMs: number, until: () => Promise<boolean>, during?: () => Promise<void>): Promise<SteadyResult[]> {
    const callers = pods.map((pod, i) => startSteadyCalls(node, [pod], `till-user-${i}`, intervalMs, NS));
    let results: SteadyResult[] = [];
    try {
      await during?.();
      await eventually('the spending to reach its end', until, 120_000);
    } finally {
      // Each caller finishes its call in flight, so every admitted call is in the spans.
      results = (await Promise.all(callers.map((c) => c.stop()))).flat();
    }
    return results;
  }
  const answered = (results: SteadyResult[]) => results.reduce((n, r) => n + (r.statuses['200'] ?? 0), 0);

  /** The namespace budget spent through three pods: the status equals the spans, within 5 % over the limit. */
  async function expectBudgetHeld(policy: string, spentBefore: number): Promise<void> {
    await allAcknowledged();
    const metered = await spans();
    const spentUsd = await eventually(
      `${policy}'s status to equal what the spans cost`,
      async () => {
        const spent = Number((await status(policy)).spentUsd ?? NaN);
        if (Math.abs(spent - (metered.usd - spentBefore)) > 1e-9) throw new Error(`status.spentUsd ${spent}, spans since the policy ${(metered.usd - spentBefore).toFixed(6)}`);
        return spent;
      },
      60_000,
    );
    console.info(`[governance] ${policy}: ${spentUsd} USD spent against ${LIMIT_USD} (${((spentUsd / LIMIT_USD - 1) * 100).toFixed(1)} % over)`);
    expect(spentUsd).toBeGreaterThanOrEqual(LIMIT_USD);
    expect(spentUsd).toBeLessThanOrEqual(LIMIT_USD * 1.05 + 1e-9);
  }

  beforeAll(async () => {
    lock = await acquireHostLock(MACHINE_LOCK, 'kind');
    node = await createKindCluster({ name: 'tollgate-gov', workers: 0, assets: assets!, log: (line) => process.stderr.write(`[kind] ${line}\n`) });
  }, 30 * 60_000);

  afterAll(async () => {
    try {
      await node?.delete();
    } finally {
      lock?.release();
    }
  }, 300_000);

  it('with the ConfigMap ledger (the default), a namespace budget holds across three pods', async () => {
    const installed = await helmInstall(node, ['--wait', '--timeout', '5m']);
    expect(installed.code, `${installed.stderr}\n${await node.describe()}`).toBe(0);
    await apply(fakeUpstreamManifests(images.testTools.ref));
    await apply(tillManifests(images.testTools.ref));
    for (const deployment of [`-n ${NS} deployment/till`, `-n ${FAKES_NAMESPACE} deployment/fake-openai`]) {
      const rollout = await node.kubectl(['rollout', 'status', ...deployment.split(' '), '--timeout=180s']);
      expect(rollout.code, `${rollout.stderr}\n${await node.describe()}`).toBe(0);
    }
    pods = await runningPods();
    expect(pods).toHaveLength(PODS);
    // Each sidecar has its key and price before the policy: one priced call each (before any budget counts).
    for (const pod of pods) {
      await eventually(`${pod} to make a priced call`, async () => (await appClientIn<{ status: number }>(node, pod, ['call', MODEL, 'warm-up'], NS)).status === 200, 90_000);
    }
    const before = (await spans()).usd;
    await apply(namespacePolicy('till-ns', String(LIMIT_USD)));
    await policiesEnforced(1);

    // 0.1 USD is 100 calls; each pod calls every 500 ms, about 6 calls a second in all.
    const results = await spendUntil(500, async () => Number((await status('till-ns')).spentUsd) >= LIMIT_USD);
    expect(answered(results)).toBeGreaterThanOrEqual(100);
    await expectBudgetHeld('till-ns', before);
  });

  it('helm upgrade to budgets.store redis moves the ledger to the release’s Redis with the spend it had', async () => {
    const upgraded = await node.helm([
      'upgrade',
      RELEASE,
      CHART,
      '-n',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'budgets.store=redis',
      '--set',
      'budgets.redis.deploy=true',
      '--wait',
      '--timeout',
      '5m',
    ]);
    expect(upgraded.code, `${upgraded.stderr}\n${await node.describe()}`).toBe(0);
    // The webhook gives the store to pods it injects from now on: the app's pods are replaced to get it.
    await kubectl(['rollout', 'restart', '-n', NS, 'deployment/till']);
    const rollout = await node.kubectl(['rollout', 'status', '-n', NS, 'deployment/till', '--timeout=180s']);
    expect(rollout.code, `${rollout.stderr}\n${await node.describe()}`).toBe(0);
    pods = await eventually('three new pods', async () => {
      const running = await runningPods();
      return running.length === PODS ? running : undefined;
    });
    // The new leader read the ConfigMap ledger into Redis: the exhausted budget is still exhausted.
    expect(Number((await status('till-ns')).spentUsd)).toBeGreaterThanOrEqual(LIMIT_USD);
    await policiesEnforced(1);
    const refused = await appClientIn<{ status: number }>(node, pods[0]!, ['call', MODEL, 'till-user-0'], NS);
    expect(refused.status).toBe(429);
    ledgerBeforeRedis = await ledgerConfigMaps();
    expect(ledgerBeforeRedis.length).toBeGreaterThan(0);
  });

  it('on Redis, a namespace rate limit of 30 requests a minute holds across three pods', async () => {
    await kubectl(['delete', 'budgetpolicy', '-n', NS, 'till-ns']);
    await policiesEnforced(0);
    await apply(namespacePolicy('till-rate', '100', { requestsPerMinute: 30 }));
    await policiesEnforced(1);
    const started = Date.now();
    // Each pod calls every 100 ms, far faster than 30 a minute; stop after about 15 s.
    const results = await spendUntil(100, async () => Date.now() - started >= 15_000);
    const seconds = Math.max(...results.map((r) => r.elapsedMs)) / 1000;
    const admitted = answered(results);
    // GCRA (ADR 1309): a minute's allowance at once, then one every 2 s; three callers sharing one window.
    const allowed = 30 + (30 * seconds) / 60;
    console.info(
      `[governance] rate: ${admitted} calls admitted in ${seconds.toFixed(1)} s against ${allowed.toFixed(1)} allowed; statuses ${JSON.stringify(results.map((r) => r.statuses))}`,
    );
    expect(admitted).toBeLessThanOrEqual(Math.ceil(allowed * 1.05));
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(allowed * 0.95) - 1);
  });

  it('on Redis, a namespace budget holds across three pods while the Redis pod is deleted and comes back empty', async () => {
    await kubectl(['delete', 'budgetpolicy', '-n', NS, 'till-rate']);
    await policiesEnforced(0);
    await allAcknowledged();
    const before = (await spans()).usd;
    await apply(namespacePolicy('till-ns-redis', String(LIMIT_USD)));
    await policiesEnforced(1);
    const results = await spendUntil(
      500,
      async () => Number((await status('till-ns-redis')).spentUsd) >= LIMIT_USD,
      async () => {
        await eventually('a third of the budget spent', async () => Number((await status('till-ns-redis')).spentUsd) >= LIMIT_USD / 3, 60_000);
        await kubectl(['delete', 'pod', '-n', NAMESPACE, '-l', 'app.kubernetes.io/component=redis', '--grace-period=0', '--force']);
        console.info('[governance] the Redis pod was deleted');
      },
    );
    expect(answered(results)).toBeGreaterThanOrEqual(100);
    await expectBudgetHeld('till-ns-redis', before);
    // The leader noticed the empty store and wrote the ledger again from its memory.
    const leader = (await kubectl(['get', 'lease', '-n', NAMESPACE, 'tollgate-operator', '-o', 'jsonpath={.spec.holderIdentity}'])).trim();
    const logs = await kubectl(['logs', '-n', NAMESPACE, leader]);
    expect(logs).toContain('budget ledger lost by its store');
    // Nothing of the ledger went to the API server since the switch: its ConfigMaps are as the switch left them.
    expect(await ledgerConfigMaps()).toEqual(ledgerBeforeRedis);
  });
});
