// Reconciles one BudgetPolicy: render it into the runtime policy (refused with a field-naming reason when it
// cannot be enforced), hand it to the ledger and to the sidecars its selector picks, and write the status:
// the Ready condition with observedGeneration, the current period, spend, users at or over each threshold
// and the top spenders (bounded), as the cluster ledger holds them. Compares before it writes, and records
// Accepted/Rejected Events only when the Ready condition changes.

import type { Logger } from 'pino';
import { formatUsd, unitsToUsd } from '../../../contracts/money.ts';
import { periodBounds } from '../../../contracts/budget-period.ts';
import { BUDGET_POLICY, type BudgetPolicy, type BudgetPolicyStatus } from '../../../crds/index.ts';
import { isStatus, type KubeApi, objectKey } from '../../../kube-client/api-client.ts';
import type { EventRecorder, ObjectReference } from '../../../kube-client/event-recorder.ts';
import type { Informer } from '../../../kube-client/informer.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { type CompiledPolicy, compilePolicy } from '../../../contracts/budget-policies.ts';
import { percentUsed } from '../../../contracts/budget-grants.ts';
import { objectReference, setReady, type Verdict, verdictEvent, writeStatus } from '../kube/ready-condition.ts';
import { type ReconcileResult, runWorkers, WorkQueue, type Workers } from '../kube/work-queue.ts';
import type { BudgetStreams } from '../push/push-server.ts';
import { BudgetDistributor } from './budget-distributor.ts';
import { type BudgetAlert, ClusterLedger, remainingUnits, type UserUsage } from './cluster-ledger.ts';
import type { LedgerBackend } from './ledger-store.ts';
import { renderBudgetPolicy } from './render-budget-policy.ts';
import type { BudgetPolicyConfig } from '../../../contracts/budget-config.ts';
import { levelOf, refuseSubjectsTaken, subjectOf } from '../../../contracts/budget-subjects.ts';

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
  return objectReference(BUDGET_POLICY, bp);
}

export async function reconcileBudgetPolicy(key: string, deps: BudgetControllerDeps): Promise<ReconcileResult | void> {
  const { logger } = deps;
  const bp = deps.budgetPolicies.get(key);
  if (!bp || bp.metadata.deletionTimestamp) {
    deps.compiled.delete(key);
    deps.distributor.setPolicy(key, undefined);
    deps.ledger.removePolicy(key);
    return;
  }
  const now = (deps.now ?? Date.now)();
  const generation = bp.metadata.generation;
  const { policy, verdict } = enforce(key, bp, deps);
  // The message counts sidecars, which come and go: only status, reason and generation announce a change.
  const ready = setReady(bp.status?.conditions, verdict, { generation, compareMessage: false });
  const status: BudgetPolicyStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions: ready.conditions,
    ...(policy ? { level: levelOf(policy.config), subject: subjectOf(policy.config), ...summary(policy, deps.ledger.usage(key, now), now) } : {}),
    sidecars: deps.distributor.sidecarsFor(key),
  };
  if (stableJson(normalise(bp.status)) !== stableJson(normalise(status)) && !(await writeStatus(deps.api, BUDGET_POLICY, key, status))) return;
  if (ready.changed) {
    if (verdict.ready) logger.info({ budgetPolicy: key, generation }, 'BudgetPolicy accepted');
    else logger.warn({ budgetPolicy: key, generation, reason: verdict.reason, message: verdict.message }, 'BudgetPolicy rejected');
    await deps.recorder.record(verdictEvent(budgetPolicyRef(bp), verdict, generation));
  }
  // A conflict clears when the older policy goes, which queues only that one: look again.
  if (!policy) return verdict.reason === 'SubjectConflict' ? { requeueAfterMs: RESYNC_MS } : undefined;
  const end = periodBounds(policy.config.period, policy.config.timeZone, now).end;
  return { requeueAfterMs: Math.max(1_000, Math.min(RESYNC_MS, end - now + 1_000)) };
}

/** Compiles the policy and hands it to the ledger and the sidecars; a spec that cannot be enforced withdraws it. */
function enforce(key: string, bp: CachedBudgetPolicy, deps: BudgetControllerDeps): { policy: CompiledPolicy | undefined; verdict: Verdict } {
  let config: BudgetPolicyConfig;
  try {
    config = renderBudgetPolicy(key, bp);
  } catch (error) {
    return refused(key, error, 'InvalidSpec', deps);
  }
  try {
    refuseSubjectsTaken(olderSiblings(bp, deps), config, 'spec');
  } catch (error) {
    return refused(key, error, 'SubjectConflict', deps);
  }
  const policy = compilePolicy(config);
  deps.compiled.set(key, policy);
  deps.distributor.setPolicy(key, { config, ...(bp.spec?.selector ? { selector: bp.spec.selector } : {}) });
  const per = levelOf(config) === 'User' ? 'per user' : `for ${subjectOf(config)}`;
  const message = `${config.enforcement === 'block' ? 'limit' : 'alert at'} ${config.limitUsd} USD ${per} per ${config.period} (${config.timeZone}), enforced by ${deps.distributor.sidecarsFor(key)} sidecars`;
  return { policy, verdict: { ready: true, reason: 'Accepted', message } };
}

/** A spec that cannot be enforced withdraws the policy; `reason` is the Ready condition's. */
function refused(key: string, error: unknown, reason: string, deps: BudgetControllerDeps): { policy: undefined; verdict: Verdict } {
  if (!(error instanceof ConfigError)) throw error;
  deps.compiled.delete(key);
  deps.distributor.setPolicy(key, undefined);
  return { policy: undefined, verdict: { ready: false, reason, message: error.message } };
}

/**
 * ADR 1312: the policies of the namespace created before this one for the same pods (an equal selector), which
 * keep what they name; later policies with different selectors may overlap, and there the older still wins.
 */
function olderSiblings(bp: CachedBudgetPolicy, deps: BudgetControllerDeps): { name: string; subjects: BudgetPolicyConfig }[] {
  const order = (p: CachedBudgetPolicy) => `${p.metadata.creationTimestamp ?? ''}\u0000${p.metadata.name}`;
  const selector = JSON.stringify(bp.spec?.selector ?? {});
  const out: { name: string; subjects: BudgetPolicyConfig }[] = [];
  for (const other of deps.budgetPolicies.list(bp.metadata.namespace)) {
    if (order(other) >= order(bp) || other.metadata.deletionTimestamp || JSON.stringify(other.spec?.selector ?? {}) !== selector) continue;
    try {
      out.push({ name: other.metadata.name, subjects: renderBudgetPolicy(objectKey(other), other) });
    } catch {
      // An older policy that is itself refused names nothing.
    }
  }
  return out;
}

/** Spenders in order: most spent first, then by user id. */
const bySpend = (a: UserUsage, b: UserUsage): number => (a.spent === b.spent ? (a.userId < b.userId ? -1 : 1) : a.spent > b.spent ? -1 : 1);

/** The status fields the ledger's current period gives, in one pass over its users (100,000 of them, ADR 1307). Pure. */
export function summary(policy: CompiledPolicy, usage: Iterable<UserUsage>, at: number): Partial<BudgetPolicyStatus> {
  const { config, limit } = policy;
  const bounds = periodBounds(config.period, config.timeZone, at);
  let spent = 0n;
  let exhausted = 0;
  let users = 0;
  const thresholds = config.alertThresholds.map((percent) => ({ percent, users: 0 }));
  const top: UserUsage[] = [];
  for (const u of usage) {
    users++;
    spent += u.spent;
    if (remainingUnits(policy, u, at) <= 0n) exhausted++;
    const percent = percentUsed(limit, u.limitUsed);
    for (const t of thresholds) if (percent >= t.percent) t.users++;
    if (top.length < TOP_SPENDERS || bySpend(u, top.at(-1)!) < 0) {
      top.push(u);
      top.sort(bySpend);
      if (top.length > TOP_SPENDERS) top.pop();
    }
  }
  return {
    limitUsd: config.limitUsd,
    periodStart: new Date(bounds.start).toISOString(),
    periodEnd: new Date(bounds.end).toISOString(),
    spentUsd: formatUsd(spent),
    users,
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

/** How soon a changed ledger, or a sidecar come or gone, shows in a policy's status. */
const STATUS_DELAY_MS = 1_000;

type ControllerContext = Pick<BudgetControllerDeps, 'api' | 'logger' | 'recorder' | 'budgetPolicies'>;

/**
 * The BudgetPolicy controller while this replica leads (ADR 1302): its queue and worker, the cluster ledger in
 * ConfigMaps of the operator's namespace (this leader its only writer) and the distributor that sends each
 * sidecar the policies and usage it enforces.
 */
export class BudgetPolicyController {
  readonly queue = new WorkQueue();
  readonly ledger: ClusterLedger;
  readonly #context: ControllerContext;
  readonly #compiled = new Map<string, CompiledPolicy>();
  #distributor: BudgetDistributor | undefined;
  #workers: Workers | undefined;

  constructor(context: ControllerContext, store: LedgerBackend) {
    this.#context = context;
    const logger = context.logger.child({ component: 'budgets' });
    this.ledger = new ClusterLedger({
      store,
      logger,
      policy: (key) => this.#compiled.get(key),
      acknowledge: (source, sequence) => this.#distributor?.acknowledge(source.podUid, sequence),
      applied: (result) => this.#distributor?.applied(result),
      written: (policies) => {
        for (const key of policies) this.queue.addAfter(key, STATUS_DELAY_MS);
      },
      reloaded: () => this.#distributor?.resync(),
      alert: (alert) => announceAlert(alert, context),
      podExists: (namespace, name, uid) => podExists(context.api, { namespace, name, uid }),
      connectedPods: () => this.#distributor?.connectedPods() ?? new Set(),
    });
  }

  /** The controller's watch, registered once on the informer: a BudgetPolicy event queues it on whichever controller leads now. */
  static watch(budgetPolicies: Informer<CachedBudgetPolicy>, current: () => BudgetPolicyController | undefined): void {
    const enqueue = (bp: CachedBudgetPolicy) => current()?.queue.add(objectKey(bp));
    // Not on the operator's own status patches (controller-runtime's GenerationChangedPredicate): each would
    // reconcile and patch the status again while spend changes, a loop bounded only by how fast reconciles run.
    // Spend reaches the status through the ledger's writes, at most once a second per policy.
    const changed = (bp: CachedBudgetPolicy, old: CachedBudgetPolicy) => {
      const { metadata } = bp;
      if (
        bp === old || // the informer's periodic resync
        metadata.generation !== old.metadata.generation ||
        metadata.uid !== old.metadata.uid || // deleted and created again while the watch was away
        metadata.deletionTimestamp !== old.metadata.deletionTimestamp ||
        bp.status?.observedGeneration !== metadata.generation // a status someone else removed or rewrote
      ) {
        enqueue(bp);
      }
    };
    budgetPolicies.on({ add: enqueue, update: changed, delete: enqueue });
  }

  /** Reads the ledger back; the sidecars' streams are served only after. */
  async load(): Promise<void> {
    await this.ledger.load();
    this.#distributor = new BudgetDistributor({
      ledger: this.ledger,
      logger: this.#context.logger.child({ component: 'budgets' }),
      compiled: (key) => this.#compiled.get(key),
    });
  }

  /** Starts the worker and queues every policy, and every ledger whose policy is gone (its reconcile deletes it). */
  start(): void {
    const deps: BudgetControllerDeps = { ...this.#context, ledger: this.ledger, distributor: this.#loaded(), compiled: this.#compiled };
    this.#workers = runWorkers(
      this.queue,
      1,
      (key) => reconcileBudgetPolicy(key, deps),
      (key, error, retryInMs) =>
        this.#context.logger.warn({ budgetPolicy: key, err: error instanceof Error ? error.message : String(error), retryInMs }, 'reconcile failed; retrying'),
    );
    for (const key of new Set([...this.#context.budgetPolicies.list().map((bp) => objectKey(bp)), ...this.ledger.policies()])) this.queue.add(key);
  }

  /** What the push server tells the budgets about sidecar streams. */
  streams(): BudgetStreams {
    const distributor = this.#loaded();
    const refresh = (namespace: string) => {
      for (const key of distributor.policiesIn(namespace)) this.queue.addAfter(key, STATUS_DELAY_MS);
    };
    return {
      connected: (sidecar) => {
        distributor.connect(sidecar);
        refresh(sidecar.namespace);
      },
      disconnected: (id) => {
        const namespace = distributor.disconnect(id);
        if (namespace !== undefined) refresh(namespace);
      },
      spendReport: (source, report) => this.ledger.submit(source, Number(report.sequence), report.entries ?? []),
    };
  }

  async stop(): Promise<void> {
    await this.#workers?.stop();
    // What was queued and not written stays unacknowledged on the sidecars' disks; the next leader gets it.
    await this.ledger.stop();
  }

  #loaded(): BudgetDistributor {
    if (!this.#distributor) throw new Error('the budget ledger is not loaded yet');
    return this.#distributor;
  }
}

/** A user crossed an alert threshold: the stable `budget alert` log line and a Warning Event on the policy. */
function announceAlert(alert: BudgetAlert, context: ControllerContext): void {
  const note = `User ${alert.userId} reached ${alert.threshold}% of the budget: ${formatUsd(alert.limitUsed)} of ${formatUsd(alert.limit)} USD in the period from ${new Date(alert.periodStart).toISOString()}`;
  context.logger.warn(
    {
      budgetPolicy: alert.policy,
      user_id: alert.userId,
      policy: alert.policy,
      threshold: alert.threshold,
      spent_usd: unitsToUsd(alert.spent),
      limit_usd: unitsToUsd(alert.limit),
      period_start: new Date(alert.periodStart).toISOString(),
    },
    `budget alert: ${note}`,
  );
  const bp = context.budgetPolicies.get(alert.policy);
  if (bp) void context.recorder.record({ regarding: budgetPolicyRef(bp), type: 'Warning', reason: 'BudgetThresholdReached', action: 'Charge', note });
}

/** Whether the pod still exists as the same pod (a new pod of the same name has another UID). */
export async function podExists(api: KubeApi, pod: { namespace: string; name: string; uid: string }): Promise<boolean> {
  try {
    const found = await api.get<{ metadata?: { uid?: string } }>(`/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`);
    return found.metadata?.uid === pod.uid;
  } catch (error) {
    if (isStatus(error, 404)) return false;
    throw error;
  }
}
