// The short version of bench/control-plane-scale.ts (issue 28): 200 simulated sidecars (sidecar-fleet.ts), each
// with its own TLS stream and a real bound token of a real Pod, on two operator replicas. Correctness only, no
// timing: every sidecar acknowledges a price change, and with a BudgetPolicy over all of them, spend reported
// before, during and after a kill -9 of the leader ends up in the ledger exactly once (nothing lost, nothing
// counted twice), every charge acknowledged.

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { periodBounds } from '../../contracts/budget-period.ts';
import { BUDGET_POLICY, type BudgetPolicy, PROXY_CONFIG } from '../../crds/index.ts';
import { LedgerStore } from '../../operator/src/budgets/ledger-store.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { waitFor } from '../support/wait-for.ts';
import {
  ensureNamespace,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  startOperatorProcess,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';
import { createFleetPod, fleetBudgetPolicyYaml, type FleetPod, SidecarFleet } from './sidecar-fleet.ts';

const NS = 'fleet';
const SIDECARS = 200;
const POLICY = `${NS}/everyone`;
/** Short leases so the failover takes seconds. */
const LEASE_FLAGS = ['--lease-duration=4', '--renew-deadline=3', '--retry-period=1'];

let cp: ControlPlane;
let api: KubeApi;
let dir: ReturnType<typeof tempDir>;
let fleet: SidecarFleet | undefined;
const operators: OperatorProcess[] = [];

const proxyConfigYaml = (inputPerMillion: number) => `apiVersion: ${PROXY_CONFIG.apiVersion}
kind: ${PROXY_CONFIG.kind}
metadata: { name: default, namespace: ${NS} }
spec:
  pricing:
    models:
      - { provider: openai, model: gpt-4o-mini, input_per_million: ${inputPerMillion}, output_per_million: 0.6 }
`;

async function apply(yaml: string): Promise<void> {
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: yaml });
  expect(applied.code, applied.stderr).toBe(0);
}

function totals(): { charged: bigint; acknowledged: bigint } {
  let charged = 0n;
  let acknowledged = 0n;
  for (const s of fleet!.sidecars) {
    charged += s.charged;
    acknowledged += s.acknowledged;
  }
  return { charged, acknowledged };
}

beforeAll(async () => {
  dir = tempDir('tollgate-sidecar-fleet-test-');
  cp = await startControlPlane();
  api = new KubeApi(cp.kubeConfig);
  const kubeconfig = await installOperatorPrerequisites(cp, dir.path);
  const grpcPort = await freePort();
  const start = (identity: string) => operators.push(startOperatorProcess({ kubeconfig, identity, grpcPort, logDir: dir.path, extraArgs: LEASE_FLAGS }));
  start('operator-a');
  await waitFor('operator-a to lead', async () => (await leaseHolder(api)) === 'operator-a', 60_000);
  start('operator-b');
  await ensureNamespace(api, NS);
  await api.post(`/api/v1/namespaces/${NS}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'app' } });
  await apply(proxyConfigYaml(0.15));
  const caPem = readFileSync(await operatorCaFile(api, dir.path), 'utf8');
  const pods: FleetPod[] = [];
  for (let i = 0; i < SIDECARS; i += 20) pods.push(...(await Promise.all(Array.from({ length: 20 }, (_, k) => createFleetPod(api, NS, i + k)))));
  fleet = new SidecarFleet({ address: `127.0.0.1:${grpcPort}`, caPem, reconnect: { baseMs: 200, maxMs: 2_000 } });
  fleet.add(pods);
});

afterAll(async () => {
  fleet?.stop();
  await Promise.all(operators.map((o) => o.stop(2_000)));
  await cp?.stop();
  dir?.remove();
});

describe(`${SIDECARS} sidecars on one operator`, () => {
  it('every sidecar connects and acknowledges a price change', async () => {
    await waitFor('every sidecar to have its first snapshot', () => fleet!.sidecars.every((s) => s.connected), 120_000);
    const before = fleet!.sidecars.map((s) => new Set(s.acked.keys()));
    await apply(proxyConfigYaml(0.2));
    const versions = await waitFor(
      'every sidecar to acknowledge the new snapshot',
      () => {
        const fresh = fleet!.sidecars.map((s, i) => [...s.acked.keys()].filter((v) => !before[i]!.has(v)));
        return fresh.every((v) => v.length > 0) ? new Set(fresh.flat()) : undefined;
      },
      120_000,
    );
    // One new version, the same everywhere.
    expect(versions.size).toBe(1);
    expect(fleet!.sidecars.filter((s) => s.failures.has('UNAUTHENTICATED'))).toEqual([]);
  });

  it('spend reported across a kill -9 of the leader is in the ledger exactly once, every charge acknowledged', async () => {
    await apply(fleetBudgetPolicyYaml(NS, '1000'));
    const path = `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${NS}/${BUDGET_POLICY.plural}/everyone`;
    await waitFor('the BudgetPolicy to be Ready', async () => (await api.get<BudgetPolicy>(path)).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 60_000);
    const periodStart = new Date(periodBounds('month', 'UTC', Date.now()).start).toISOString();
    fleet!.startSpend({ policy: POLICY, users: 2_000, replicas: 10, usersPerTick: 1, units: 1_000_000n, firstIndex: 0, fleetSize: SIDECARS }, periodStart);
    await waitFor('spend to be acknowledged by the first leader', () => totals().acknowledged > 0n, 60_000);

    const leader = operators.find((o) => o.identity === 'operator-a')!;
    const streamsBefore = fleet!.sidecars.map((s) => s.streams);
    leader.kill();
    await waitFor('operator-b to lead', async () => (await leaseHolder(api)) === 'operator-b', 60_000);
    await waitFor('every sidecar back, on a new stream, with a snapshot', () => fleet!.sidecars.every((s, i) => s.streams > streamsBefore[i]! && s.connected), 120_000);
    const acknowledgedAtFailover = totals().acknowledged;
    await waitFor('spend to be acknowledged by the new leader', () => totals().acknowledged > acknowledgedAtFailover, 60_000);
    fleet!.stopSpend();
    await waitFor('every charge acknowledged', () => fleet!.sidecars.every((s) => s.outstanding === 0n), 120_000);

    const { charged } = totals();
    expect(charged).toBeGreaterThan(0n);
    // The ledger as the API server holds it: every acknowledgement follows a written patch.
    const loaded = await new LedgerStore(api, OPERATOR_NAMESPACE).load();
    const users = loaded.state.policies.get(POLICY)?.periods.get(Date.parse(periodStart)) ?? new Map();
    let spent = 0n;
    for (const usage of users.values()) spent += usage.spent;
    expect(spent).toBe(charged);
    // And every pod's watermark is there: a report resent now would change nothing.
    expect(loaded.state.policies.get(POLICY)?.applied.size).toBe(SIDECARS);
  });
});
