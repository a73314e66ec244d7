// A sidecar's spend on its way to the operator, on the pod's disk (<state dir>/budget-outbox.db) until the
// operator acknowledges it (ADR 1302). Each finished call adds its cost to the unsent row of its (policy,
// user, period) in one small SQLite statement, so a sidecar killed right after a call still has the charge.
// Sealing gives up to MAX entries the next sequence number: that report keeps its number and content until
// it is acknowledged, however often it is resent. Acknowledged reports are deleted.
//
// A row is a delta of spend like a ledger's (one user, policy and period, summed up from charges), and is checked
// as a ledger checks one (deltaProblem): when a charge is added, and when a start reads the rows a previous
// process left. The file is this pod's own, but it is a file on disk: a row that fails is dropped, not enforced
// here nor reported to the operator, and listed in `skipped` for the sidecar to log.

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { MAX_SPEND_UNITS } from '../../../contracts/money.ts';
import { deltaProblem } from './ledger.ts';

export interface OutboxEntry {
  policy: string;
  userId: string;
  periodStart: number;
  amount: bigint;
  calls: number;
}

export interface SealedReport {
  sequence: number;
  entries: OutboxEntry[];
}

/** A row a start found in the file and dropped. */
export interface SkippedOutboxRow {
  file: string;
  /** The row's id in the file. */
  row: number;
  /** The report it was sealed in; null: unsent. */
  sequence: number | null;
  userId: string | null;
  policy: string | null;
  problem: string;
}

interface Row {
  policy: string;
  user_id: string;
  period_start: bigint;
  amount: bigint;
  calls: bigint;
  report_seq: bigint | null;
}

/** A charge no ledger would write (deltaProblem): retrying it cannot help, unlike a disk that is full. */
export class InvalidSpendError extends Error {
  override readonly name = 'InvalidSpendError';
}

export class SpendOutbox {
  readonly path: string;
  /** Rows this process found invalid when it opened the file, and dropped. */
  readonly skipped: readonly SkippedOutboxRow[];
  readonly #db: Database.Database;
  readonly #add: Database.Statement;
  readonly #seal: (max: number) => number | null;
  readonly #ack: Database.Statement;

  constructor(path: string) {
    this.path = path;
    mkdirSync(dirname(path), { recursive: true });
    this.#db = new Database(path);
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = NORMAL');
    this.#db.pragma('busy_timeout = 0');
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS spend (
        id INTEGER PRIMARY KEY,
        policy TEXT NOT NULL,
        user_id TEXT NOT NULL,
        period_start INTEGER NOT NULL,
        amount INTEGER NOT NULL,
        calls INTEGER NOT NULL,
        report_seq INTEGER
      );
      CREATE UNIQUE INDEX IF NOT EXISTS spend_unsent ON spend (policy, user_id, period_start) WHERE report_seq IS NULL;
      CREATE INDEX IF NOT EXISTS spend_report ON spend (report_seq);
      CREATE TABLE IF NOT EXISTS outbox_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      INSERT OR IGNORE INTO outbox_meta (key, value) VALUES ('last_sequence', 0);
    `);
    this.#db.defaultSafeIntegers(true);
    this.skipped = this.#dropInvalid();
    // The sum stops at MAX_SPEND_UNITS as addSpend does, so a row stays a delta a ledger would write. Both terms are
    // at most that: a sum past 2^63 − 1 becomes a float in SQLite, which MIN still compares right.
    this.#add = this.#db.prepare(`
      INSERT INTO spend (policy, user_id, period_start, amount, calls, report_seq) VALUES (?, ?, ?, ?, 1, NULL)
      ON CONFLICT (policy, user_id, period_start) WHERE report_seq IS NULL
      DO UPDATE SET amount = MIN(amount + excluded.amount, ${MAX_SPEND_UNITS}), calls = calls + 1`);
    const last = this.#db.prepare("SELECT value FROM outbox_meta WHERE key = 'last_sequence'");
    const bump = this.#db.prepare("UPDATE outbox_meta SET value = ? WHERE key = 'last_sequence'");
    const take = this.#db.prepare('UPDATE spend SET report_seq = ? WHERE id IN (SELECT id FROM spend WHERE report_seq IS NULL ORDER BY id LIMIT ?)');
    this.#seal = this.#db.transaction((max: number): number | null => {
      const next = (last.pluck().get() as bigint) + 1n;
      const taken = take.run(next, max).changes;
      if (taken === 0) return null;
      bump.run(next);
      return Number(next);
    });
    this.#ack = this.#db.prepare('DELETE FROM spend WHERE report_seq IS NOT NULL AND report_seq <= ?');
  }

  /**
   * One call's cost; synchronous, so it is on disk before the call's span is even written. Throws, writing
   * nothing, for an amount or period a ledger would refuse (a charge is neither).
   */
  add(policy: string, userId: string, periodStart: number, amount: bigint): void {
    const problem = spendProblem(periodStart, amount);
    if (problem !== null) throw new InvalidSpendError(`spend of user ${JSON.stringify(userId)} not kept in the outbox: ${problem}`);
    this.#add.run(policy, userId, BigInt(periodStart), amount);
  }

  /** Gives up to `maxEntries` unsent rows the next sequence number; null when nothing is unsent. */
  seal(maxEntries: number): SealedReport | null {
    const sequence = this.#seal(maxEntries);
    return sequence === null ? null : this.report(sequence);
  }

  report(sequence: number): SealedReport {
    const rows = this.#db.prepare('SELECT * FROM spend WHERE report_seq = ? ORDER BY id').all(BigInt(sequence)) as Row[];
    return { sequence, entries: rows.map(entry) };
  }

  /** Sealed and not yet acknowledged, oldest first. */
  unacknowledged(): number[] {
    const seqs = this.#db.prepare('SELECT DISTINCT report_seq FROM spend WHERE report_seq IS NOT NULL ORDER BY report_seq').pluck().all() as bigint[];
    return seqs.map(Number);
  }

  /** Every row not yet acknowledged, with its report (null: unsent). */
  pending(): (OutboxEntry & { sequence: number | null })[] {
    const rows = this.#db.prepare('SELECT * FROM spend ORDER BY id').all() as Row[];
    return rows.map((r) => ({ ...entry(r), sequence: r.report_seq === null ? null : Number(r.report_seq) }));
  }

  /** Reports up to `sequence` are durable at the operator. */
  acknowledge(sequence: number): void {
    this.#ack.run(BigInt(sequence));
  }

  close(): void {
    this.#db.close();
  }

  /** Deletes the rows a ledger would not write (deltaProblem) or that are not rows add() writes; returns them. */
  #dropInvalid(): SkippedOutboxRow[] {
    const skipped: SkippedOutboxRow[] = [];
    const remove = this.#db.prepare('DELETE FROM spend WHERE id = ?');
    this.#db.transaction(() => {
      for (const raw of this.#db.prepare('SELECT * FROM spend ORDER BY id').all() as Record<string, unknown>[]) {
        const problem = rowProblem(raw);
        if (problem === null) continue;
        const text = (value: unknown) => (typeof value === 'string' ? value : null);
        const sequence = typeof raw.report_seq === 'bigint' ? Number(raw.report_seq) : null;
        skipped.push({ file: this.path, row: Number(raw.id), sequence, userId: text(raw.user_id), policy: text(raw.policy), problem });
        remove.run(raw.id);
      }
    })();
    return skipped;
  }
}

/** What a ledger would find wrong with this spend as a delta (deltaProblem), or null. */
function spendProblem(periodStart: number, amount: bigint): string | null {
  return deltaProblem({ userId: '', policy: '', periodStart, alerted: 0, split: { amount, limitPart: amount, grantParts: [] } });
}

/** What is wrong with a stored row: its shape (what add() and seal() write), or its spend. */
function rowProblem(raw: Record<string, unknown>): string | null {
  if (typeof raw.policy !== 'string' || typeof raw.user_id !== 'string') return 'has no policy or user id';
  if (typeof raw.amount !== 'bigint') return `amount ${shown(raw.amount)} is not a whole number of ledger units`;
  // Read as a number by entry(): checked here before that rounds it, so the problem names the stored value.
  if (typeof raw.period_start !== 'bigint' || !Number.isSafeInteger(Number(raw.period_start))) return `has period start ${shown(raw.period_start)}, not a time in epoch ms`;
  if (typeof raw.calls !== 'bigint' || raw.calls < 1n) return `has ${shown(raw.calls)} calls, not a count of calls`;
  if (raw.report_seq !== null && (typeof raw.report_seq !== 'bigint' || raw.report_seq < 1n || raw.report_seq > BigInt(Number.MAX_SAFE_INTEGER))) {
    return `has report ${shown(raw.report_seq)}, not a report's sequence number`;
  }
  return spendProblem(Number(raw.period_start), raw.amount);
}

/** A value SQLite returned, for a log line: an integer, a float, a text (quoted), a blob or null. */
function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint' || typeof value === 'number' || value === null) return String(value);
  return `a ${Buffer.isBuffer(value) ? 'blob' : typeof value}`;
}

function entry(r: Row): OutboxEntry {
  return { policy: r.policy, userId: r.user_id, periodStart: Number(r.period_start), amount: r.amount, calls: Number(r.calls) };
}
