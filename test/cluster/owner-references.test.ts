// What the operator creates at run time names its Deployment as owner (ADR 0807), so `helm uninstall` (which
// deletes the Deployment) lets the garbage collector delete it. There is no kube-controller-manager here, so no
// garbage collector: this test checks the references themselves, against a real kube-apiserver and with the
// chart's RBAC; the kind test (test/kind) checks that the objects are gone after an uninstall.
//
// The upgrade path first: an operator without --owner-deployment (as before this change) creates the Lease,
// the push EndpointSlice, the TLS Secret and a budget ledger; the next operator, with the flag, adds the
// reference to each of them without replacing what they hold.

import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_LABEL, LedgerStore } from '../../operator/src/budgets/ledger-store.ts';
import type { OwnerReference } from '../../kube-client/owner-reference.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { CHART_NAMES } from './chart-rbac.ts';
import { eventually, installOperatorPrerequisites, KubeApi, leaseHolder, OPERATOR_NAMESPACE, type OperatorProcess, startOperatorProcess, tempDir } from './operator-fixtures.ts';

const NS = `/api/v1/namespaces/${OPERATOR_NAMESPACE}`;
const PATHS = {
  lease: `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/${CHART_NAMES.operator}`,
  endpointSlice: `/apis/discovery.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/endpointslices/${CHART_NAMES.operator}`,
  tlsSecret: `${NS}/secrets/${CHART_NAMES.operatorTlsSecret}`,
};

interface Owned {
  metadata: { resourceVersion: string; ownerReferences?: OwnerReference[] };
  data?: Record<string, string>;
}

describe('the operator names its Deployment as the owner of what it creates', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let kubeconfig: string;
  let deploymentUid: string;
  const procs: OperatorProcess[] = [];
  const start = (identity: string, extraArgs: string[]) => {
    const p = startOperatorProcess({
      kubeconfig,
      identity,
      grpcPort: 0,
      logDir: dir.path,
      podIP: '192.0.2.20',
      extraArgs: [`--lease-name=${CHART_NAMES.operator}`, `--push-service=${CHART_NAMES.operator}`, ...extraArgs],
    });
    procs.push(p);
    return p;
  };
  const ownersOf = async (path: string) => (await api.get<Owned>(path)).metadata.ownerReferences ?? [];
  const ownedByDeployment = (owners: OwnerReference[]) => owners.some((o) => o.uid === deploymentUid);

  beforeAll(async () => {
    dir = tempDir('tollgate-owner-references-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    // The chart's Deployment, as an object only: no controller-manager runs it here.
    const deployment = await api.post<{ metadata: { uid: string } }>(`/apis/apps/v1/namespaces/${OPERATOR_NAMESPACE}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: CHART_NAMES.operator },
      spec: {
        selector: { matchLabels: { app: 'tollgate-operator' } },
        template: { metadata: { labels: { app: 'tollgate-operator' } }, spec: { containers: [{ name: 'operator', image: 'ghcr.io/tollgate/tollgate:0.1.0' }] } },
      },
    });
    deploymentUid = deployment.metadata.uid;
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop(5_000)));
    await cp?.stop();
    dir?.remove();
  });

  it('an operator from before owner references leaves the Lease, the EndpointSlice and the TLS Secret without one', async () => {
    const old = start('operator-old', []);
    await eventually('operator-old to lead', async () => (await leaseHolder(api, CHART_NAMES.operator)) === 'operator-old', 60_000);
    await eventually('the push EndpointSlice', () => api.get(PATHS.endpointSlice).catch(() => undefined), 60_000);
    await eventually('the operator TLS Secret', () => api.get(PATHS.tlsSecret).catch(() => undefined));
    for (const path of Object.values(PATHS)) expect(await ownersOf(path), path).toEqual([]);
    await old.stop(10_000);
  });

  it('the next operator, with --owner-deployment, adds its Deployment to each of them and keeps the certificate', async () => {
    const certBefore = (await api.get<Owned>(PATHS.tlsSecret)).data!['tls.crt'];
    start('operator-new', [`--owner-deployment=${CHART_NAMES.operator}`]);
    await eventually('operator-new to lead', async () => (await leaseHolder(api, CHART_NAMES.operator)) === 'operator-new', 60_000);
    for (const [what, path] of Object.entries(PATHS)) {
      const owners = await eventually(`the ${what} to name the Deployment as owner`, async () => {
        const now = await ownersOf(path);
        return ownedByDeployment(now) ? now : undefined;
      });
      // Not a controller reference, and no blockOwnerDeletion (that would need update on deployments/finalizers).
      expect(owners).toEqual([{ apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.operator, uid: deploymentUid }]);
    }
    // Adopting is not rotating: sidecars keep trusting the CA they have.
    expect((await api.get<Owned>(PATHS.tlsSecret)).data!['tls.crt']).toBe(certBefore);
  });

  it('keeps the reference through renewals and writes (a PUT that dropped it would orphan the object)', async () => {
    const lease = await api.get<Owned>(PATHS.lease);
    await eventually('the Lease to be renewed', async () => (await api.get<Owned>(PATHS.lease)).metadata.resourceVersion !== lease.metadata.resourceVersion || undefined);
    expect(ownedByDeployment(await ownersOf(PATHS.lease))).toBe(true);
    expect(ownedByDeployment(await ownersOf(PATHS.endpointSlice))).toBe(true);
  });

  it('every budget ledger object names the owner, and a ledger of an older operator is folded into it and deleted', async () => {
    const asOperator = new KubeApi(loadKubeConfig(kubeconfig));
    const owner: OwnerReference = { apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.operator, uid: deploymentUid };
    // What an operator before ADR 1307 left: one ConfigMap per policy, without an owner.
    const older = { policy: 'shop/older', periods: { '2026-11-01T00:00:00.000Z': { alice: { spent: '7', limitUsed: '7', alerted: 0 } } }, grantsUsed: {}, applied: {} };
    await asOperator.post(`${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'tollgate-budget-0123456789abcdef0123', labels: { [LEDGER_LABEL]: 'true' } },
      data: { 'ledger.json': JSON.stringify(older) },
    });
    const store = new LedgerStore(asOperator, OPERATOR_NAMESPACE, owner);
    const loaded = await store.load();
    expect(loaded.legacy).toBe(true);
    expect(loaded.state.policies.get('shop/older')?.periods.get(Date.parse('2026-11-01T00:00:00.000Z'))?.get('alice')?.spent).toBe(7n);
    loaded.state.charge('shop/newer', Date.parse('2026-11-01T00:00:00.000Z'), 'bob', { amount: 5n, limitPart: 5n, grantParts: [] });
    await store.writePatch(loaded.next, loaded.base, JSON.stringify(loaded.state.takePatch()));
    await store.compact(
      loaded.next,
      loaded.state.chunks(700 * 1024).map((p) => JSON.stringify(p)),
      { base: loaded.base, manifestVersion: loaded.manifestVersion },
    );
    const stored = await api.get<{ items: Array<Owned & { metadata: { name: string } }> }>(`${NS}/configmaps`, { query: { labelSelector: `${LEDGER_LABEL}=true` } });
    expect(stored.items.map((cm) => cm.metadata.name).sort()).toEqual([`tollgate-budget-base-${loaded.next}-0`, 'tollgate-budget-ledger']);
    for (const cm of stored.items) expect(cm.metadata.ownerReferences, cm.metadata.name).toEqual([owner]);
    const again = await store.load();
    expect([...again.state.policies.keys()].sort()).toEqual(['shop/newer', 'shop/older']);
  });
});

function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}
