// One user's budget in the current period: the policy's limit, the grants that add to it, and what was spent.
// Spend is absorbed by active grants first, the one expiring soonest first (grants that never expire last,
// older grants before newer at equal expiry), then by the period's limit, which may be overshot (ADR 1300).
// A new period starts from zero spend; grants carry over until they expire.
//
// Amounts are ledger units (contracts/money.ts). The request path reads only `exhausted` and two numbers;
// everything that needs bigint arithmetic runs when spend, grants, the policy or the period change.

import { type Grant, grantOrder, isGrantActive, type ChargeSplit, type PeriodUsage, percentUsed } from '../../../contracts/budget-grants.ts';
import { type PeriodBounds, periodBounds } from '../../../contracts/budget-period.ts';
import type { CompiledPolicy } from '../../../contracts/budget-policies.ts';
import { addSpend, formatUsd, unitsToUsd } from '../../../contracts/money.ts';

export type { ChargeSplit, Grant, PeriodUsage } from '../../../contracts/budget-grants.ts';

export type BudgetStateName = 'ok' | 'warning' | 'exhausted';

export class BudgetRecord {
  readonly userId: string;
  policy: CompiledPolicy;
  periodStart: number;
  periodEnd: number;
  spent: bigint;
  limitUsed: bigint;
  alerted: number;
  grants: Grant[];
  /** Cached verdict for the request path; refreshed by `refresh()` after every change. */
  exhausted = false;
  /** When the cached verdict may change by itself: the next grant expiry or the period's end. */
  recheckAt = 0;
  /** Used since the book last looked for a record to drop (BudgetBook's second-chance eviction). */
  touched = true;

  constructor(init: { userId: string; policy: CompiledPolicy; bounds: PeriodBounds; usage: PeriodUsage; grants: Grant[] }, at: number) {
    const { userId, policy, bounds, usage, grants } = init;
    this.userId = userId;
    this.policy = policy;
    this.periodStart = bounds.start;
    this.periodEnd = bounds.end;
    this.spent = usage.spent;
    this.limitUsed = usage.limitUsed;
    this.alerted = usage.alerted;
    this.grants = grants;
    this.refresh(at);
  }

  /** Limit left plus what active grants have left; negative after an overshoot. */
  remaining(at: number): bigint {
    let left = this.policy.limit - this.limitUsed;
    for (const grant of this.grants) if (isGrantActive(grant, at)) left += grant.amount - grant.used;
    return left;
  }

  /** Sum of the amounts of active grants. */
  granted(at: number): bigint {
    let sum = 0n;
    for (const grant of this.grants) if (isGrantActive(grant, at)) sum += grant.amount;
    return sum;
  }

  /** Budget used ÷ budget (the limit plus active grants); an exhausted budget is at least 1. */
  utilization(at: number): number {
    const total = this.policy.limit + this.granted(at);
    const left = this.remaining(at);
    const ratio = total > 0n ? Number(total - left) / Number(total) : left <= 0n ? 1 : 0;
    return left <= 0n ? Math.max(ratio, 1) : ratio;
  }

  state(at: number): BudgetStateName {
    if (this.remaining(at) <= 0n) return 'exhausted';
    const lowest = this.policy.config.alertThresholds[0];
    if (lowest !== undefined && percentUsed(this.policy.limit, this.limitUsed) >= lowest) return 'warning';
    return 'ok';
  }

  /** Recomputes the cached verdict; call after any change and whenever `at >= recheckAt`. */
  refresh(at: number): void {
    this.exhausted = this.remaining(at) <= 0n;
    let next = this.periodEnd;
    for (const grant of this.grants) {
      if (grant.createdAt > at && grant.createdAt < next) next = grant.createdAt;
      if (grant.expiresAt !== null && grant.expiresAt > at && grant.expiresAt < next) next = grant.expiresAt;
    }
    this.recheckAt = next;
  }

  /** Moves to the period containing `at` when the current one has ended: spend restarts at zero, grants carry. */
  roll(at: number): boolean {
    if (at < this.periodEnd) return false;
    const bounds = periodBounds(this.policy.config.period, this.policy.config.timeZone, at);
    this.periodStart = bounds.start;
    this.periodEnd = bounds.end;
    this.spent = 0n;
    this.limitUsed = 0n;
    this.alerted = 0;
    this.grants = this.grants.filter((g) => g.expiresAt === null || g.expiresAt > at);
    this.refresh(at);
    return true;
  }

  /** Applies a split computed by splitCharge (here or by another process) to this record. */
  apply(split: ChargeSplit, at: number): void {
    this.spent = addSpend(this.spent, split.amount);
    this.limitUsed = addSpend(this.limitUsed, split.limitPart);
    for (const part of split.grantParts) {
      const grant = this.grants.find((g) => g.id === part.grantId);
      if (grant) grant.used = addSpend(grant.used, part.amount);
      // A grant unknown here (removed from its policy meanwhile) still counted as spend.
      else this.limitUsed = addSpend(this.limitUsed, part.amount);
    }
    this.refresh(at);
  }

  /** The management API's view: `GET /_local/api/budgets/{user}`. */
  toJson(at: number): BudgetJson {
    const active = this.grants.filter((g) => g.expiresAt === null || g.expiresAt > at).sort(grantOrder);
    return {
      user_id: this.userId,
      policy: this.policy.name,
      period: this.policy.config.period,
      period_start: new Date(this.periodStart).toISOString(),
      period_end: new Date(this.periodEnd).toISOString(),
      limit_usd: unitsToUsd(this.policy.limit),
      granted_usd: unitsToUsd(this.granted(at)),
      spent_usd: unitsToUsd(this.spent),
      remaining_usd: unitsToUsd(this.remaining(at)),
      spent_usd_exact: formatUsd(this.spent),
      state: this.state(at),
      enforcement: this.policy.config.enforcement,
      grants: active.map((g) => ({
        id: g.id,
        amount_usd: unitsToUsd(g.amount),
        remaining_usd: unitsToUsd(g.amount - g.used > 0n ? g.amount - g.used : 0n),
        reason: g.reason,
        created_at: new Date(g.createdAt).toISOString(),
        expires_at: g.expiresAt === null ? null : new Date(g.expiresAt).toISOString(),
      })),
    };
  }
}

export interface GrantJson {
  id: string;
  amount_usd: number;
  remaining_usd: number;
  reason: string | null;
  created_at: string;
  expires_at: string | null;
}

export interface BudgetJson {
  user_id: string;
  policy: string;
  period: string;
  period_start: string;
  period_end: string;
  limit_usd: number;
  granted_usd: number;
  spent_usd: number;
  remaining_usd: number;
  /** spent_usd as an exact decimal string (the ledger's integer, not rounded through a float). */
  spent_usd_exact: string;
  state: BudgetStateName;
  enforcement: string;
  grants: GrantJson[];
}
