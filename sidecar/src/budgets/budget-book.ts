// The in-memory budgets every engine enforces from: one record per user in use, matched to its policy. The
// request path asks `refusal()`, which is a Map lookup and two comparisons against cached values: no storage,
// no network, no bigint arithmetic (ADR 1300). `charge()` runs when a call has finished and returns how the
// cost was split and which alert thresholds it crossed; where that goes (a ledger, the operator) is the
// caller's business.
//
// A record is a cache of what its source holds (the ledger's mirror, the operator's usage), so the book keeps
// at most `maxRecords` of them: past that, a record not used since the last look is dropped (second chance,
// oldest first) and rebuilt from the source when its user comes back. Memory follows the users in use, not
// every user ever seen (ADR 1306).
//
// Reservations (ADR 1308): before a call goes upstream, `reserve()` holds its estimated cost (input estimated
// from the body, output at the request's max) against the user's budget, and refuses the call when what was
// spent, what calls in flight hold and this call's hold would pass the limit plus active grants. The hold is
// released, once, when the call finishes and its real cost is charged. Holds are per process, kept per user
// apart from the records, so a record dropped or rebuilt from its source keeps the holds of its calls in flight.

import { periodBounds } from '../../../contracts/budget-period.ts';
import type { Logger } from 'pino';
import { unitsFromCostUsd, unitsToUsd } from '../../../contracts/money.ts';
import { type CompiledPolicy, isGroupKey, type PolicySet } from '../../../contracts/budget-policies.ts';
import { type ChargeSplit, type Grant, newlyCrossed, type PeriodUsage, splitCharge } from '../../../contracts/budget-grants.ts';
import { BudgetRecord } from './budget-record.ts';

export interface BudgetRefusal {
  userId: string;
  /** Set when the budget spent is one above the user's (ADR 1312): `@team:<name>`, `@workload:<policy>` or `@namespace:<policy>`. */
  group?: string;
  policy: string;
  limitUsd: number;
  /** day, week or month. */
  period: string;
  /** epoch ms: when the period ends and the budget starts again. */
  periodEnd: number;
  /** Whole seconds until periodEnd, at least 1: the Retry-After value. */
  retryAfterSeconds: number;
  /**
   * Set when the budget is not spent yet but this call's reservation does not fit: what is left beyond the
   * calls in flight (USD, may be 0) and what this call may cost.
   */
  short?: { leftUsd: number; reserveUsd: number };
  /** Set when budgets.unreachable is closed and the shared ledger has failed past the grace: answered 503. */
  unreachable?: { ledger: string; since: number };
}

/** What `reserve()` decided: refused, or admitted with a hold to release when the call finishes. */
export type ReserveOutcome = { refusal: BudgetRefusal; release?: never } | { refusal?: never; release: () => void };

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

/** Records kept in memory by default; each is about a kilobyte. */
export const MAX_BUDGET_RECORDS = 10_000;
/** How many records one eviction looks at, so that inserting stays cheap when most records are in use. */
const EVICTION_SCAN = 64;

/** A user near their limit, for the metrics. */
export interface BudgetNear {
  policy: string;
  userId: string;
  ratio: number;
}

/** Per policy: users in memory past the first alert threshold and exhausted, and the highest utilisation. */
export interface PolicyStanding {
  policy: string;
  warning: number;
  exhausted: number;
  maxRatio: number;
}

export interface BudgetStanding {
  policies: PolicyStanding[];
  /** The users nearest their limit (warning or exhausted), most used first. */
  nearest: BudgetNear[];
  /** Records in memory, and how many were dropped to keep within the bound. */
  records: number;
  evicted: number;
}

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
    // ADR 1312: the cost lands at every level the call falls under, each its own record (record.userId is its key).
    for (const key of book.chargedKeys(call.userId)) {
      const result = book.charge(key, amount, call.at);
      if (result) charged(result);
    }
  } catch (error) {
    logger.error({ user_id: call.userId, amount_usd: call.costUsd, err: (error as Error).message }, 'failed to deduct spend');
  }
}

export class BudgetBook {
  #policies: PolicySet;
  #records = new Map<string, BudgetRecord>();
  #source: BudgetSource;
  readonly #maxRecords: number;
  #evicted = 0;
  /** Open reservations per user, ledger units; a user with none has no entry. */
  readonly #reserved = new Map<string, bigint>();

  constructor(policies: PolicySet, source: BudgetSource = EMPTY_SOURCE, opts: { maxRecords?: number } = {}) {
    this.#policies = policies;
    this.#source = source;
    this.#maxRecords = opts.maxRecords ?? MAX_BUDGET_RECORDS;
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

  /** Hot path: why this user's call must be refused now (its own budget or one above it, ADR 1312), or null. */
  refusal(userId: string, at: number): BudgetRefusal | null {
    const own = this.#refusalOf(userId, at);
    if (own !== null || this.#policies.empty) return own;
    for (const group of this.#policies.above(userId)) {
      const refusal = this.#refusalOf(group, at);
      if (refusal !== null) return { ...refusal, userId, group };
    }
    return null;
  }

  #refusalOf(key: string, at: number): BudgetRefusal | null {
    let record = this.#records.get(key);
    if (record === undefined) {
      if (this.#policies.empty) return null;
      const policy = this.#policies.match(key);
      if (policy === undefined || !policy.blocks) return null;
      record = this.record(key, at)!;
    } else record.touched = true;
    if (at >= record.recheckAt) this.#catchUp(record, at);
    if (!record.exhausted || !record.policy.blocks) return null;
    return refusalOf(record, at);
  }

  /**
   * Hot path: admits a call and holds `estimate()` ledger units for it until `release` is called, or refuses
   * it. Null when no blocking policy limits the user (nothing held; `estimate` is not called). Refused when
   * the budget is spent, or when spend + open reservations + this one would pass the limit plus active grants,
   * at the user's level or any above it (its team's, the namespace's: ADR 1312); admitted, it holds at each.
   */
  reserve(userId: string, at: number, estimate: () => bigint): ReserveOutcome | null {
    const above = this.#policies.above(userId);
    if (above.length === 0) return this.#reserveAt(userId, at, estimate);
    let estimated: bigint | undefined;
    const once = (): bigint => (estimated ??= estimate());
    const releases: (() => void)[] = [];
    for (const key of [userId, ...above]) {
      const outcome = this.#reserveAt(key, at, once);
      if (outcome === null) continue;
      if (outcome.refusal) {
        for (const release of releases) release();
        return { refusal: key === userId ? outcome.refusal : { ...outcome.refusal, userId, group: key } };
      }
      releases.push(outcome.release);
    }
    if (releases.length === 0) return null;
    return { release: () => releases.forEach((release) => release()) };
  }

  /** The keys a call of `userId` is charged to: the user's, then the budgets above it. */
  chargedKeys(userId: string): readonly string[] {
    // A user id of a group key's form is refused before it goes upstream; one that got through (a call with
    // nothing to hold back) is charged nowhere rather than to the group it names.
    if (isGroupKey(userId)) return [];
    const above = this.#policies.above(userId);
    return above.length === 0 ? [userId] : [userId, ...above];
  }

  #reserveAt(userId: string, at: number, estimate: () => bigint): ReserveOutcome | null {
    const spent = this.#refusalOf(userId, at);
    if (spent) return { refusal: spent };
    const record = this.#records.get(userId);
    if (record === undefined || !record.policy.blocks) return null;
    const estimated = estimate();
    const amount = estimated > 0n ? estimated : 0n;
    const held = this.#reserved.get(userId) ?? 0n;
    const left = record.remaining(at) - held;
    if (amount > left) {
      // With calls in flight the room may come back when they settle; without, only a grant or the next period.
      const refusal = refusalOf(record, at);
      if (held > 0n) refusal.retryAfterSeconds = 1;
      return { refusal: { ...refusal, short: { leftUsd: unitsToUsd(left > 0n ? left : 0n), reserveUsd: unitsToUsd(amount) } } };
    }
    if (amount === 0n) return { release: () => undefined };
    this.#reserved.set(userId, held + amount);
    let open = true;
    return {
      release: () => {
        if (!open) return;
        open = false;
        const now = (this.#reserved.get(userId) ?? 0n) - amount;
        if (now > 0n) this.#reserved.set(userId, now);
        else this.#reserved.delete(userId);
      },
    };
  }

  /** Ledger units held by this user's calls in flight. */
  reserved(userId: string): bigint {
    return this.#reserved.get(userId) ?? 0n;
  }

  /** Users with calls in flight holding a reservation. */
  get reservingUsers(): number {
    return this.#reserved.size;
  }

  /** The user's record for the period containing `at`, created from the source; undefined when no policy matches. */
  record(userId: string, at: number): BudgetRecord | undefined {
    const existing = this.#records.get(userId);
    if (existing) {
      existing.touched = true;
      if (at >= existing.recheckAt) this.#catchUp(existing, at);
      return existing;
    }
    const policy = this.#policies.match(userId);
    if (!policy) return undefined;
    const bounds = periodBounds(policy.config.period, policy.config.timeZone, at);
    const usage = this.#source.usage(userId, policy, bounds.start) ?? { spent: 0n, limitUsed: 0n, alerted: 0 };
    const record = new BudgetRecord({ userId, policy, bounds, usage, grants: this.#source.grants(userId) }, at);
    if (this.#records.size >= this.#maxRecords) this.#evict();
    this.#records.set(userId, record);
    return record;
  }

  /** Records in memory, sorted by user id. */
  records(at: number): BudgetRecord[] {
    const list = [...this.#records.values()];
    for (const record of list) if (at >= record.recheckAt) this.#catchUp(record, at);
    return list.sort((a, b) => (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
  }

  /**
   * The metrics' view, in one pass over the records in memory and without building their JSON: per policy how
   * many users are past the first alert threshold or exhausted, and the `nearest` users closest to their limit.
   */
  standing(at: number, nearest: number): BudgetStanding {
    const policies = new Map<string, PolicyStanding>();
    const near: BudgetNear[] = [];
    for (const record of this.#records.values()) {
      if (at >= record.recheckAt) this.#catchUp(record, at);
      const state = record.state(at);
      if (state === 'ok') continue;
      const ratio = record.utilization(at);
      const name = record.policy.name;
      let standing = policies.get(name);
      if (standing === undefined) policies.set(name, (standing = { policy: name, warning: 0, exhausted: 0, maxRatio: 0 }));
      if (state === 'exhausted') standing.exhausted++;
      else standing.warning++;
      if (ratio > standing.maxRatio) standing.maxRatio = ratio;
      if (nearest > 0 && (near.length < nearest || ratio > near[near.length - 1]!.ratio)) {
        near.push({ policy: name, userId: record.userId, ratio });
        near.sort((a, b) => b.ratio - a.ratio);
        if (near.length > nearest) near.pop();
      }
    }
    return { policies: [...policies.values()], nearest: near, records: this.#records.size, evicted: this.#evicted };
  }

  /** Drops records until there is room for one more: each used one gets a second chance at the end of the line. */
  #evict(): void {
    let scanned = 0;
    for (const [userId, record] of this.#records) {
      if (this.#records.size < this.#maxRecords) return;
      if (record.touched && scanned++ < EVICTION_SCAN) {
        record.touched = false;
        this.#records.delete(userId);
        this.#records.set(userId, record);
        continue;
      }
      this.#records.delete(userId);
      this.#evicted++;
    }
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

function refusalOf(record: BudgetRecord, at: number): BudgetRefusal {
  return {
    userId: record.userId,
    policy: record.policy.name,
    limitUsd: unitsToUsd(record.policy.limit),
    period: record.policy.config.period,
    periodEnd: record.periodEnd,
    retryAfterSeconds: Math.max(1, Math.ceil((record.periodEnd - at) / 1000)),
  };
}
