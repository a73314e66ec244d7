// The embedded ledger: a SQLite file next to the span store (tollgate-budgets.db). Spend per user and period,
// and grants with what each has absorbed; a restarted proxy loads it and enforces the same state. Amounts
// are INTEGER ledger units, read back as bigint (safeIntegers), so nothing passes through a float.
//
// It runs on the main thread: a deduction is one small transaction per flush, and `busy_timeout` is 0 so a
// file locked by another process fails the write at once (retried by the budget engine, which logs
// `failed to deduct spend`) instead of stalling the event loop.

import { appendFileSync, existsSync, fsyncSync, mkdirSync, openSync, closeSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { isRecord } from '../../../contracts/json-record.ts';
import { MAX_SPEND_UNITS, storedUnits } from '../../../contracts/money.ts';
import type { Grant } from './budget-record.ts';
import { type BudgetLedger, type DeductionBatch, deltaProblem, type KeptReplay, type LedgerUser, refuseInvalidSpend, type SpendDelta } from './ledger.ts';

export const LEDGER_SCHEMA_VERSION = 1;
/** Batch ids are remembered this long: far longer than any retry or replay takes. */
const BATCH_ID_RETENTION_MS = 7 * 86_400_000;
const PRUNE_EVERY = 1000;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS budget_usage (
     user_id TEXT NOT NULL,
     period_start INTEGER NOT NULL,
     policy TEXT NOT NULL,
     spent INTEGER NOT NULL DEFAULT 0,
     limit_used INTEGER NOT NULL DEFAULT 0,
     alerted INTEGER NOT NULL DEFAULT 0,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (user_id, period_start)
   )`,
  // Batch ids already applied: a batch kept aside at shutdown and replayed after a crash is applied once.
  // A table an older version ignores, so the schema version does not change.
  `CREATE TABLE IF NOT EXISTS budget_batches (
     id TEXT PRIMARY KEY,
     applied_at INTEGER NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS budget_grants (
     user_id TEXT NOT NULL,
     grant_id TEXT NOT NULL,
     amount INTEGER NOT NULL,
     used INTEGER NOT NULL DEFAULT 0,
     reason TEXT,
     created_at INTEGER NOT NULL,
     expires_at INTEGER,
     PRIMARY KEY (user_id, grant_id)
   )`,
];

interface UsageRow {
  user_id: string;
  period_start: bigint;
  spent: bigint;
  limit_used: bigint;
  alerted: bigint;
}

interface GrantRow {
  user_id: string;
  grant_id: string;
  amount: bigint;
  used: bigint;
  reason: string | null;
  created_at: bigint;
  expires_at: bigint | null;
}

export class SqliteLedger implements BudgetLedger {
  readonly kind = 'sqlite' as const;
  #deductions = 0;
  readonly path: string;
  readonly #db: Database.Database;
  readonly #addUsage: Database.Statement;
  readonly #useGrant: Database.Statement;
  readonly #insertGrant: Database.Statement;
  readonly #deduct: (batch: DeductionBatch) => void;
  readonly #markBatch: Database.Statement;
  readonly #pruneBatches: Database.Statement;

  constructor(path: string) {
    this.path = path;
    mkdirSync(dirname(path), { recursive: true });
    this.#db = new Database(path);
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = NORMAL');
    this.#db.pragma('busy_timeout = 0');
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > LEDGER_SCHEMA_VERSION) {
      this.#db.close();
      throw new Error(`budget ledger ${path} has schema version ${version}; this Tollgate reads up to ${LEDGER_SCHEMA_VERSION}`);
    }
    for (const statement of SCHEMA) this.#db.exec(statement);
    this.#db.pragma(`user_version = ${LEDGER_SCHEMA_VERSION}`);
    this.#db.defaultSafeIntegers(true);
    this.#addUsage = this.#db.prepare(
      `INSERT INTO budget_usage (user_id, period_start, policy, spent, limit_used, alerted, updated_at)
       VALUES (@user, @start, @policy, @amount, @limitPart, @alerted, @now)
       ON CONFLICT (user_id, period_start) DO UPDATE SET
         spent = min(spent + excluded.spent, ${MAX_SPEND_UNITS}),
         limit_used = min(limit_used + excluded.limit_used, ${MAX_SPEND_UNITS}),
         alerted = max(alerted, excluded.alerted),
         policy = excluded.policy,
         updated_at = excluded.updated_at`,
    );
    this.#useGrant = this.#db.prepare(`UPDATE budget_grants SET used = min(used + @amount, ${MAX_SPEND_UNITS}) WHERE user_id = @user AND grant_id = @grant`);
    this.#insertGrant = this.#db.prepare(
      `INSERT INTO budget_grants (user_id, grant_id, amount, used, reason, created_at, expires_at)
       VALUES (@user, @grant, @amount, @used, @reason, @createdAt, @expiresAt)`,
    );
    this.#markBatch = this.#db.prepare('INSERT OR IGNORE INTO budget_batches (id, applied_at) VALUES (?, ?)');
    this.#pruneBatches = this.#db.prepare('DELETE FROM budget_batches WHERE applied_at < ?');
    this.#deduct = this.#db.transaction((batch: DeductionBatch) => {
      // The same check a replay of kept spend applies (replayKept): nothing but a charge's spend is written.
      refuseInvalidSpend(batch);
      const now = BigInt(Date.now());
      if (this.#markBatch.run(batch.id, now).changes === 0) return; // applied before
      for (const d of batch.deltas) {
        this.#addUsage.run({
          user: d.userId,
          start: BigInt(d.periodStart),
          policy: d.policy,
          amount: d.split.amount,
          limitPart: d.split.limitPart,
          alerted: BigInt(d.alerted),
          now,
        });
        for (const part of d.split.grantParts) this.#useGrant.run({ user: d.userId, grant: part.grantId, amount: part.amount });
      }
    });
  }

  async load(since: number): Promise<LedgerUser[]> {
    const usage = this.#db.prepare('SELECT user_id, period_start, spent, limit_used, alerted FROM budget_usage WHERE period_start >= ?').all(BigInt(since)) as UsageRow[];
    const grants = this.#db.prepare('SELECT * FROM budget_grants').all() as GrantRow[];
    return assemble(usage, grants);
  }

  async loadUser(userId: string, since: number): Promise<LedgerUser | undefined> {
    return this.readUser(userId, since);
  }

  readUser(userId: string, since: number): LedgerUser | undefined {
    const usage = this.#db
      .prepare('SELECT user_id, period_start, spent, limit_used, alerted FROM budget_usage WHERE user_id = ? AND period_start >= ?')
      .all(userId, BigInt(since)) as UsageRow[];
    const grants = this.#db.prepare('SELECT * FROM budget_grants WHERE user_id = ?').all(userId) as GrantRow[];
    return assemble(usage, grants)[0];
  }

  userIds(after: string | null, limit: number): string[] {
    const rows = this.#db
      .prepare('SELECT user_id FROM budget_usage WHERE user_id > ? UNION SELECT user_id FROM budget_grants WHERE user_id > ? ORDER BY user_id LIMIT ?')
      .all(after ?? '', after ?? '', limit) as { user_id: string }[];
    return rows.map((row) => row.user_id);
  }

  /** One transaction: it commits or rolls back, so a failed batch was not applied and may simply be retried. */
  async deduct(batch: DeductionBatch): Promise<void> {
    this.#deduct(batch);
    if (++this.#deductions % PRUNE_EVERY === 0) this.#pruneBatches.run(BigInt(Date.now() - BATCH_ID_RETENTION_MS));
  }

  /** `<ledger>.unwritten`: one JSON batch a line, amounts as decimal strings. */
  get keptPath(): string {
    return `${this.path}.unwritten`;
  }

  keep(batches: readonly DeductionBatch[]): string {
    const lines = batches.map((batch) => `${JSON.stringify(batch, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}\n`).join('');
    appendFileSync(this.keptPath, lines, { mode: 0o600 });
    const fd = openSync(this.keptPath, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return this.keptPath;
  }

  /**
   * Each line is checked as a first write is (deltaProblem): a delta that fails is skipped and reported, the
   * batch's other deltas and the file's other lines are written. The file itself is only ever this process's
   * own, but it is a file on disk: whatever it holds must not lower a spend.
   */
  async replayKept(): Promise<KeptReplay> {
    // A file left by a replay that failed half-way first (its applied batches are skipped by id), then the kept
    // one, renamed first so that batches kept while this replay runs go to a fresh file.
    const replaying = `${this.keptPath}.replaying`;
    const result: KeptReplay = { written: 0, skipped: [] };
    for (;;) {
      if (!existsSync(replaying)) {
        if (!existsSync(this.keptPath)) return result;
        renameSync(this.keptPath, replaying);
      }
      for (const [index, line] of readFileSync(replaying, 'utf8').split('\n').entries()) {
        if (line.trim() === '') continue;
        let raw: unknown;
        try {
          raw = JSON.parse(line);
        } catch {
          continue; // a line cut short by a crash while it was written: its batch was never acknowledged as kept
        }
        const skip = (batch: string | null, userId: string | null, problem: string) => result.skipped.push({ file: this.keptPath, line: index + 1, batch, userId, problem });
        if (!isRecord(raw) || typeof raw.id !== 'string' || raw.id === '' || !Array.isArray(raw.deltas)) {
          skip(isRecord(raw) && typeof raw.id === 'string' ? raw.id : null, null, 'is not a batch of spend ({"id", "deltas"})');
          continue;
        }
        const deltas: SpendDelta[] = [];
        for (const kept of raw.deltas as unknown[]) {
          const delta = keptDelta(kept);
          if (typeof delta !== 'string') deltas.push(delta);
          else skip(raw.id, isRecord(kept) && typeof kept.userId === 'string' ? kept.userId : null, delta);
        }
        if (deltas.length === 0) continue;
        this.#deduct({ id: raw.id, deltas });
        result.written++;
      }
      unlinkSync(replaying);
    }
  }

  async addGrant(userId: string, grant: Grant): Promise<void> {
    this.#insertGrant.run({
      user: userId,
      grant: grant.id,
      amount: grant.amount,
      used: grant.used,
      reason: grant.reason,
      createdAt: BigInt(grant.createdAt),
      expiresAt: grant.expiresAt === null ? null : BigInt(grant.expiresAt),
    });
  }

  async claimAlert(): Promise<boolean> {
    return true; // one process writes this file; the stored `alerted` maximum keeps restarts from repeating
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}

function assemble(usage: UsageRow[], grants: GrantRow[]): LedgerUser[] {
  const users = new Map<string, LedgerUser>();
  const user = (id: string): LedgerUser => {
    let u = users.get(id);
    if (!u) {
      u = { userId: id, periods: new Map(), grants: [] };
      users.set(id, u);
    }
    return u;
  };
  for (const row of usage) {
    // storedUnits: a sum that overflowed before sums were bounded was stored by SQLite as a float.
    user(row.user_id).periods.set(Number(row.period_start), { spent: storedUnits(row.spent), limitUsed: storedUnits(row.limit_used), alerted: Number(row.alerted) });
  }
  for (const row of grants) {
    user(row.user_id).grants.push({
      id: row.grant_id,
      amount: storedUnits(row.amount),
      used: storedUnits(row.used),
      reason: row.reason,
      createdAt: Number(row.created_at),
      expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    });
  }
  return [...users.values()];
}

/** Ledger units as keep() writes them: a decimal integer string (a sign is read, and refused by deltaProblem). */
const UNITS_TEXT = /^-?\d{1,40}$/;

function keptUnits(value: unknown): bigint | null {
  return typeof value === 'string' && UNITS_TEXT.test(value) ? BigInt(value) : null;
}

/** One delta of a kept line as keep() wrote it, or what is wrong with it: its shape, or what deltaProblem finds. */
function keptDelta(kept: unknown): SpendDelta | string {
  if (!isRecord(kept)) return 'is not a spend delta';
  const { userId, policy, periodStart, alerted, split } = kept;
  if (typeof userId !== 'string') return 'has no user id';
  if (typeof policy !== 'string') return 'has no policy';
  if (typeof periodStart !== 'number' || typeof alerted !== 'number') return 'has no period start or alert threshold';
  if (!isRecord(split) || !Array.isArray(split.grantParts)) return 'has no split of its amount';
  const amount = keptUnits(split.amount);
  const limitPart = keptUnits(split.limitPart);
  if (amount === null || limitPart === null) return `amount ${JSON.stringify(split.amount)} or limit part ${JSON.stringify(split.limitPart)} is not a whole number of ledger units`;
  const grantParts: SpendDelta['split']['grantParts'] = [];
  for (const part of split.grantParts as unknown[]) {
    const units = isRecord(part) ? keptUnits(part.amount) : null;
    if (!isRecord(part) || typeof part.grantId !== 'string' || units === null) return 'has a grant part that is not a grant id with a whole number of ledger units';
    grantParts.push({ grantId: part.grantId, amount: units });
  }
  const delta: SpendDelta = { userId, policy, periodStart, alerted, split: { amount, limitPart, grantParts } };
  return deltaProblem(delta) ?? delta;
}
