// Budgets of the local proxy and the central server: policies from the config (file and config API), spend
// and grants in this engine's ledger (SQLite, Firestore or memory).
//
// Enforcement is from memory (BudgetBook). A finished call is charged there at once and its delta queued for
// the ledger; the queue is flushed right away, one write at a time. A write that fails logs `failed to deduct
// spend` (user_id, amount, error) and is retried with backoff: the amount stays queued, merged with later
// spend of the same user and period, so nothing is lost and memory stays bounded by users, not calls
// (ADR 1300). A ledger shared with other servers (Firestore, Redis) is read back every few seconds for the users
// this server has seen, so their spend elsewhere is enforced here too. While such a ledger fails, memory keeps
// enforcing (budgets.unreachable open, the default), or budgeted calls are refused after a grace (closed, ADR 1310).
//
// Memory follows the users in use (ADR 1306): the mirror of the ledger and the book keep at most `maxUsers`
// each. A ledger on this machine (SQLite, memory) is read for a user who is not in memory when they come back;
// a user whose spend is not written yet is never dropped. Firestore cannot be read on the request path, so a
// server on it loads at most `maxUsers` at start, and a user who comes back is enforced from memory until the
// next read-back (every few seconds) brings their stored spend.

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { type BudgetsConfig, type BudgetUnreachableRule, UNREACHABLE_GRACE_MS } from '../../../contracts/budget-config.ts';
import { formatUsd, parseUsd, unitsFromCostUsd, unitsToUsd } from '../../../contracts/money.ts';
import { BudgetBook, MAX_BUDGET_RECORDS, type BudgetRefusal, type BudgetStanding, type ReserveOutcome, chargeFinishedCall } from './budget-book.ts';
import type { BudgetEnforcer, BudgetHealth, BudgetPage, GrantRequest } from './budget-enforcer.ts';
import { GrantError } from './budget-enforcer.ts';
import { MemoryRateWindows } from './memory-rate-windows.ts';
import type { RateWindows } from './rate-windows.ts';
import type { CompiledPolicy, RateLevel } from '../../../contracts/budget-policies.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import type { BudgetJson, BudgetRecord, Grant, GrantJson, PeriodUsage } from './budget-record.ts';
import { applyDelta, type BudgetLedger, copyDelta, type DeductionBatch, type LedgerUser, mergeDelta, type SpendDelta } from './ledger.ts';

/** How far back a load looks: the longest period (a month) plus slack. */
const LOAD_WINDOW_MS = 40 * 86_400_000;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** How long shutdown keeps trying a ledger that refuses writes before it keeps the spend aside. */
const CLOSE_RETRY_MS = 3_000;
export const DEFAULT_REFRESH_MS = 3_000;
export const MAX_GRANTS_PER_USER = 1000;
/** Skipped entries of a kept file logged one by one; the count of all is in the summary line. */
const MAX_SKIPPED_LOGGED = 20;

export interface LedgerBudgetsOptions {
  ledger: BudgetLedger;
  config: BudgetsConfig;
  logger: Logger;
  now?: () => number;
  /** Read the shared ledger back this often (Firestore); 0: never (a ledger only this engine writes). */
  refreshMs?: number;
  /** Users kept in memory (the ledger's mirror and the book each); default MAX_BUDGET_RECORDS. */
  maxUsers?: number;
  /** Rate windows shared with other engines (Redis, ADR 1311), closed with the budgets; default this process's own. */
  rateWindows?: RateWindows & { close(): Promise<void> };
}

export class LedgerBudgets implements BudgetEnforcer {
  readonly defaultUser = null;
  readonly ready: Promise<void>;
  readonly #ledger: BudgetLedger;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #book: BudgetBook;
  /** Counted by this process alone, unless the ledger is Redis: then shared through it (ADRs 1309, 1311). */
  readonly rateWindows: RateWindows;
  readonly #closeRateWindows: () => Promise<void>;
  /** What the ledger holds (as far as this engine knows), plus this engine's own charges; the users in use. */
  readonly #stored = new Map<string, LedgerUser>();
  readonly #maxUsers: number;
  #droppedUsers = 0;
  /** Deltas not yet written, by `user\0periodStart`. */
  #pending = new Map<string, SpendDelta>();
  /** The batch being written, or the failed one waiting to be retried as it was (same id). */
  #unsettled: DeductionBatch | null = null;
  #writing: Promise<void> | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #retryDelay = RETRY_MIN_MS;
  #refreshTimer: NodeJS.Timeout | null = null;
  /** A read-back in progress: close() waits for it before it closes the ledger's client. */
  #refreshing: Promise<void> | null = null;
  #failedWrites = 0;
  /** Writes completed so far: a read that overlapped one cannot tell whether it includes it. */
  #writesDone = 0;
  #lastError: string | null = null;
  #closed = false;
  /** Spend kept at the last shutdown is still to be written. */
  #keptWaiting = false;
  readonly #unreachableRule: BudgetUnreachableRule;
  /** When the last run of failed ledger writes or reads began; null: the last one succeeded. */
  #failingSince: number | null = null;

  constructor(opts: LedgerBudgetsOptions) {
    this.#ledger = opts.ledger;
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#maxUsers = opts.maxUsers ?? MAX_BUDGET_RECORDS;
    this.#unreachableRule = opts.config.unreachable ?? 'open';
    const shared = opts.rateWindows;
    this.rateWindows = shared ?? new MemoryRateWindows();
    this.#closeRateWindows = async () => shared?.close();
    this.#book = new BudgetBook(
      new PolicySet(opts.config.policies),
      {
        usage: (userId, _policy: CompiledPolicy, periodStart) => this.#storedUsage(userId, periodStart),
        grants: (userId) => (this.#known(userId)?.grants ?? []).map((g) => ({ ...g })),
      },
      { maxRecords: this.#maxUsers },
    );
    this.ready = this.#load(opts.refreshMs ?? 0);
  }

  async #load(refreshMs: number): Promise<void> {
    await this.#replayKept();
    // A ledger read on demand needs nothing loaded; one that cannot be (Firestore) gives what fits.
    if (this.#ledger.readUser === undefined) {
      for (const user of await this.#ledger.load(this.#now() - LOAD_WINDOW_MS)) {
        if (this.#stored.size >= this.#maxUsers) break;
        this.#stored.set(user.userId, user);
      }
    }
    if (refreshMs > 0) {
      const tick = () => {
        this.#refreshTimer = setTimeout(() => {
          this.#refreshing = this.#refresh()
            .catch((error: unknown) => this.#logger.warn({ err: (error as Error).message }, 'could not read budgets back from the ledger; enforcing from memory'))
            .finally(() => {
              this.#refreshing = null;
              if (!this.#closed) tick();
            });
        }, refreshMs);
        this.#refreshTimer.unref();
      };
      tick();
    }
  }

  /** Policies changed (config API or a new file layer): records are matched again at once. */
  setConfig(config: BudgetsConfig): void {
    this.#book.setPolicies(new PolicySet(config.policies), this.#now());
  }

  refusal(userId: string, at: number): BudgetRefusal | null {
    return this.#unreachableRefusal(userId, at) ?? this.#book.refusal(userId, at);
  }

  reserve(userId: string, at: number, estimateUsd: () => number): ReserveOutcome | null {
    const unreachable = this.#unreachableRefusal(userId, at);
    if (unreachable) return { refusal: unreachable };
    return this.#book.reserve(userId, at, () => unitsFromCostUsd(estimateUsd()));
  }

  rateLevels(userId: string): readonly RateLevel[] | undefined {
    return this.#book.policies.rateLevels(userId);
  }

  /**
   * budgets.unreachable closed (ADR 1310): once the ledger has failed for UNREACHABLE_GRACE_MS, a call a blocking
   * policy limits is refused, since this engine no longer sees what the others spend. Open: memory decides.
   */
  #unreachableRefusal(userId: string, at: number): BudgetRefusal | null {
    const since = this.#failingSince;
    if (this.#unreachableRule === 'open' || since === null || at - since < UNREACHABLE_GRACE_MS) return null;
    // Any blocking budget the call falls under, the user's or one above it (ADR 1312), is one this engine cannot see.
    const policies = this.#book.policies;
    const policy = [userId, ...policies.above(userId)].map((key) => policies.match(key)).find((p) => p?.blocks === true);
    if (policy === undefined) return null;
    return {
      userId,
      policy: policy.name,
      limitUsd: unitsToUsd(policy.limit),
      period: policy.config.period,
      periodEnd: at,
      retryAfterSeconds: 1,
      unreachable: { ledger: this.#ledger.kind, since },
    };
  }

  #ledgerFailed(): void {
    this.#failingSince ??= this.#now();
  }

  charge(userId: string, costUsd: number, at: number): void {
    chargeFinishedCall(this.#book, this.#logger, { userId, costUsd, at }, ({ record, split, crossed }) => {
      const delta: SpendDelta = { userId: record.userId, policy: record.policy.name, periodStart: record.periodStart, split, alerted: record.alerted };
      this.#mirror(delta);
      const key = `${record.userId}\0${record.periodStart}`;
      const pending = this.#pending.get(key);
      if (pending) mergeDelta(pending, delta);
      else this.#pending.set(key, copyDelta(delta));
      for (const threshold of crossed) void this.#alert(record, threshold);
      this.#flushSoon();
    });
  }

  list(at: number, page: { after?: string; limit: number }): BudgetPage {
    // The ledger's users in id order when it can list them (a restarted proxy lists them before their next
    // call), else the users in memory.
    const after = page.after ?? null;
    // Users charged here whose spend is not written yet are listed too.
    const unwritten = [...this.#pending.values(), ...(this.#unsettled?.deltas ?? [])].map((d) => d.userId);
    const candidates = this.#ledger.userIds?.(after, page.limit + 1) ?? [...this.#stored.keys(), ...this.#book.records(at).map((r) => r.userId)];
    const ids = [...new Set([...candidates, ...unwritten])]
      .filter((id) => after === null || id > after)
      .sort()
      .slice(0, page.limit + 1);
    const more = ids.length > page.limit;
    const budgets: BudgetJson[] = [];
    for (const userId of more ? ids.slice(0, page.limit) : ids) {
      const record = this.#book.record(userId, at);
      if (record) budgets.push(record.toJson(at));
    }
    return { budgets, next: more ? ids[page.limit - 1]! : null };
  }

  standing(at: number, nearest: number): BudgetStanding {
    return this.#book.standing(at, nearest);
  }

  get(userId: string, at: number): BudgetJson | undefined {
    return this.#book.record(userId, at)?.toJson(at);
  }

  async addGrant(userId: string, request: GrantRequest, at: number): Promise<GrantJson> {
    const record = this.#book.record(userId, at);
    if (!record) throw new GrantError(404, 'budget_not_found', `no budget policy limits user ${JSON.stringify(userId)}; a grant adds to a policy's limit`);
    if (record.grants.length >= MAX_GRANTS_PER_USER) {
      throw new GrantError(409, 'too_many_grants', `user ${JSON.stringify(userId)} already has ${record.grants.length} grants`);
    }
    const amount = parseUsd(request.amountUsd);
    if (typeof amount === 'string') throw new GrantError(400, 'invalid_request', `amount_usd ${amount}`);
    const grant: Grant = {
      id: randomUUID(),
      amount,
      used: 0n,
      reason: request.reason ?? null,
      createdAt: at,
      expiresAt: request.expiresAt ?? null,
    };
    try {
      await this.#ledger.addGrant(userId, grant);
    } catch (error) {
      throw new GrantError(503, 'ledger_unavailable', `the grant was not stored: ${(error as Error).message}`);
    }
    this.#storedUser(userId).grants.push({ ...grant });
    // The record may have been rebuilt meanwhile; add to whichever is current now.
    const current = this.#book.record(userId, this.#now());
    if (current && !current.grants.some((g) => g.id === grant.id)) {
      current.grants.push({ ...grant });
      current.refresh(this.#now());
    }
    this.#logger.info(
      {
        user_id: userId,
        grant_id: grant.id,
        amount_usd: formatUsd(amount),
        reason: grant.reason,
        expires_at: request.expiresAt ? new Date(request.expiresAt).toISOString() : null,
      },
      'budget grant added',
    );
    return current?.toJson(this.#now()).grants.find((g) => g.id === grant.id) ?? grantJson(grant);
  }

  health(): BudgetHealth {
    return {
      ledger: this.#ledger.kind,
      policies: this.#book.policies.policies.length,
      pendingDeductions: this.#pending.size + (this.#unsettled?.deltas.length ?? 0),
      usersInMemory: this.#stored.size,
      usersDropped: this.#droppedUsers,
      failedWrites: this.#failedWrites,
      lastError: this.#lastError,
      reservingUsers: this.#book.reservingUsers,
      ...(this.rateWindows.store ? { rateLimitStore: this.rateWindows.store } : {}),
    };
  }

  /** Writes what is queued (waits for a write in flight, and tries the rest once more), then closes the ledger. */
  /**
   * Writes what is queued (waits for a write in flight, and tries the rest again for up to CLOSE_RETRY_MS: a
   * lock another process holds is often brief), then closes the ledger. What still cannot be written is kept
   * beside the ledger for the next start when the ledger can (SQLite), and only otherwise lost, loudly.
   */
  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    this.#closed = true;
    await this.#refreshing;
    await this.#writing;
    const giveUpAt = Date.now() + CLOSE_RETRY_MS;
    for (let delay = RETRY_MIN_MS / 5; this.#unsettled || this.#pending.size > 0; delay *= 2) {
      await this.#write();
      if (!this.#unsettled && this.#pending.size === 0) break;
      if (Date.now() + delay > giveUpAt) break;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    if (this.#unsettled || this.#pending.size > 0) this.#keepUnwritten();
    await this.#closeRateWindows();
    await this.#ledger.close();
  }

  #keepUnwritten(): void {
    const batches = [...(this.#unsettled ? [this.#unsettled] : []), ...(this.#pending.size > 0 ? [{ id: randomUUID(), deltas: [...this.#pending.values()] }] : [])];
    let kept: string | null = null;
    try {
      kept = this.#ledger.keep?.(batches) ?? null;
    } catch (error) {
      this.#lastError = `${this.#lastError ?? ''}; keeping it aside failed too: ${(error as Error).message}`;
    }
    for (const delta of batches.flatMap((batch) => batch.deltas)) {
      this.#logger.error(
        { user_id: delta.userId, amount_usd: formatUsd(delta.split.amount), period_start: new Date(delta.periodStart).toISOString(), err: this.#lastError, kept_in: kept },
        kept === null ? 'failed to deduct spend; the amount is lost with this process' : 'failed to deduct spend; kept beside the ledger for the next start',
      );
    }
  }

  /** Spend kept aside at the last shutdown: written now, or on the next successful write if the ledger is still busy. */
  async #replayKept(): Promise<void> {
    if (this.#ledger.replayKept === undefined) return;
    try {
      const { written, skipped } = await this.#ledger.replayKept();
      this.#keptWaiting = false;
      // Skipped spend is not what this engine kept (keep writes only charges): a damaged or tampered file.
      for (const entry of skipped.slice(0, MAX_SKIPPED_LOGGED)) {
        this.#logger.error(
          { file: entry.file, line: entry.line, batch: entry.batch, user_id: entry.userId, problem: entry.problem },
          `budget spend kept at the last shutdown skipped: not valid spend (${entry.file} line ${entry.line}, batch ${entry.batch ?? 'without an id'}: ${entry.userId === null ? '' : `user ${JSON.stringify(entry.userId)}: `}${entry.problem})`,
        );
      }
      if (written > 0 || skipped.length > 0) {
        this.#logger.info({ batches: written, skipped: skipped.length }, 'budget spend kept at the last shutdown written to the ledger');
      }
    } catch (error) {
      this.#keptWaiting = true;
      this.#logger.error({ err: (error as Error).message }, 'failed to deduct spend: the spend kept at the last shutdown could not be written yet; retried after the next write');
    }
  }

  /** Resolves when nothing is queued or in flight (tests, shutdown). */
  async flushed(): Promise<void> {
    for (;;) {
      if (this.#writing) await this.#writing;
      else if ((this.#unsettled || this.#pending.size > 0) && !this.#retryTimer) await this.#write();
      else return;
    }
  }

  async #alert(record: BudgetRecord, threshold: number): Promise<void> {
    const periodStart = record.periodStart;
    let first = true;
    try {
      first = await this.#ledger.claimAlert(record.userId, periodStart, threshold);
    } catch (error) {
      // Better twice than never: log it, and say the claim failed.
      this.#logger.warn(
        { user_id: record.userId, threshold, err: (error as Error).message },
        'could not record a budget alert in the ledger; it may be logged by another server too',
      );
    }
    if (!first) return;
    this.#logger.warn(
      {
        user_id: record.userId,
        policy: record.policy.name,
        threshold,
        spent_usd: unitsToUsd(record.spent),
        limit_usd: unitsToUsd(record.policy.limit),
        limit_used_usd: unitsToUsd(record.limitUsed),
        period_start: new Date(periodStart).toISOString(),
        period_end: new Date(record.periodEnd).toISOString(),
        enforcement: record.policy.config.enforcement,
      },
      `budget alert: user ${record.userId} reached ${threshold}% of policy ${record.policy.name}`,
    );
  }

  #flushSoon(): void {
    if (this.#writing || this.#retryTimer || this.#closed) return;
    if (!this.#unsettled && this.#pending.size === 0) return;
    this.#writing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.#write());
  }

  async #write(): Promise<void> {
    if (!this.#unsettled) {
      if (this.#pending.size === 0) {
        this.#writing = null;
        return;
      }
      this.#unsettled = { id: randomUUID(), deltas: [...this.#pending.values()] };
      this.#pending = new Map();
    }
    const batch = this.#unsettled;
    try {
      await this.#ledger.deduct(batch);
      this.#writesDone++;
      this.#failingSince = null;
      this.#unsettled = null;
      this.#trim(this.#maxUsers);
      if (this.#keptWaiting) await this.#replayKept();
      this.#retryDelay = RETRY_MIN_MS;
      this.#writing = null;
      if (this.#pending.size > 0) this.#flushSoon();
    } catch (error) {
      this.#failedWrites++;
      this.#ledgerFailed();
      const message = error instanceof Error ? error.message : String(error);
      this.#lastError = message;
      // Kept as it is and retried first: charges made meanwhile wait in the queue behind it.
      for (const delta of batch.deltas) {
        this.#logger.error(
          {
            user_id: delta.userId,
            amount_usd: formatUsd(delta.split.amount),
            period_start: new Date(delta.periodStart).toISOString(),
            ledger: this.#ledger.kind,
            err: message,
            retry_in_ms: this.#retryDelay,
          },
          'failed to deduct spend',
        );
      }
      this.#writing = null;
      if (!this.#closed) {
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = null;
          this.#flushSoon();
        }, this.#retryDelay);
        this.#retryTimer.unref();
      }
      this.#retryDelay = Math.min(RETRY_MAX_MS, this.#retryDelay * 2);
    }
  }

  /** Reads the users this engine has records for back from a shared ledger; their spend elsewhere counts here. */
  async #refresh(): Promise<void> {
    const at = this.#now();
    for (const record of this.#book.records(at)) {
      if (this.#closed) return;
      // A write in flight (or failed, maybe landed) may or may not be in what we read: skip the user until it settles.
      if (this.#unsettled?.deltas.some((d) => d.userId === record.userId)) continue;
      let loaded: LedgerUser | undefined;
      const writesBefore = this.#writesDone;
      try {
        loaded = await this.#ledger.loadUser(record.userId, at - LOAD_WINDOW_MS);
      } catch (error) {
        this.#ledgerFailed();
        this.#logger.warn({ user_id: record.userId, err: (error as Error).message }, 'could not read budgets back from the ledger; enforcing from memory');
        return;
      }
      if (this.#unsettled === null && this.#pending.size === 0) this.#failingSince = null;
      if (!loaded || writesBefore !== this.#writesDone || this.#unsettled?.deltas.some((d) => d.userId === record.userId)) continue;
      // Stored state plus what this engine charged and has not written yet.
      for (const delta of this.#pending.values()) {
        if (delta.userId !== record.userId) continue;
        applyDelta(loaded, delta);
      }
      const local = this.#stored.get(record.userId);
      for (const grant of loaded.grants) {
        const mine = local?.grants.find((g) => g.id === grant.id);
        if (mine && mine.used > grant.used) grant.used = mine.used;
      }
      const alerted = record.alerted;
      this.#remember(loaded);
      this.#book.forget(record.userId);
      const rebuilt = this.#book.record(record.userId, this.#now());
      if (rebuilt && rebuilt.periodStart === record.periodStart && alerted > rebuilt.alerted) rebuilt.alerted = alerted;
    }
  }

  #storedUser(userId: string): LedgerUser {
    let user = this.#known(userId);
    if (!user) {
      user = { userId, periods: new Map(), grants: [] };
      this.#remember(user);
    }
    return user;
  }

  /** The user's stored state: from memory, else read from a ledger on this machine (and kept). */
  #known(userId: string): LedgerUser | undefined {
    const kept = this.#stored.get(userId);
    if (kept !== undefined || this.#ledger.readUser === undefined) return kept;
    let read: LedgerUser | undefined;
    try {
      read = this.#ledger.readUser(userId, this.#now() - LOAD_WINDOW_MS);
    } catch (error) {
      // Enforced from what is in memory meanwhile (nothing for this user); the read is tried again next time.
      this.#logger.warn({ user_id: userId, err: (error as Error).message }, 'could not read a budget from the ledger; enforcing from memory');
      return undefined;
    }
    if (read !== undefined) this.#remember(read);
    return read;
  }

  /** Keeps a user's stored state, making room first. */
  #remember(user: LedgerUser): void {
    this.#trim(this.#maxUsers - 1);
    this.#stored.set(user.userId, user);
  }

  /**
   * Drops the oldest users whose spend is written until at most `keep` are left; users with unwritten spend stay
   * (they are dropped after their write). A dropped user is read again when they come back: at once from a
   * ledger on this machine, by the next read-back from Firestore.
   */
  #trim(keep: number): void {
    if (this.#stored.size <= keep) return;
    const unwritten = new Set([...this.#pending.values(), ...(this.#unsettled?.deltas ?? [])].map((d) => d.userId));
    for (const userId of this.#stored.keys()) {
      if (this.#stored.size <= keep) break;
      if (unwritten.has(userId)) continue;
      this.#stored.delete(userId);
      this.#droppedUsers++;
    }
  }

  #storedUsage(userId: string, periodStart: number): PeriodUsage | undefined {
    const usage = this.#known(userId)?.periods.get(periodStart);
    return usage ? { ...usage } : undefined;
  }

  /** Keeps the mirror of the ledger in step with this engine's own charges. */
  #mirror(delta: SpendDelta): void {
    applyDelta(this.#storedUser(delta.userId), delta);
  }
}

function grantJson(grant: Grant): GrantJson {
  return {
    id: grant.id,
    amount_usd: unitsToUsd(grant.amount),
    remaining_usd: unitsToUsd(grant.amount - grant.used),
    reason: grant.reason,
    created_at: new Date(grant.createdAt).toISOString(),
    expires_at: grant.expiresAt === null ? null : new Date(grant.expiresAt).toISOString(),
  };
}
