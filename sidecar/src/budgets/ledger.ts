// Where the local proxy and the central server keep budgets durably: per user, the spend of each period and
// the grants. Four implementations behind one interface: SQLite (embedded default), Firestore and Redis (a fleet
// of engines sharing one ledger) and memory (tests, throwaway runs). In a cluster the operator keeps the ledger
// instead (operator/src/budgets), and sidecars report to it.
//
// Writes are deltas, never absolute values: "add this much to the period's spend and to these grants' use".
// Applied with increments, they commute, so several writers cannot lose each other's updates.

import { MAX_ALERT_THRESHOLD } from '../../../contracts/budget-config.ts';
import { addSpend, spendUnitsProblem } from '../../../contracts/money.ts';
import type { ChargeSplit, Grant, PeriodUsage } from './budget-record.ts';

export interface LedgerUser {
  userId: string;
  /** Usage by period start (epoch ms). */
  periods: Map<number, PeriodUsage>;
  grants: Grant[];
}

/** Spend to add to one user's period. Deltas for the same user and period merge by adding. */
export interface SpendDelta {
  userId: string;
  policy: string;
  /** epoch ms */
  periodStart: number;
  split: ChargeSplit;
  /** The highest alert threshold logged for this period (stored as a maximum, so a restart does not repeat it). */
  alerted: number;
}

/**
 * Deltas written together. A batch that failed is retried as it was, with the same id, so a ledger that
 * cannot tell whether a failed write landed (a timeout after the commit) can recognise it and not add it twice.
 */
export interface DeductionBatch {
  id: string;
  deltas: SpendDelta[];
}

export interface BudgetLedger {
  readonly kind: 'sqlite' | 'firestore' | 'memory' | 'redis';
  /** Every user with usage in a period starting at or after `since` (epoch ms), or with a grant. */
  load(since: number): Promise<LedgerUser[]>;
  /** One user's stored state (after another process may have changed it). */
  loadUser(userId: string, since: number): Promise<LedgerUser | undefined>;
  /**
   * A ledger on this machine reads one user at once (SQLite, memory), so the engine keeps only the users in use
   * in memory and reads the others when they come back. Absent: the engine keeps what it loaded (Firestore).
   */
  readUser?(userId: string, since: number): LedgerUser | undefined;
  /** Users with stored usage or grants, in user id order, after `after` (exclusive), at most `limit`. */
  userIds?(after: string | null, limit: number): string[];
  /**
   * Adds the batch's deltas, whole or not at all (a failure throws), at most once per batch id. A batch with a
   * delta that fails `deltaProblem` is refused whole (`refuseInvalidSpend`) before anything of it is written.
   */
  deduct(batch: DeductionBatch): Promise<void>;
  /**
   * Keeps batches that could not be written before the process ends (another process holds the file's lock) in
   * a file beside the ledger, which `replayKept` writes at the next start. Returns where, or throws.
   */
  keep?(batches: readonly DeductionBatch[]): string;
  /**
   * Writes the batches `keep` set aside (each at most once, by its id), checked as a first write is: a delta that
   * fails `deltaProblem` is skipped (and reported), the rest of the file is written.
   */
  replayKept?(): Promise<KeptReplay>;
  addGrant(userId: string, grant: Grant): Promise<void>;
  /**
   * Claims the right to log alert `threshold` for a user's period: true once across every process sharing
   * the ledger. Ledgers with a single writer may answer true without storage (the caller remembers).
   */
  claimAlert(userId: string, periodStart: number, threshold: number): Promise<boolean>;
  close(): Promise<void>;
}

/** What a replay of kept spend wrote, and what it refused to. */
export interface KeptReplay {
  /** Batches written. */
  written: number;
  skipped: SkippedSpend[];
}

/** A line of the kept file, or one delta of it, that was not written. */
interface SkippedSpend {
  file: string;
  /** 1-based line of the file. */
  line: number;
  /** The batch id, when the line has one. */
  batch: string | null;
  userId: string | null;
  problem: string;
}

/**
 * What is wrong with a delta, or null. Every delta the engine makes is the charges of one user and period added
 * up (mergeDelta): amounts from 0 to MAX_SPEND_UNITS (money.ts), an alert threshold a policy can have. A ledger
 * checks this before it writes a delta, on the first write and on a replay of spend kept at shutdown alike, so a
 * damaged or hostile kept file cannot lower a spend, a limit's use or a grant's use, nor silence alerts.
 */
export function deltaProblem(delta: SpendDelta): string | null {
  if (!Number.isSafeInteger(delta.periodStart)) return `has period start ${delta.periodStart}, not a time in epoch ms`;
  if (!Number.isInteger(delta.alerted) || delta.alerted < 0 || delta.alerted > MAX_ALERT_THRESHOLD) {
    return `has alert threshold ${delta.alerted}, not a percentage from 0 to ${MAX_ALERT_THRESHOLD}`;
  }
  const amounts: [string, bigint][] = [
    ['amount', delta.split.amount],
    ['limit part', delta.split.limitPart],
    ...delta.split.grantParts.map((p): [string, bigint] => [`part of grant ${JSON.stringify(p.grantId)}`, p.amount]),
  ];
  for (const [what, units] of amounts) {
    const problem = spendUnitsProblem(units);
    if (problem !== null) return `${what} ${problem}`;
  }
  return null;
}

/**
 * Throws, naming the batch, the user and the problem, when a delta of the batch fails deltaProblem. Every ledger's
 * deduct calls it before it writes anything, so SQLite, Firestore and memory refuse the same batches alike, whole.
 */
export function refuseInvalidSpend(batch: DeductionBatch): void {
  for (const d of batch.deltas) {
    const problem = deltaProblem(d);
    if (problem !== null) throw new Error(`batch ${batch.id} not written: the spend of user ${JSON.stringify(d.userId)} ${problem}`);
  }
}

/** Adds `delta` into `into` (same user and period), saturating as every sum of money does. */
export function mergeDelta(into: SpendDelta, delta: SpendDelta): void {
  into.split.amount = addSpend(into.split.amount, delta.split.amount);
  into.split.limitPart = addSpend(into.split.limitPart, delta.split.limitPart);
  for (const part of delta.split.grantParts) {
    const existing = into.split.grantParts.find((p) => p.grantId === part.grantId);
    if (existing) existing.amount = addSpend(existing.amount, part.amount);
    else into.split.grantParts.push({ ...part });
  }
  if (delta.alerted > into.alerted) into.alerted = delta.alerted;
  into.policy = delta.policy;
}

/** The user's stored state in `users`, created empty on first use. */
export function ledgerUser(users: Map<string, LedgerUser>, userId: string): LedgerUser {
  let user = users.get(userId);
  if (!user) {
    user = { userId, periods: new Map(), grants: [] };
    users.set(userId, user);
  }
  return user;
}

/** Adds a delta to a user's stored period and to the grants it drew on, as a ledger's increments would. */
export function applyDelta(user: LedgerUser, delta: SpendDelta): void {
  const usage = user.periods.get(delta.periodStart) ?? { spent: 0n, limitUsed: 0n, alerted: 0 };
  usage.spent = addSpend(usage.spent, delta.split.amount);
  usage.limitUsed = addSpend(usage.limitUsed, delta.split.limitPart);
  if (delta.alerted > usage.alerted) usage.alerted = delta.alerted;
  user.periods.set(delta.periodStart, usage);
  for (const part of delta.split.grantParts) {
    const grant = user.grants.find((g) => g.id === part.grantId);
    if (grant) grant.used = addSpend(grant.used, part.amount);
  }
}

export function copyDelta(delta: SpendDelta): SpendDelta {
  return { ...delta, split: { amount: delta.split.amount, limitPart: delta.split.limitPart, grantParts: delta.split.grantParts.map((p) => ({ ...p })) } };
}
