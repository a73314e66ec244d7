// A sidecar's spend on its way to the operator, on the pod's disk (<state dir>/budget-outbox.db) until the
// operator acknowledges it (ADR 1302). Each finished call adds its cost to the unsent row of its (policy,
// user, period) in one small SQLite statement, so a sidecar killed right after a call still has the charge.
// Sealing gives up to MAX entries the next sequence number: that report keeps its number and content until
// it is acknowledged, however often it is resent. Acknowledged reports are deleted.

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

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

interface Row {
  policy: string;
  user_id: string;
  period_start: bigint;
  amount: bigint;
  calls: bigint;
  report_seq: bigint | null;
}

export class SpendOutbox {
  readonly path: string;
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
    this.#add = this.#db.prepare(`
      INSERT INTO spend (policy, user_id, period_start, amount, calls, report_seq) VALUES (?, ?, ?, ?, 1, NULL)
      ON CONFLICT (policy, user_id, period_start) WHERE report_seq IS NULL
      DO UPDATE SET amount = amount + excluded.amount, calls = calls + 1`);
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

  /** One call's cost; synchronous, so it is on disk before the call's span is even written. */
  add(policy: string, userId: string, periodStart: number, amount: bigint): void {
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
}

function entry(r: Row): OutboxEntry {
  return { policy: r.policy, userId: r.user_id, periodStart: Number(r.period_start), amount: r.amount, calls: Number(r.calls) };
}
