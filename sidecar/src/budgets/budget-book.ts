// The in-memory budgets every engine enforces from: one record per user seen, matched to its policy. The
// request path asks `refusal()`, which is a Map lookup and two comparisons against cached values: no storage,
// no network, no bigint arithmetic (ADR 1300). `charge()` runs when a call has finished and returns how the
// cost was split and which alert thresholds it crossed; where that goes (a ledger, the operator) is the
// caller's business.

import { periodBounds } from '../../../contracts/budget-period.ts';
import type { Logger } from 'pino';
import { unitsFromCostUsd, unitsToUsd } from '../../../contracts/money.ts';
import type { CompiledPolicy, PolicySet } from '../../../contracts/budget-policies.ts';
import { type ChargeSplit, type Grant, newlyCrossed, type PeriodUsage, splitCharge } from '../../../contracts/budget-grants.ts';
import { BudgetRecord } from './budget-record.ts';

export interface BudgetRefusal {
  userId: string;
  policy: string;
  limitUsd: number;
  /** day, week or month. */
  period: string;
  /** epoch ms: when the period ends and the budget starts again. */
  periodEnd: number;
  /** Whole seconds until periodEnd, at least 1: the Retry-After value. */
  retryAfterSeconds: number;
}

export interface ChargeResult {
  record: BudgetRecord;
  split: ChargeSplit;
  /** Thresholds this charge crossed (each once per user per period). */
  crossed: number[];
}

/** Where a record's stored state comes from when it is first needed (the ledger, the operator's push). */
export interface BudgetSource {
  usage(userId: string, policy: CompiledPolicy, periodStart: number): PeriodUsage | undefined;
  grants(userId: string): Grant[];
}

const EMPTY_SOURCE: BudgetSource = { usage: () => undefined, grants: () => [] };

/** A finished call's cost, to charge to its user. */
export interface FinishedCall {
  userId: string;
  costUsd: number;
  /** epoch ms */
  at: number;
}

/**
 * Charges a finished call to its user's budget and hands the result to `charged` (where it goes: a ledger, the
 * operator). Nothing happens when no policy is set, the cost rounds to nothing or no policy limits the user.
 * Metering must never fail a call (ADR 1001): a failure is logged with the amount, which the span also has.
 */
export function chargeFinishedCall(book: BudgetBook, logger: Logger, call: FinishedCall, charged: (result: ChargeResult) => void): void {
  if (book.policies.empty) return; // no budgets: nothing to charge, nothing allocated
  const amount = unitsFromCostUsd(call.costUsd);
  if (amount === 0n) return;
  try {
    const result = book.charge(call.userId, amount, call.at);
    if (result) charged(result);
  } catch (error) {
    logger.error({ user_id: call.userId, amount_usd: call.costUsd, err: (error as Error).message }, 'failed to deduct spend');
  }
}

export class BudgetBook {
  #policies: PolicySet;
  #records = new Map<string, BudgetRecord>();
  #source: BudgetSource;

  constructor(policies: PolicySet, source: BudgetSource = EMPTY_SOURCE) {
    this.#policies = policies;
    this.#source = source;
  }

  get policies(): PolicySet {
    return this.#policies;
  }

  /**
   * New policies: every record is matched again. A record that keeps its policy's period keeps its spend; one
   * whose period changed (or that no policy matches any more) is rebuilt from the source.
   */
  setPolicies(policies: PolicySet, at: number): void {
    this.#policies = policies;
    for (const [userId, record] of this.#records) {
      const policy = policies.match(userId);
      if (!policy) {
        this.#records.delete(userId);
        continue;
      }
      const bounds = periodBounds(policy.config.period, policy.config.timeZone, at);
      if (bounds.start === record.periodStart && bounds.end === record.periodEnd) {
        record.policy = policy;
        record.refresh(at);
      } else {
        this.#records.delete(userId);
      }
    }
  }

  /** Hot path: why this user's call must be refused now, or null. */
  refusal(userId: string, at: number): BudgetRefusal | null {
    let record = this.#records.get(userId);
    if (record === undefined) {
      if (this.#policies.empty) return null;
      const policy = this.#policies.match(userId);
      if (policy === undefined || !policy.blocks) return null;
      record = this.record(userId, at)!;
    }
    if (at >= record.recheckAt) this.#catchUp(record, at);
    if (!record.exhausted || !record.policy.blocks) return null;
    return {
      userId,
      policy: record.policy.name,
      limitUsd: unitsToUsd(record.policy.limit),
      period: record.policy.config.period,
      periodEnd: record.periodEnd,
      retryAfterSeconds: Math.max(1, Math.ceil((record.periodEnd - at) / 1000)),
    };
  }

  /** The user's record for the period containing `at`, created from the source; undefined when no policy matches. */
  record(userId: string, at: number): BudgetRecord | undefined {
    const existing = this.#records.get(userId);
    if (existing) {
      if (at >= existing.recheckAt) this.#catchUp(existing, at);
      return existing;
    }
    const policy = this.#policies.match(userId);
    if (!policy) return undefined;
    const bounds = periodBounds(policy.config.period, policy.config.timeZone, at);
    const usage = this.#source.usage(userId, policy, bounds.start) ?? { spent: 0n, limitUsed: 0n, alerted: 0 };
    const record = new BudgetRecord({ userId, policy, bounds, usage, grants: this.#source.grants(userId) }, at);
    this.#records.set(userId, record);
    return record;
  }

  /** Records in memory (users seen or loaded), sorted by user id. */
  records(at: number): BudgetRecord[] {
    const list = [...this.#records.values()];
    for (const record of list) if (at >= record.recheckAt) this.#catchUp(record, at);
    return list.sort((a, b) => (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
  }

  /** Drops a record so the next use rebuilds it from the source (the source changed underneath). */
  forget(userId: string): void {
    this.#records.delete(userId);
  }

  /** Charges a finished call's cost; null when no policy limits the user. */
  charge(userId: string, amount: bigint, at: number): ChargeResult | null {
    const record = this.record(userId, at);
    if (!record) return null;
    const split = splitCharge(record.grants, amount, at);
    record.apply(split, at);
    const crossed = newlyCrossed(record.policy.config.alertThresholds, record.policy.limit, record.limitUsed, record.alerted);
    if (crossed.length > 0) record.alerted = crossed.at(-1)!;
    return { record, split, crossed };
  }

  #catchUp(record: BudgetRecord, at: number): void {
    if (record.roll(at)) {
      const usage = this.#source.usage(record.userId, record.policy, record.periodStart);
      if (usage) {
        record.spent = usage.spent;
        record.limitUsed = usage.limitUsed;
        record.alerted = usage.alerted;
      }
    }
    record.refresh(at);
  }
}
