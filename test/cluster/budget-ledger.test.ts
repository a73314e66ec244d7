// The cluster budget ledger at an organisation's size (ADR 1307), against a real API server and as the chart's
// operator ServiceAccount: 100,000 users of one BudgetPolicy in one period are written as patches, read back
// whole by the next leader, and compacted into a base of parts that each fit a ConfigMap; the watermarks of
// pods that are gone are pruned while those of pods that still exist stay.

import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { periodBounds } from '../../contracts/budget-period.ts';
import { compilePolicy, type CompiledPolicy } from '../../contracts/budget-policies.ts';
import type { SpendEntryMessage } from '../../contracts/push-protocol.ts';
import { podExists } from '../../operator/src/budgets/budget-policy-controller.ts';
import { ClusterLedger, type SpendSource } from '../../operator/src/budgets/cluster-ledger.ts';
import { LEDGER_LABEL, LedgerStore, MAX_PART_BYTES } from '../../operator/src/budgets/ledger-store.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureNamespace, installOperatorPrerequisites, KubeApi, OPERATOR_NAMESPACE, tempDir } from './operator-fixtures.ts';

const NS = 'org';
const POLICY: CompiledPolicy = compilePolicy({
  name: `${NS}/everyone`,
  users: ['*'],
  limitUsd: '100',
  period: 'month',
  timeZone: 'UTC',
  alertThresholds: [80],
  enforcement: 'block',
});
const USERS = 100_000;
const PER_REPORT = 200;
const PODS = 50;
const UNITS_PER_CHARGE = 12_345n;

let cp: ControlPlane;
let admin: KubeApi;
let asOperator: KubeApi;
let dir: ReturnType<typeof tempDir>;
const ledgers: ClusterLedger[] = [];

beforeAll(async () => {
  dir = tempDir('tollgate-budget-ledger-test-');
  cp = await startControlPlane();
  admin = new KubeApi(cp.kubeConfig);
  const kc = new KubeConfig();
  kc.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
  asOperator = new KubeApi(kc);
  await ensureNamespace(admin, NS);
});

afterAll(async () => {
  for (const ledger of ledgers) await ledger.stop();
  await cp?.stop();
  dir?.remove();
});

async function clearLedger(): Promise<void> {
  await admin.request('DELETE', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/configmaps`, { query: { labelSelector: `${LEDGER_LABEL}=true` } });
}

/** A leader's ledger as the operator builds it, with acknowledgements recorded per pod. */
function leaderLedger(clock: { now: number }, acks: Map<string, number>): ClusterLedger {
  const ledger = new ClusterLedger({
    store: new LedgerStore(asOperator, OPERATOR_NAMESPACE),
    logger: pino({ level: 'silent' }),
    policy: (key) => (key === POLICY.name ? POLICY : undefined),
    applied: () => undefined,
    acknowledge: (source, sequence) => acks.set(source.podUid, Math.max(acks.get(source.podUid) ?? 0, sequence)),
    written: () => undefined,
    reloaded: () => undefined,
    alert: () => undefined,
    podExists: (namespace, name, uid) => podExists(asOperator, { namespace, name, uid }),
    now: () => clock.now,
  });
  ledgers.push(ledger);
  return ledger;
}

function totalSpent(ledger: ClusterLedger, at: number): { users: number; spent: bigint } {
  let users = 0;
  let spent = 0n;
  for (const u of ledger.usage(POLICY.name, at)) {
    users++;
    spent += u.spent;
  }
  return { users, spent };
}

describe('the API-server budget ledger', () => {
  it('holds 100,000 users of one policy: written as patches, read back whole, compacted into parts that fit a ConfigMap', async () => {
    await clearLedger();
    const clock = { now: Date.now() };
    const periodStart = new Date(periodBounds('month', 'UTC', clock.now).start).toISOString();
    const acks = new Map<string, number>();
    const leader = leaderLedger(clock, acks);
    await leader.load();
    const reportsPerPod = USERS / PER_REPORT / PODS;
    let user = 0;
    for (let pod = 0; pod < PODS; pod++) {
      const source: SpendSource = { podUid: `uid-${pod}`, namespace: NS, pod: `app-${pod}` };
      for (let sequence = 1; sequence <= reportsPerPod; sequence++) {
        const entries: SpendEntryMessage[] = [];
        for (let i = 0; i < PER_REPORT; i++) entries.push({ policy: POLICY.name, userId: `user-${user++}`, periodStart, amount: UNITS_PER_CHARGE.toString(), calls: 1 });
        leader.submit(source, sequence, entries);
      }
    }
    // Every report acknowledged means every report is in a patch the API server holds.
    await waitFor(
      'every report to be written and acknowledged',
      async () => {
        await leader.flush();
        return acks.size === PODS && [...acks.values()].every((seq) => seq === reportsPerPod);
      },
      120_000,
    );
    expect(totalSpent(leader, clock.now)).toEqual({ users: USERS, spent: UNITS_PER_CHARGE * BigInt(USERS) });
    await leader.stop();

    // The next leader reads it back whole, and a report sent again changes nothing.
    const nextAcks = new Map<string, number>();
    const next = leaderLedger(clock, nextAcks);
    await next.load();
    expect(totalSpent(next, clock.now)).toEqual({ users: USERS, spent: UNITS_PER_CHARGE * BigInt(USERS) });
    next.submit({ podUid: 'uid-0', namespace: NS, pod: 'app-0' }, reportsPerPod, [{ policy: POLICY.name, userId: 'user-0', periodStart, amount: '5', calls: 1 }]);
    await next.flush();
    expect(next.userUsage(POLICY.name, 'user-0', clock.now)?.spent).toBe(UNITS_PER_CHARGE);
    expect(nextAcks.get('uid-0')).toBe(reportsPerPod);
    await next.stop();

    // A compaction: the whole ledger as a base of parts, the patches it folds in deleted.
    const store = new LedgerStore(asOperator, OPERATOR_NAMESPACE);
    const loaded = await store.load();
    const parts = loaded.state.chunks(MAX_PART_BYTES).map((p) => JSON.stringify(p));
    expect(parts.length).toBeGreaterThan(1);
    await store.compact(loaded.next - 1, parts, { base: loaded.base, manifestVersion: loaded.manifestVersion });
    const stored = await admin.get<{ items: { metadata: { name: string }; data?: Record<string, string> }[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/configmaps`, {
      query: { labelSelector: `${LEDGER_LABEL}=true` },
    });
    const names = stored.items.map((cm) => cm.metadata.name);
    expect(names.filter((n) => n.startsWith('tollgate-budget-log-'))).toEqual([]);
    expect(names.filter((n) => n.startsWith('tollgate-budget-base-'))).toHaveLength(parts.length);
    for (const cm of stored.items) expect(cm.data?.['ledger.json']?.length ?? 0).toBeLessThan(1024 * 1024);
    const afterCompaction = leaderLedger(clock, new Map());
    await afterCompaction.load();
    expect(totalSpent(afterCompaction, clock.now)).toEqual({ users: USERS, spent: UNITS_PER_CHARGE * BigInt(USERS) });
    await afterCompaction.stop();
  });

  it('prunes the watermarks of pods that are gone, keeps those of pods that exist, and a new leader reads it so', async () => {
    await clearLedger();
    const clock = { now: Date.now() };
    const periodStart = new Date(periodBounds('month', 'UTC', clock.now).start).toISOString();
    const pods: SpendSource[] = [];
    for (const name of ['stays', 'goes']) {
      const pod = await admin.post<{ metadata: { uid: string } }>(`/api/v1/namespaces/${NS}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
      });
      pods.push({ podUid: pod.metadata.uid, namespace: NS, pod: name });
    }
    const acks = new Map<string, number>();
    const leader = leaderLedger(clock, acks);
    await leader.load();
    for (const source of pods) leader.submit(source, 1, [{ policy: POLICY.name, userId: 'alice', periodStart, amount: '100', calls: 1 }]);
    await waitFor('both reports acknowledged', async () => {
      await leader.flush();
      return acks.size === 2;
    });
    await admin.request('DELETE', `/api/v1/namespaces/${NS}/pods/goes`, { query: { gracePeriodSeconds: 0 } });
    await waitFor('the pod to be gone', async () => !(await podExists(admin, { namespace: NS, name: 'goes', uid: pods[1]!.podUid })));

    // Too early: a watermark is only checked once it has not moved for a while.
    await leader.prune();
    await leader.flush();
    expect(await watermarkPods()).toEqual([`${NS}/goes`, `${NS}/stays`]);

    clock.now += 11 * 60_000;
    await leader.prune();
    await leader.flush();
    expect(await watermarkPods()).toEqual([`${NS}/stays`]);
    expect(leader.applied(pods[1]!.podUid)).toBe(0);
    expect(leader.userUsage(POLICY.name, 'alice', clock.now)?.spent).toBe(200n);
    await leader.stop();
  });
});

/** The pods with a watermark in the ledger as the API server holds it. */
async function watermarkPods(): Promise<string[]> {
  const loaded = await new LedgerStore(asOperator, OPERATOR_NAMESPACE).load();
  return [...(loaded.state.policies.get(POLICY.name)?.applied.values() ?? [])].map((w) => w.pod).sort();
}
