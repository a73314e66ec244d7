// Budgets of a sidecar in a cluster (ADR 1302). The operator owns the ledger: it sends this pod the policies
// that select it and the cluster-wide usage of their users, and this sidecar reports what it charged. What is
// enforced here is the operator's usage plus this sidecar's own spend that the operator has not counted yet
// (its outbox reports above the operator's `includes_sequence`), so a user is refused here as soon as either
// this pod or any other has spent the budget, within one report-and-push round trip.
//
// Reports: the outbox (SQLite on the pod's disk) seals unsent spend into numbered reports; one report is in
// flight at a time and is resent as it was after a reconnect or a restart until the operator acknowledges it.
// The operator logs `budget alert` and records the Events: it sees the whole cluster's spend, once.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type BudgetPolicyConfig, parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { addSpend, parseUsd, formatUsd, unitsFromCostUsd } from '../../../contracts/money.ts';
import type { BudgetStateMessage, SidecarMessage } from '../../../contracts/push-protocol.ts';
import { MAX_SPEND_ENTRIES_PER_REPORT } from '../../../contracts/push-protocol.ts';
import { BudgetBook, type BudgetRefusal, type BudgetStanding, type ReserveOutcome, chargeFinishedCall } from './budget-book.ts';
import { type BudgetEnforcer, type BudgetHealth, type BudgetPage, GrantError } from './budget-enforcer.ts';
import { type CompiledPolicy, PolicySet, type RateLevel } from '../../../contracts/budget-policies.ts';
import type { BudgetJson, ChargeSplit, Grant, GrantJson, PeriodUsage } from './budget-record.ts';
import { InvalidSpendError, SpendOutbox } from './spend-outbox.ts';
import { MemoryRateWindows } from './memory-rate-windows.ts';
import type { RateWindows } from './rate-windows.ts';

/** What the push client hands budget messages to, and takes reports from. */
export interface BudgetLink {
  /** A stream to the operator is open; reports go out through `send` until detached(). */
  attached(send: (message: SidecarMessage) => void): void;
  detached(): void;
  budgetState(state: BudgetStateMessage): void;
  spendAck(sequence: number): void;
}

interface BaseUsage {
  periodStart: number;
  spent: bigint;
  limitUsed: bigint;
  alerted: number;
  grantsUsed: Map<string, bigint>;
}

/** This sidecar's own spend not yet in the operator's usage. */
interface OverlayCharge {
  policy: string;
  userId: string;
  periodStart: number;
  split: ChargeSplit;
  /** The report it went out in; null while unsent. */
  sequence: number | null;
}

interface CachedState {
  policies: BudgetPolicyConfig[];
  usage: { policy: string; userId: string; periodStart: number; spent: string; limitUsed: string; alerted: number; grants: [string, string][] }[];
  includes: number;
  defaultUser: string | null;
}

export const STATE_FILE = 'budgets-state.json';
export const OUTBOX_FILE = 'budget-outbox.db';
const REPORT_INTERVAL_MS = 250;
const RESEND_AFTER_MS = 10_000;
const SAVE_INTERVAL_MS = 2_000;
const CLOSE_FLUSH_MS = 3_000;
/** Invalid outbox rows logged one by one at a start; the count of all is in the summary line. */
const MAX_SKIPPED_LOGGED = 20;

export interface ClusterBudgetsOptions {
  stateDir: string;
  logger: Logger;
  now?: () => number;
  reportIntervalMs?: number;
  /**
   * The chart's counter store (budgets.store redis, ADR 1311): rate limits counted with the server and every
   * other sidecar there, closed with the budgets. Default: this sidecar's own windows.
   */
  rateWindows?: RateWindows & { close(): Promise<void> };
}

export class ClusterBudgets implements BudgetEnforcer, BudgetLink {
  readonly ready = Promise.resolve();
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #stateDir: string;
  readonly #outbox: SpendOutbox;
  readonly #book: BudgetBook;
  /** This sidecar's own, unless the chart gives it the Redis store: the operator's ledger is not a counter store (ADRs 1309, 1311). */
  readonly rateWindows: RateWindows;
  readonly #closeRateWindows: () => Promise<void>;
  #base = new Map<string, BaseUsage>();
  /** Own spend not yet counted by the operator, summed per (policy, user, period, report). */
  #overlay = new Map<string, OverlayCharge>();
  /** Charges the outbox could not take (disk full): retried before each report. */
  #unpersisted: OverlayCharge[] = [];
  #included = 0;
  #defaultUser: string | null = null;
  #send: ((message: SidecarMessage) => void) | null = null;
  #inFlight: { sequence: number; sentAt: number } | null = null;
  /** Reports up to here are applied by the operator this stream goes to: the next report sent is above it. */
  #sentThrough = 0;
  #timer: NodeJS.Timeout;
  #dirty = false;
  #lastSave = 0;
  #failedWrites = 0;
  #lastError: string | null = null;
  #acked = 0;

  constructor(opts: ClusterBudgetsOptions) {
    this.#logger = opts.logger.child({ component: 'budgets' });
    this.#now = opts.now ?? Date.now;
    this.#stateDir = opts.stateDir;
    const shared = opts.rateWindows;
    this.rateWindows = shared ?? new MemoryRateWindows();
    this.#closeRateWindows = async () => shared?.close();
    mkdirSync(opts.stateDir, { recursive: true });
    this.#outbox = new SpendOutbox(join(opts.stateDir, OUTBOX_FILE));
    this.#logSkipped();
    this.#book = new BudgetBook(new PolicySet([]), {
      usage: (userId, policy, periodStart) => this.#usage(userId, policy, periodStart),
      grants: (userId) => this.#grants(userId),
    });
    this.#loadCachedState();
    this.#timer = setInterval(() => this.#tick(), opts.reportIntervalMs ?? REPORT_INTERVAL_MS);
    this.#timer.unref();
  }

  get defaultUser(): string | null {
    return this.#defaultUser;
  }

  refusal(userId: string, at: number): BudgetRefusal | null {
    return this.#book.refusal(userId, at);
  }

  reserve(userId: string, at: number, estimateUsd: () => number): ReserveOutcome | null {
    return this.#book.reserve(userId, at, () => unitsFromCostUsd(estimateUsd()));
  }

  rateLevels(userId: string): readonly RateLevel[] | undefined {
    return this.#book.policies.rateLevels(userId);
  }

  charge(userId: string, costUsd: number, at: number): void {
    chargeFinishedCall(this.#book, this.#logger, { userId, costUsd, at }, (result) => {
      const charge: OverlayCharge = {
        policy: result.record.policy.name,
        userId: result.record.userId,
        periodStart: result.record.periodStart,
        split: result.split,
        sequence: null,
      };
      this.#addOverlay(charge);
      this.#persist(charge);
    });
  }

  list(at: number, page: { after?: string; limit: number }): BudgetPage {
    // The operator's users and this pod's own, in id order.
    const after = page.after ?? null;
    const ids = new Set<string>();
    for (const key of this.#base.keys()) ids.add(key.slice(key.indexOf('\0') + 1));
    for (const record of this.#book.records(at)) ids.add(record.userId);
    const sorted = [...ids].filter((id) => after === null || id > after).sort();
    const budgets: BudgetJson[] = [];
    for (const userId of sorted.slice(0, page.limit)) {
      const record = this.#book.record(userId, at);
      if (record) budgets.push(record.toJson(at));
    }
    return { budgets, next: sorted.length > page.limit ? sorted[page.limit - 1]! : null };
  }

  standing(at: number, nearest: number): BudgetStanding {
    return this.#book.standing(at, nearest);
  }

  get(userId: string, at: number): BudgetJson | undefined {
    return this.#book.record(userId, at)?.toJson(at);
  }

  async addGrant(): Promise<GrantJson> {
    throw new GrantError(409, 'grants_managed_by_operator', "this sidecar's budgets come from BudgetPolicy resources: add the grant to the policy's spec.grants");
  }

  health(): BudgetHealth & { connected: boolean; includesSequence: number; acknowledgedSequence: number } {
    return {
      ledger: 'operator',
      policies: this.#book.policies.policies.length,
      // Not yet durable at the operator: unsent, or sent and applied but not yet written to its ledger.
      pendingDeductions: this.#outbox.pending().length + this.#unpersisted.length,
      failedWrites: this.#failedWrites,
      lastError: this.#lastError,
      reservingUsers: this.#book.reservingUsers,
      ...(this.rateWindows.store ? { rateLimitStore: this.rateWindows.store } : {}),
      connected: this.#send !== null,
      includesSequence: this.#included,
      acknowledgedSequence: this.#acked,
    };
  }

  /**
   * Reports what is left while the stream is up (waiting at most `flushMs` for acknowledgements), then closes.
   * What is still unacknowledged stays in the outbox for the next start of this pod's sidecar.
   */
  async close(flushMs = CLOSE_FLUSH_MS): Promise<void> {
    const deadline = this.#now() + flushMs;
    while (this.#send && this.#now() < deadline && (this.#outbox.unacknowledged().length > 0 || this.#hasUnsent())) {
      this.#tick();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    clearInterval(this.#timer);
    this.#save(true);
    this.#outbox.close();
    await this.#closeRateWindows();
  }

  #hasUnsent(): boolean {
    for (const c of this.#overlay.values()) if (c.sequence === null) return true;
    return this.#unpersisted.length > 0;
  }

  // --- BudgetLink: the push stream ---

  attached(send: (message: SidecarMessage) => void): void {
    this.#send = send;
    this.#inFlight = null;
    // A new stream may reach a new leader, which holds at least what was written (acknowledged).
    this.#sentThrough = this.#acked;
    this.#tick();
  }

  detached(): void {
    this.#send = null;
    this.#inFlight = null;
  }

  spendAck(sequence: number): void {
    if (!Number.isSafeInteger(sequence) || sequence <= 0) return;
    try {
      this.#outbox.acknowledge(sequence);
    } catch (error) {
      // Resent and skipped by the operator later; nothing is counted twice.
      this.#logger.warn({ sequence, err: (error as Error).message }, 'could not delete acknowledged spend reports');
    }
    if (sequence > this.#acked) this.#acked = sequence;
    this.#sentThrough = Math.max(this.#sentThrough, sequence);
    if (this.#inFlight && sequence >= this.#inFlight.sequence) this.#inFlight = null;
    this.#tick();
  }

  budgetState(state: BudgetStateMessage): void {
    const at = this.#now();
    if (state.replace || state.policiesChanged) {
      let policies: BudgetPolicyConfig[];
      try {
        policies = parseBudgetPolicies(JSON.parse(state.policiesJson || '[]'), 'policies', { allowGrants: true });
      } catch (error) {
        this.#logger.error({ err: (error as Error).message }, 'budget policies from the operator refused; keeping the previous ones');
        return;
      }
      this.#book.setPolicies(new PolicySet(policies), at);
    }
    if (state.replace) this.#base.clear();
    const touched = new Set<string>();
    for (const u of state.usage ?? []) {
      this.#base.set(`${u.policy}\0${u.userId}`, {
        periodStart: Date.parse(u.periodStart),
        spent: BigInt(u.spent),
        limitUsed: BigInt(u.limitUsed),
        alerted: u.alerted,
        grantsUsed: new Map((u.grants ?? []).map((g) => [g.id, BigInt(g.used)])),
      });
      touched.add(u.userId);
    }
    this.#operatorIncludes(Number(state.includesSequence ?? 0), state.replace);
    if (state.defaultUser) this.#defaultUser = state.defaultUser;
    if (state.replace || state.policiesChanged) {
      for (const record of this.#book.records(at)) this.#book.forget(record.userId);
    } else {
      for (const userId of touched) this.#book.forget(userId);
    }
    this.#dirty = true;
    this.#save(false);
  }

  // --- internals ---

  /**
   * The operator's usage includes this pod's reports up to `includes`: they leave the overlay, and the next
   * report may go. A new leader's full state may include less than the last one did (what was applied but
   * not yet written): what it lacks is still in the outbox, and goes back into the overlay until it is in.
   */
  #operatorIncludes(includes: number, replace: boolean): void {
    if (includes > this.#included || (replace && includes < this.#included)) {
      const lower = includes < this.#included;
      this.#included = includes;
      if (lower) this.#restoreOverlay();
      else for (const [key, c] of this.#overlay) if (c.sequence !== null && c.sequence <= includes) this.#overlay.delete(key);
    }
    if (includes > this.#sentThrough) this.#sentThrough = includes;
    if (this.#inFlight && includes >= this.#inFlight.sequence) {
      this.#inFlight = null;
      this.#tick();
    }
  }

  /** Rebuilds the reported part of the overlay from the outbox: every sealed report the operator's usage lacks. */
  #restoreOverlay(): void {
    for (const [key, c] of this.#overlay) if (c.sequence !== null) this.#overlay.delete(key);
    for (const row of this.#outbox.pending()) {
      if (row.sequence === null || row.sequence <= this.#included) continue;
      // The grant split is not kept on disk: charged to the limit until the operator's usage has it (seconds).
      this.#addOverlay({
        policy: row.policy,
        userId: row.userId,
        periodStart: row.periodStart,
        split: { amount: row.amount, limitPart: row.amount, grantParts: [] },
        sequence: row.sequence,
      });
    }
  }

  #usage(userId: string, policy: CompiledPolicy, periodStart: number): PeriodUsage {
    const base = this.#base.get(`${policy.name}\0${userId}`);
    const usage: PeriodUsage =
      base && base.periodStart === periodStart ? { spent: base.spent, limitUsed: base.limitUsed, alerted: base.alerted } : { spent: 0n, limitUsed: 0n, alerted: 0 };
    for (const c of this.#overlay.values()) {
      if (c.userId !== userId || c.policy !== policy.name || c.periodStart !== periodStart) continue;
      usage.spent = addSpend(usage.spent, c.split.amount);
      usage.limitUsed = addSpend(usage.limitUsed, c.split.limitPart);
    }
    return usage;
  }

  #grants(userId: string): Grant[] {
    const policy = this.#book.policies.match(userId);
    if (!policy?.config.grants) return [];
    const base = this.#base.get(`${policy.name}\0${userId}`);
    return policy.config.grants
      .filter((g) => g.user === userId)
      .map((g) => {
        let used = base?.grantsUsed.get(g.id) ?? 0n;
        for (const c of this.#overlay.values()) {
          if (c.userId !== userId || c.policy !== policy.name) continue;
          for (const part of c.split.grantParts) if (part.grantId === g.id) used = addSpend(used, part.amount);
        }
        return {
          id: g.id,
          amount: parseUsd(g.amountUsd) as bigint,
          used,
          reason: g.reason ?? null,
          createdAt: Date.parse(g.createdAt),
          expiresAt: g.expiresAt ? Date.parse(g.expiresAt) : null,
        };
      });
  }

  #persist(charge: OverlayCharge): void {
    try {
      this.#outbox.add(charge.policy, charge.userId, charge.periodStart, charge.split.amount);
    } catch (error) {
      this.#failedWrites++;
      this.#lastError = (error as Error).message;
      // A charge no ledger would take is logged and dropped: kept for retry, it would block every later one.
      if (!(error instanceof InvalidSpendError)) this.#unpersisted.push(charge);
      this.#logger.error({ user_id: charge.userId, amount_usd: formatUsd(charge.split.amount), err: this.#lastError }, 'failed to deduct spend');
    }
  }

  /** Rows the outbox dropped at the start: not what this engine keeps (it adds only charges), a damaged or tampered file. */
  #logSkipped(): void {
    const { skipped, path } = this.#outbox;
    if (skipped.length === 0) return;
    for (const row of skipped.slice(0, MAX_SKIPPED_LOGGED)) {
      this.#logger.error(
        { file: row.file, row: row.row, sequence: row.sequence, user_id: row.userId, policy: row.policy, problem: row.problem },
        `budget spend in the outbox skipped: not valid spend (${row.file} row ${row.row}, ${row.sequence === null ? 'unsent' : `report ${row.sequence}`}: ${row.userId === null ? '' : `user ${JSON.stringify(row.userId)}: `}${row.problem})`,
      );
    }
    this.#logger.warn({ file: path, kept: this.#outbox.pending().length, skipped: skipped.length }, 'budget spend in the outbox checked: invalid rows dropped, the rest kept');
  }

  #tick(): void {
    // Charges the disk refused earlier, in order, before anything new is sealed.
    while (this.#unpersisted.length > 0) {
      const charge = this.#unpersisted[0]!;
      try {
        this.#outbox.add(charge.policy, charge.userId, charge.periodStart, charge.split.amount);
        this.#unpersisted.shift();
      } catch (error) {
        if (!(error instanceof InvalidSpendError)) break;
        this.#unpersisted.shift();
      }
    }
    this.#save(false);
    const send = this.#send;
    if (!send) return;
    const at = this.#now();
    if (this.#inFlight && at - this.#inFlight.sentAt < RESEND_AFTER_MS) return;
    try {
      // The oldest report this stream's operator has not applied (resent unchanged), else a new one.
      const oldest = this.#outbox.unacknowledged().find((sequence) => sequence > this.#sentThrough);
      const report = oldest !== undefined ? this.#outbox.report(oldest) : this.#outbox.seal(MAX_SPEND_ENTRIES_PER_REPORT);
      if (!report) return;
      if (oldest === undefined) {
        // The unsent spend of these (policy, user, period) groups is now this report's.
        for (const entry of report.entries) {
          const unsentKey = overlayKey(entry.policy, entry.userId, entry.periodStart, null);
          const unsent = this.#overlay.get(unsentKey);
          if (!unsent) continue;
          this.#overlay.delete(unsentKey);
          this.#addOverlay({ ...unsent, sequence: report.sequence });
        }
      }
      this.#inFlight = { sequence: report.sequence, sentAt: at };
      send({
        spendReport: {
          sequence: String(report.sequence),
          entries: report.entries.map((e) => ({
            policy: e.policy,
            userId: e.userId,
            periodStart: new Date(e.periodStart).toISOString(),
            amount: e.amount.toString(),
            calls: e.calls,
          })),
        },
      });
    } catch (error) {
      this.#lastError = (error as Error).message;
      this.#logger.warn({ err: this.#lastError }, 'could not send a spend report; retrying');
    }
  }

  /** Keeps the last budget state on disk, so a restarted sidecar enforces before the operator answers. */
  #save(force: boolean): void {
    if (!this.#dirty) return;
    const at = this.#now();
    if (!force && at - this.#lastSave < SAVE_INTERVAL_MS) return;
    const state: CachedState = {
      policies: this.#book.policies.policies.map((p) => p.config),
      usage: [...this.#base].map(([key, u]) => ({
        policy: key.slice(0, key.indexOf('\0')),
        userId: key.slice(key.indexOf('\0') + 1),
        periodStart: u.periodStart,
        spent: u.spent.toString(),
        limitUsed: u.limitUsed.toString(),
        alerted: u.alerted,
        grants: [...u.grantsUsed].map(([id, used]) => [id, used.toString()]),
      })),
      includes: this.#included,
      defaultUser: this.#defaultUser,
    };
    const path = join(this.#stateDir, STATE_FILE);
    try {
      writeFileSync(`${path}.tmp`, JSON.stringify(state), { mode: 0o600 });
      renameSync(`${path}.tmp`, path);
      this.#dirty = false;
      this.#lastSave = at;
    } catch (error) {
      this.#logger.warn({ err: (error as Error).message }, 'could not save the budget state; a restart waits for the operator to enforce');
    }
  }

  #loadCachedState(): void {
    const at = this.#now();
    let cached: CachedState | undefined;
    try {
      cached = JSON.parse(readFileSync(join(this.#stateDir, STATE_FILE), 'utf8')) as CachedState;
    } catch {
      // first start, or no state saved yet
    }
    if (cached) {
      try {
        this.#book.setPolicies(new PolicySet(parseBudgetPolicies(cached.policies, 'policies', { allowGrants: true })), at);
        for (const u of cached.usage) {
          this.#base.set(`${u.policy}\0${u.userId}`, {
            periodStart: u.periodStart,
            spent: BigInt(u.spent),
            limitUsed: BigInt(u.limitUsed),
            alerted: u.alerted,
            grantsUsed: new Map(u.grants.map(([id, used]) => [id, BigInt(used)])),
          });
        }
        this.#included = cached.includes;
        this.#defaultUser = cached.defaultUser;
      } catch (error) {
        this.#logger.warn({ err: (error as Error).message }, 'cached budget state unreadable; waiting for the operator');
        this.#base.clear();
      }
    }
    // Spend this pod charged and the operator had not counted: enforced again at once.
    for (const row of this.#outbox.pending()) {
      if (row.sequence !== null && row.sequence <= this.#included) continue;
      const record = this.#book.record(row.userId, at);
      const result = record && record.policy.name === row.policy && record.periodStart === row.periodStart ? this.#book.charge(row.userId, row.amount, at) : null;
      const split = result?.split ?? { amount: row.amount, limitPart: row.amount, grantParts: [] };
      this.#addOverlay({ policy: row.policy, userId: row.userId, periodStart: row.periodStart, split, sequence: row.sequence });
    }
  }

  #addOverlay(charge: OverlayCharge): void {
    const key = overlayKey(charge.policy, charge.userId, charge.periodStart, charge.sequence);
    const existing = this.#overlay.get(key);
    if (!existing) {
      this.#overlay.set(key, { ...charge, split: { amount: charge.split.amount, limitPart: charge.split.limitPart, grantParts: charge.split.grantParts.map((p) => ({ ...p })) } });
      return;
    }
    existing.split.amount += charge.split.amount;
    existing.split.limitPart += charge.split.limitPart;
    for (const part of charge.split.grantParts) {
      const same = existing.split.grantParts.find((p) => p.grantId === part.grantId);
      if (same) same.amount += part.amount;
      else existing.split.grantParts.push({ ...part });
    }
  }
}

function overlayKey(policy: string, userId: string, periodStart: number, sequence: number | null): string {
  return `${policy}\0${userId}\0${periodStart}\0${sequence ?? 'unsent'}`;
}
