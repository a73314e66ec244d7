// Where a proxy remembers the deferred results it took across restarts (ADR 0913): who submitted each batch or
// background response, how many of its result lines were charged, whether it was charged whole, and which
// output file names which batch. A SQLite file beside the span file, when spans are kept in one; a proxy whose
// spans are in memory (or in a remote store) keeps these in memory only. The reservations themselves are not
// kept: a restart gives them back, as it does every call's (ADR 1308).

import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { StorageConfig } from '../../../contracts/runtime-config.ts';
import { DeferredCharges } from './deferred-charges.ts';

export const DEFERRED_STORE_FILE = 'tollgate-deferred.db';

/** One remembered result, keyed by route and id. */
export interface DeferredRow {
  key: string;
  userId: string | null;
  projectId: string | null;
  model: string;
  chargedLines: number;
  charged: boolean;
}

export interface DeferredStore {
  /** The rows, oldest first, and the aliases (alias key → result key). */
  load(): { rows: DeferredRow[]; aliases: [string, string][] };
  put(row: DeferredRow): void;
  link(alias: string, key: string): void;
  remove(key: string): void;
  /** Closes the file (the engine's shutdown); nothing is written after it. */
  close(): void;
}

/** The registry of a proxy's deferred results, with its store when spans are kept in SQLite; a failed write is logged. */
export async function openDeferredCharges(storage: StorageConfig, logger: Logger): Promise<DeferredCharges> {
  const storeFailed = (error: unknown) => logger.error({ err: error instanceof Error ? error.message : String(error) }, 'deferred charges store failed');
  let store: DeferredStore | undefined;
  try {
    store = await openDeferredStore(storage);
  } catch (error) {
    storeFailed(error);
  }
  return new DeferredCharges({ store, storeFailed });
}

/** The store beside a SQLite span file, or undefined when spans are not kept in one. */
async function openDeferredStore(storage: StorageConfig): Promise<DeferredStore | undefined> {
  if (storage.kind !== 'sqlite' || !storage.path || storage.path === ':memory:') return undefined;
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(join(dirname(storage.path), DEFERRED_STORE_FILE));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`CREATE TABLE IF NOT EXISTS deferred_results (
    key TEXT PRIMARY KEY, user_id TEXT, project_id TEXT, model TEXT NOT NULL, charged_lines INTEGER NOT NULL, charged INTEGER NOT NULL, seq INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS deferred_aliases (alias TEXT PRIMARY KEY, key TEXT NOT NULL, seq INTEGER NOT NULL);`);
  const put = db.prepare(
    'INSERT INTO deferred_results (key, user_id, project_id, model, charged_lines, charged, seq) VALUES (@key, @userId, @projectId, @model, @chargedLines, @charged, @seq) ' +
      'ON CONFLICT (key) DO UPDATE SET charged_lines = excluded.charged_lines, charged = excluded.charged',
  );
  const link = db.prepare('INSERT OR IGNORE INTO deferred_aliases (alias, key, seq) VALUES (?, ?, ?)');
  const remove = db.prepare('DELETE FROM deferred_results WHERE key = ?');
  const removeAliases = db.prepare('DELETE FROM deferred_aliases WHERE key = ?');
  let seq = (db.prepare('SELECT max(seq) AS seq FROM deferred_results').get() as { seq: number | null }).seq ?? 0;
  return {
    load() {
      const rows = db.prepare('SELECT key, user_id, project_id, model, charged_lines, charged FROM deferred_results ORDER BY seq').all() as {
        key: string;
        user_id: string | null;
        project_id: string | null;
        model: string;
        charged_lines: number;
        charged: number;
      }[];
      const aliases = db.prepare('SELECT alias, key FROM deferred_aliases ORDER BY seq').all() as { alias: string; key: string }[];
      return {
        rows: rows.map((r) => ({ key: r.key, userId: r.user_id, projectId: r.project_id, model: r.model, chargedLines: r.charged_lines, charged: r.charged === 1 })),
        aliases: aliases.map((a) => [a.alias, a.key]),
      };
    },
    put(row) {
      put.run({ ...row, charged: row.charged ? 1 : 0, seq: ++seq });
    },
    link(alias, key) {
      link.run(alias, key, ++seq);
    },
    remove(key) {
      remove.run(key);
      removeAliases.run(key);
    },
    close() {
      db.close();
    },
  };
}
