// What the kind suite's upgrade and rollback steps need (ADR 0113): callers that keep a steady stream of
// metered calls going from inside the app's pods while the release changes under them, what each sidecar's
// span store says a user spent, what the cluster ledger says, and who leads.

import { stringify } from 'yaml';
import { inPatchLayout, LEDGER_LABEL, type LedgerConfigMap, MANIFEST_NAME, readLedger } from '../../operator/src/budgets/ledger-store.ts';
import type { KindCluster } from './kind-cluster.ts';
import { APP_NAMESPACE, startInApp } from './tollgate-fixtures.ts';
import { NAMESPACE } from './tollgate-install.ts';

export interface SteadyResult {
  pod: string;
  total: number;
  statuses: Record<string, number>;
  failures: Array<{ n: number; status: string; body: string }>;
  elapsedMs: number;
}

export interface SteadyCalls {
  /** Closes the callers' stdin; each finishes its call in flight and reports. */
  stop(): Promise<SteadyResult[]>;
}

/** One caller per pod (`client.ts steady`), each sending a call every `intervalMs` as `user`. */
export function startSteadyCalls(node: KindCluster, pods: string[], user: string, intervalMs: number, namespace = APP_NAMESPACE): SteadyCalls {
  const callers = pods.map((pod) => ({ pod, caller: startInApp<Omit<SteadyResult, 'pod'>>(node, pod, ['steady', String(intervalMs), user], namespace) }));
  return {
    stop() {
      return Promise.all(callers.map(async ({ pod, caller }) => ({ pod, ...(await caller.stop()) })));
    },
  };
}

/** The app's pods, Running and not being deleted, by name. */
export async function runningAppPods(node: KindCluster): Promise<Array<{ name: string; sidecarImage: string | undefined }>> {
  const r = await node.kubectl(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat', '-o', 'json']);
  const pods = (
    JSON.parse(r.stdout) as {
      items: Array<{ metadata: { name: string; deletionTimestamp?: string }; spec: { initContainers?: Array<{ name: string; image: string }> }; status: { phase: string } }>;
    }
  ).items;
  return pods
    .filter((p) => p.status.phase === 'Running' && !p.metadata.deletionTimestamp)
    .map((p) => ({ name: p.metadata.name, sidecarImage: p.spec.initContainers?.find((c) => c.name === 'tollgate-proxy')?.image }));
}

/** Runs client.ts in the app container of one pod and parses its one JSON line. */
export async function appClientIn<T>(node: KindCluster, pod: string, args: string[], namespace = APP_NAMESPACE): Promise<T> {
  const r = await node.kubectl(['exec', '-n', namespace, pod, '-c', 'app', '--', 'node', 'test/kind/in-pod/client.ts', ...args]);
  if (r.code !== 0) throw new Error(`client ${args.join(' ')} in ${pod} failed (${r.code}): ${r.stderr}${r.stdout}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as T;
}

export interface SpendRow {
  key: string | null;
  calls: number;
  cost_usd: number;
}

/** Calls and cost per user in one sidecar's span store. */
export async function spendIn(node: KindCluster, pod: string): Promise<SpendRow[]> {
  return (await appClientIn<{ rows: SpendRow[] }>(node, pod, ['spend'])).rows;
}

/** What the sidecars' span stores hold for `user`, over every pod: the calls metered and their cost. */
export async function spansOf(node: KindCluster, pods: string[], user: string): Promise<{ calls: number; costUsd: number }> {
  const rows = (await Promise.all(pods.map((pod) => spendIn(node, pod)))).flat().filter((r) => r.key === user);
  return { calls: rows.reduce((n, r) => n + r.calls, 0), costUsd: rows.reduce((n, r) => n + r.cost_usd, 0) };
}

/**
 * What the cluster ledger holds as `user`'s spend under `policy` in the latest period, in USD, read as the
 * leading operator reads it: this release's patches on a compacted base (ADR 1307), or, for the previous
 * release, only its one ConfigMap per policy (ADR 1302; it does not read the newer layout).
 */
export async function ledgerSpentUsd(node: KindCluster, policy: string, user: string, readBy: 'this release' | 'the previous release'): Promise<number> {
  const r = await node.kubectl(['get', 'configmaps', '-n', NAMESPACE, '-l', `${LEDGER_LABEL}=true`, '-o', 'json']);
  if (r.code !== 0) return 0;
  const all = (JSON.parse(r.stdout) as { items: LedgerConfigMap[] }).items;
  const items = readBy === 'this release' ? all : all.filter((cm) => !inPatchLayout(cm.metadata.name));
  const { state } = readLedger(
    items.find((cm) => cm.metadata.name === MANIFEST_NAME),
    items,
  );
  const periods = state.policies.get(policy)?.periods;
  const latest = periods ? Math.max(...periods.keys()) : undefined;
  const spent = latest === undefined ? undefined : periods?.get(latest)?.get(user)?.spent;
  // Ledger units of 10⁻¹⁰ USD (money.ts); a double holds this test's sums exactly enough.
  return spent === undefined ? 0 : Number(spent) / 1e10;
}

/** One call as `user` from `pod`, and the cost of its span (undefined unless the call succeeded). */
export async function costOfNextCallIn(node: KindCluster, pod: string, user = 'node-test'): Promise<number | undefined> {
  const call = await appClientIn<{ status: number; headers: Record<string, string> }>(node, pod, ['call', 'gpt-4o-mini', user]);
  if (call.status !== 200) return undefined;
  const traces = await appClientIn<{ body: { spans: Array<{ span_id: string; cost_usd: number }> } }>(node, pod, ['traces', '20']);
  return traces.body.spans.find((s) => s.span_id === call.headers['x-proxy-span-id'])?.cost_usd;
}

/** The Lease holder and the image of the operator pod that holds it. */
export async function operatorLeader(node: KindCluster): Promise<{ holder: string; image: string | undefined }> {
  const holder = (await node.kubectl(['get', 'lease', '-n', NAMESPACE, 'tollgate-operator', '-o', 'jsonpath={.spec.holderIdentity}'])).stdout.trim();
  const image = holder ? (await node.kubectl(['get', 'pod', '-n', NAMESPACE, holder, '-o', 'jsonpath={.spec.containers[0].image}'])).stdout.trim() : '';
  return { holder, image: image || undefined };
}

/** A blocking budget for one user, small enough to spend in a few calls. */
export function cappedPolicyManifest(user: string, limitUsd: string): string {
  return stringify({
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'BudgetPolicy',
    metadata: { name: 'capped', namespace: APP_NAMESPACE },
    spec: { users: [user], limitUsd, period: 'month', enforcement: 'block', alertThresholds: [100] },
  });
}
