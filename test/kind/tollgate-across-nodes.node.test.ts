// Tollgate on a three-node kind cluster (a control plane and two workers; issue 26, ADR 0112): what one node
// cannot show. The chart's soft anti-affinity spreads the operator's and the webhook's replicas over the
// workers; draining the node of the operator that leads moves the lead to the replica on the other node, the
// app's pod is rescheduled there with its sidecar injected again, and a price applied afterwards reaches it
// through the new leader. The drain takes Tollgate's pods first and the app's once the webhook's replicas are
// back: a pod created while the drain evicts a webhook replica was admitted without its sidecar in the first
// run of this test (failurePolicy Ignore; docs/known-limitations.md).

import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../cluster/operator-fixtures.ts';
import { acquireHostLock, type HostLock } from './host-lock.ts';
import type { KindAssets } from './kind-assets.ts';
import { createKindCluster, MACHINE_LOCK, type KindCluster } from './kind-cluster.ts';
import {
  APP_NAMESPACE,
  appClient,
  appDeployment,
  appNamespaceManifests,
  FAKES_NAMESPACE,
  fakeUpstreamManifests,
  MODEL,
  proxyConfigManifest,
  waitForInjection,
} from './tollgate-fixtures.ts';
import { helmInstall, NAMESPACE } from './tollgate-install.ts';

const skipReason = inject('kindSkipReason');
const assets = inject('kindAssets');

interface PodJson {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { nodeName?: string; initContainers?: Array<{ name: string }> };
  status: { phase: string; conditions?: Array<{ type: string; status: string }> };
}

describe.skipIf(skipReason !== '')('Tollgate on a three-node kind cluster', () => {
  let cluster: KindCluster;
  let lock: HostLock | undefined;
  const images = (assets as KindAssets).images;

  const kubectl = async (args: string[], input?: string): Promise<string> => {
    const r = await cluster.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };
  const pods = async (namespace: string, selector: string) =>
    (JSON.parse(await kubectl(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json'])) as { items: PodJson[] }).items;
  const ready = (p: PodJson) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const leader = async () => (await kubectl(['get', 'lease', '-n', NAMESPACE, 'tollgate-operator', '-o', 'jsonpath={.spec.holderIdentity}'])).trim();
  const costOfNextCall = async () => {
    const call = await appClient<{ status: number; headers: Record<string, string> }>(cluster, ['call', MODEL]);
    if (call.status !== 200) return undefined;
    const traces = await appClient<{ body: { spans: Array<{ span_id: string; cost_usd: number }> } }>(cluster, ['traces', '20']);
    return traces.body.spans.find((s) => s.span_id === call.headers['x-proxy-span-id'])?.cost_usd;
  };

  beforeAll(async () => {
    lock = await acquireHostLock(MACHINE_LOCK, 'kind');
    cluster = await createKindCluster({ name: 'tollgate-test-3', workers: 2, assets: assets!, log: (line) => process.stderr.write(`[kind] ${line}\n`) });
  }, 30 * 60_000);

  afterAll(async () => {
    try {
      await cluster?.delete();
    } finally {
      lock?.release();
    }
  }, 300_000);

  it("spreads the operator's and the webhook's replicas over the two workers", async () => {
    const installed = await helmInstall(cluster, ['--wait', '--timeout', '5m']);
    expect(installed.code, `${installed.stderr}\n${await cluster.describe()}`).toBe(0);
    const nodes = await cluster.nodes();
    expect(nodes).toHaveLength(3);
    for (const component of ['operator', 'webhook']) {
      const replicas = await pods(NAMESPACE, `app.kubernetes.io/component=${component}`);
      expect(replicas, component).toHaveLength(2);
      expect(new Set(replicas.map((p) => p.spec.nodeName)).size, `${component} replicas on ${replicas.map((p) => p.spec.nodeName).join(', ')}`).toBe(2);
      // kind keeps its NoSchedule taint on the control plane of a cluster with workers.
      for (const p of replicas) expect(p.spec.nodeName).not.toMatch(/control-plane$/);
    }
  });

  it('meters a call from a pod on one worker to the fake upstream on whichever node it landed', async () => {
    await kubectl(['apply', '-f', '-'], fakeUpstreamManifests(images.testTools.ref));
    await kubectl(['apply', '-f', '-'], appNamespaceManifests());
    await kubectl(['apply', '-f', '-'], proxyConfigManifest(3));
    await waitForInjection(cluster, images.testTools.ref);
    await kubectl(['apply', '-f', '-'], appDeployment(images.testTools.ref));
    await kubectl(['rollout', 'status', '-n', FAKES_NAMESPACE, 'deployment/fake-openai', '--timeout=180s']);
    await kubectl(['rollout', 'status', '-n', APP_NAMESPACE, 'deployment/chat', '--timeout=180s']);
    await eventually('a call priced by the ProxyConfig', async () => ((await costOfNextCall()) === 3 ? true : undefined), 90_000);
  });

  it("drains the leading operator's node: the other node's replica leads, then the app's pod moves there with its sidecar, and a new price reaches it", async () => {
    const leaderBefore = await leader();
    const operators = await pods(NAMESPACE, 'app.kubernetes.io/component=operator');
    const drainedNode = operators.find((p) => p.metadata.name === leaderBefore)?.spec.nodeName;
    expect(drainedNode, `leader ${leaderBefore} among ${operators.map((p) => p.metadata.name).join(', ')}`).toBeDefined();
    const otherNode = (await cluster.nodes()).find((n) => n !== drainedNode && !n.endsWith('control-plane'))!;
    // Make sure the app's pod is on the drained node, so the drain reschedules it.
    const app = (await pods(APP_NAMESPACE, 'app=chat'))[0]!;
    if (app.spec.nodeName !== drainedNode) {
      await kubectl(['cordon', otherNode]);
      await kubectl(['delete', 'pod', '-n', APP_NAMESPACE, app.metadata.name, '--wait=true']);
      await kubectl(['rollout', 'status', '-n', APP_NAMESPACE, 'deployment/chat', '--timeout=180s']);
      await kubectl(['uncordon', otherNode]);
    }
    const appBefore = (await pods(APP_NAMESPACE, 'app=chat')).find(ready)!;
    expect(appBefore.spec.nodeName).toBe(drainedNode);

    try {
      // Tollgate's own pods first: the PodDisruptionBudgets (minAvailable 1) let the drain evict one replica of
      // each, and the evicted ones come back on the other node.
      await kubectl(['drain', drainedNode!, '--ignore-daemonsets', '--delete-emptydir-data', '--pod-selector=app.kubernetes.io/part-of=tollgate', '--timeout=240s']);
      const newLeader = await eventually(
        'a replica on the other node to take the operator Lease',
        async () => {
          const holder = await leader();
          const onOther = (await pods(NAMESPACE, 'app.kubernetes.io/component=operator')).find((p) => p.metadata.name === holder && p.spec.nodeName === otherNode);
          return onOther ? holder : undefined;
        },
        120_000,
      );
      expect(newLeader).not.toBe(leaderBefore);
      for (const deployment of ['tollgate-operator', 'tollgate-webhook']) await kubectl(['rollout', 'status', '-n', NAMESPACE, `deployment/${deployment}`, '--timeout=180s']);
      await waitForInjection(cluster, images.testTools.ref);

      // Then the rest of the node: the app's pod is rescheduled on the other node and injected again.
      await kubectl(['drain', drainedNode!, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=240s']);
      const moved = await eventually(
        "the app's pod Ready on the other node",
        async () => (await pods(APP_NAMESPACE, 'app=chat')).find((p) => ready(p) && p.spec.nodeName === otherNode),
        180_000,
      );
      expect(moved.metadata.name).not.toBe(appBefore.metadata.name);
      expect(moved.spec.initContainers?.map((c) => c.name) ?? []).toContain('tollgate-proxy');
      await eventually('a call priced as before from the rescheduled pod', async () => ((await costOfNextCall()) === 3 ? true : undefined), 90_000);

      await kubectl(['apply', '-f', '-'], proxyConfigManifest(4.5));
      await eventually('a call costed at the price applied after the failover', async () => ((await costOfNextCall()) === 4.5 ? true : undefined), 120_000);
    } finally {
      await kubectl(['uncordon', drainedNode!]);
    }
  });
});
