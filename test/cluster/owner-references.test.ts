// What the operator creates at run time names its Deployment as owner (ADR 0807), so `helm uninstall` (which
// deletes the Deployment) lets the garbage collector delete it; all but the budget ledger, which outlives the
// release (ADR 0811). There is no kube-controller-manager here, so no garbage collector: this test checks the
// references themselves, against a real kube-apiserver and with the chart's RBAC; the kind test (test/kind)
// checks that the objects are gone after an uninstall and that the ledger is not.
//
// The API server runs the OwnerReferencesPermissionEnforcement admission plugin, which some clusters enable:
// only who may delete an object may set its owner references (ADR 0810). The chart's Roles grant that.
//
// The upgrade path first: an operator without --owner-deployment (as before ADR 0807) creates the Lease, the
// push EndpointSlice, the TLS Secret and the CA ConfigMap; the next operator, with the flag, adds the reference
// to each of them without replacing what they hold.

import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_LABEL, LedgerStore } from '../../operator/src/budgets/ledger-store.ts';
import type { OwnerReference } from '../../kube-client/owner-reference.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { CHART_NAMES } from './chart-rbac.ts';
import {
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  OPERATOR_NAMESPACE,
  type OperatorProcess,
  postOperatorDeployment,
  startOperatorProcess,
  tempDir,
} from './operator-fixtures.ts';

const NS = `/api/v1/namespaces/${OPERATOR_NAMESPACE}`;
const PATHS = {
  lease: `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/${CHART_NAMES.operator}`,
  endpointSlice: `/apis/discovery.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/endpointslices/${CHART_NAMES.operator}`,
  tlsSecret: `${NS}/secrets/${CHART_NAMES.operatorTlsSecret}`,
  caConfigMap: `${NS}/configmaps/${CHART_NAMES.operatorCaConfigMap}`,
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
    cp = await startControlPlane({ admissionPlugins: ['OwnerReferencesPermissionEnforcement'] });
    api = new KubeApi(cp.kubeConfig);
    kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    deploymentUid = await postOperatorDeployment(api);
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop(5_000)));
    await cp?.stop();
    dir?.remove();
  });

  it('the admission plugin is on: a client that may not delete an object may not name its owner', async () => {
    // The control: a Role with every ConfigMap verb but delete. Without the plugin this create would pass.
    await cp.kubectl(['create', 'role', 'no-delete', '-n', OPERATOR_NAMESPACE, '--verb=get,create,update', '--resource=configmaps']);
    await cp.kubectl(['create', 'rolebinding', 'no-delete', '-n', OPERATOR_NAMESPACE, '--role=no-delete', '--user=no-delete']);
    const limited = new KubeApi(await cp.userKubeConfig('no-delete'));
    // The plugin lets anyone name an owner on create (they could have not created it at all); changing the
    // owners of an existing object, as an upgrade's first write does, needs delete on it.
    const created = await limited.post<{ metadata: Record<string, unknown> }>(`${NS}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' } });
    const owners = [{ apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.operator, uid: deploymentUid }];
    const refused = await limited.put(`${NS}/configmaps/owned`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...created.metadata, ownerReferences: owners } }).then(
      () => undefined,
      (error: unknown) => error as { statusCode?: number; message: string },
    );
    expect(refused?.statusCode).toBe(403);
    expect(refused?.message).toMatch(/cannot set an ownerRef on a resource you can't delete/);
  });

  it('an operator from before owner references leaves the Lease, the EndpointSlice, the TLS Secret and the CA ConfigMap without one', async () => {
    const old = start('operator-old', []);
    await eventually('operator-old to lead', async () => (await leaseHolder(api, CHART_NAMES.operator)) === 'operator-old', 60_000);
    await eventually('the push EndpointSlice', () => api.get(PATHS.endpointSlice).catch(() => undefined), 60_000);
    await eventually('the operator TLS Secret', () => api.get(PATHS.tlsSecret).catch(() => undefined));
    await eventually('the operator CA ConfigMap', () => api.get(PATHS.caConfigMap).catch(() => undefined));
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

  it('budget ledger objects name no owner, and the ledger of an older release that owned it is released, folded in and kept for a rollback', async () => {
    const asOperator = new KubeApi(loadKubeConfig(kubeconfig));
    const owner: OwnerReference = { apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.operator, uid: deploymentUid };
    // What an operator before ADR 1307 and ADR 0811 left: one ConfigMap per policy, owned by the operator's
    // Deployment (a reinstall's, so another UID).
    const older = { policy: 'shop/older', periods: { '2026-11-01T00:00:00.000Z': { alice: { spent: '7', limitUsed: '7', alerted: 0 } } }, grantsUsed: {}, applied: {} };
    const olderName = 'tollgate-budget-0123456789abcdef0123';
    await asOperator.post(`${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: olderName, labels: { [LEDGER_LABEL]: 'true' }, ownerReferences: [{ ...owner, uid: '5f0c2ad4-0000-4000-8000-000000000001' }] },
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
    expect(stored.items.map((cm) => cm.metadata.name).sort()).toEqual([olderName, `tollgate-budget-base-${loaded.next}-0`, 'tollgate-budget-ledger']);
    for (const cm of stored.items) expect(cm.metadata.ownerReferences ?? [], cm.metadata.name).toEqual([]);
    const again = await store.load();
    expect([...again.state.policies.keys()].sort()).toEqual(['shop/newer', 'shop/older']);
  });
});

function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}
