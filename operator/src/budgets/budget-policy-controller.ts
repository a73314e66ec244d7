// Reconciles one BudgetPolicy: render it into the runtime policy (refused with a field-naming reason when it
// cannot be enforced), hand it to the ledger and to the sidecars its selector picks, and write the status:
// the Ready condition with observedGeneration, the current period, spend, users at or over each threshold
// and the top spenders (bounded), as the cluster ledger holds them. Compares before it writes, and records
// Accepted/Rejected Events only when the Ready condition changes.

import type { Logger } from 'pino';
import { formatUsd, parseUsd } from '../../../contracts/money.ts';
import { periodBounds } from '../../../contracts/budget-period.ts';
import { BUDGET_POLICY, type BudgetPolicy, type BudgetPolicyStatus } from '../../../crds/index.ts';
import { type KubeApi, isStatus, splitKey } from '../../../kube-client/api-client.ts';
import type { EventRecorder, ObjectReference } from '../../../kube-client/event-recorder.ts';
import type { Informer } from '../../../kube-client/informer.ts';
import { rfc3339 } from '../../../kube-client/micro-time.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { type CompiledPolicy, compilePolicy } from '../../../contracts/budget-policies.ts';
import { isGrantActive, percentUsed } from '../../../contracts/budget-grants.ts';
import { findCondition, setCondition } from '../kube/conditions.ts';
import type { ReconcileResult } from '../kube/work-queue.ts';
import type { BudgetDistributor } from './budget-distributor.ts';
import type { ClusterLedger, UserUsage } from './cluster-ledger.ts';
import { renderBudgetPolicy } from './render-budget-policy.ts';

export type CachedBudgetPolicy = BudgetPolicy & { metadata: { name: string; namespace: string } };

export interface BudgetControllerDeps {
  api: KubeApi;
  logger: Logger;
  recorder: EventRecorder;
  budgetPolicies: Informer<CachedBudgetPolicy>;
  ledger: ClusterLedger;
  distributor: BudgetDistributor;
  /** Accepted policies by key; the ledger reads them. */
  compiled: Map<string, CompiledPolicy>;
  now?: () => number;
}

export const TOP_SPENDERS = 10;
/** Status is refreshed at least this often (sidecar counts; the period rolling over). */
const RESYNC_MS = 30_000;

export function budgetPolicyRef(bp: CachedBudgetPolicy): ObjectReference {
  return {
    apiVersion: BUDGET_POLICY.apiVersion,
    kind: BUDGET_POLICY.kind,
    name: bp.metadata.name,
    namespace: bp.metadata.namespace,
    ...(bp.metadata.uid ? { uid: bp.metadata.uid } : {}),
    ...(bp.metadata.resourceVersion ? { resourceVersion: bp.metadata.resourceVersion } : {}),
  };
}

export async function reconcileBudgetPolicy(key: string, deps: BudgetControllerDeps): Promise<ReconcileResult | void> {
  const { logger } = deps;
  const bp = deps.budgetPolicies.get(key);
  if (!bp || bp.metadata.deletionTimestamp) {
    deps.compiled.delete(key);
    deps.distributor.setPolicy(key, undefined);
    await deps.ledger.removePolicy(key);
    return;
  }
  const now = (deps.now ?? Date.now)();
  const generation = bp.metadata.generation;
  let policy: CompiledPolicy | undefined;
  let verdict: { ready: boolean; reason: string; message: string };
  try {
    const config = renderBudgetPolicy(key, bp);
    policy = compilePolicy(config);
    deps.compiled.set(key, policy);
    deps.distributor.setPolicy(key, { config, ...(bp.spec?.selector ? { selector: bp.spec.selector } : {}) });
    verdict = {
      ready: true,
      reason: 'Accepted',
      message: `${config.enforcement === 'block' ? 'limit' : 'alert at'} ${config.limitUsd} USD per user per ${config.period} (${config.timeZone}), enforced by ${deps.distributor.sidecarsFor(key)} sidecars`,
    };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    deps.compiled.delete(key);
    deps.distributor.setPolicy(key, undefined);
    verdict = { ready: false, reason: 'InvalidSpec', message: error.message };
  }

  const before = findCondition(bp.status?.conditions, 'Ready');
  const conditions = setCondition(
    bp.status?.conditions,
    {
      type: 'Ready',
      status: verdict.ready ? 'True' : 'False',
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
      reason: verdict.reason,
      message: verdict.message,
    },
    rfc3339(),
  );
  const status: BudgetPolicyStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
    ...(policy ? summary(policy, deps.ledger.usage(key, now), now) : {}),
    sidecars: deps.distributor.sidecarsFor(key),
  };
  if (stableJson(normalise(bp.status)) !== stableJson(normalise(status))) {
    const { namespace } = splitKey(key);
    try {
      await deps.api.patch(`/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}/namespaces/${namespace}/${BUDGET_POLICY.plural}/${bp.metadata.name}/status`, { status });
    } catch (error) {
      if (isStatus(error, 404)) return;
      throw error;
    }
  }
  const after = findCondition(conditions, 'Ready')!;
  if (!before || before.status !== after.status || before.reason !== after.reason || before.observedGeneration !== after.observedGeneration) {
    if (verdict.ready) logger.info({ budgetPolicy: key, generation }, 'BudgetPolicy accepted');
    else logger.warn({ budgetPolicy: key, generation, reason: verdict.reason, message: verdict.message }, 'BudgetPolicy rejected');
    await deps.recorder.record({
      regarding: budgetPolicyRef(bp),
      type: verdict.ready ? 'Normal' : 'Warning',
      reason: verdict.ready ? 'Accepted' : 'Rejected',
      action: 'Reconcile',
      note: verdict.ready ? `Generation ${generation ?? '?'} accepted: ${verdict.message}` : `Generation ${generation ?? '?'} rejected (${verdict.reason}): ${verdict.message}`,
    });
  }
  if (!policy) return;
  const end = periodBounds(policy.config.period, policy.config.timeZone, now).end;
  return { requeueAfterMs: Math.max(1_000, Math.min(RESYNC_MS, end - now + 1_000)) };
}

/** The status fields the ledger's current period gives. Pure. */
export function summary(policy: CompiledPolicy, usage: UserUsage[], at: number): Partial<BudgetPolicyStatus> {
  const { config, limit } = policy;
  const bounds = periodBounds(config.period, config.timeZone, at);
  let spent = 0n;
  let exhausted = 0;
  const grantsFor = (user: string) => (config.grants ?? []).filter((g) => g.user === user);
  for (const u of usage) {
    spent += u.spent;
    let remaining = limit - u.limitUsed;
    for (const g of grantsFor(u.userId)) {
      const grant = {
        id: g.id,
        amount: parseUsd(g.amountUsd) as bigint,
        used: u.grantsUsed.get(g.id) ?? 0n,
        reason: null,
        createdAt: Date.parse(g.createdAt),
        expiresAt: g.expiresAt ? Date.parse(g.expiresAt) : null,
      };
      if (isGrantActive(grant, at)) remaining += grant.amount - grant.used;
    }
    if (remaining <= 0n) exhausted++;
  }
  const thresholds = config.alertThresholds.map((percent) => ({ percent, users: usage.filter((u) => percentUsed(limit, u.limitUsed) >= percent).length }));
  const top = [...usage].sort((a, b) => (a.spent === b.spent ? (a.userId < b.userId ? -1 : 1) : a.spent > b.spent ? -1 : 1)).slice(0, TOP_SPENDERS);
  return {
    limitUsd: config.limitUsd,
    periodStart: new Date(bounds.start).toISOString(),
    periodEnd: new Date(bounds.end).toISOString(),
    spentUsd: formatUsd(spent),
    users: usage.length,
    usersOverThreshold: thresholds[0]?.users ?? 0,
    usersExhausted: exhausted,
    thresholds,
    topSpenders: top.map((u) => ({
      user: u.userId,
      spentUsd: formatUsd(u.spent),
      percent: Math.min(Number.MAX_SAFE_INTEGER, Math.floor(percentUsed(limit, u.limitUsed) === Infinity ? 0 : percentUsed(limit, u.limitUsed))),
    })),
  };
}

/** JSON with object keys sorted: the API server returns status fields in its own order. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

function normalise(s: BudgetPolicyStatus | undefined): unknown {
  if (!s) return null;
  return { ...s, conditions: (s.conditions ?? []).map((c) => [c.type, c.status, c.observedGeneration ?? null, c.lastTransitionTime, c.reason, c.message]) };
}
