// Spans in a SQLite file (better-sqlite3, WAL). Reads run on the calling thread over their own connection.
// Writes run in a worker thread when the file is on a disk, where a commit can wait on fsync (ADR 0400), and
// on the event loop in small transactions when it is in memory (a pod's tmpfs state volume): there a write is
// CPU only, and a second isolate would cost each pod more memory than all its spans (ADR 0003).

import { existsSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Span } from './span.ts';
import { type LocalSpanStore, SpanStoreOpenError } from './span-store.ts';
import { type SpendGroupTotal, spendReport } from './spend.ts';
import { type SpendSqlDialect, spendStatement } from './spend-sql.ts';
import { COLUMN_NAMES, INSERT_SQL, openSpanDatabase, PRUNE_SQL, prepareBatchInsert, rowToSpan, spanToValues, type SpanRow } from './sqlite-span-schema.ts';
import { SPAN_WORKER_SOURCE, type SpanWorkerData, type WorkerReply, type WorkerRequest } from './sqlite-span-worker.ts';

export interface SqliteSpanStoreOptions {
  logger?: Logger;
  /**
   * `worker`: transactions run in a worker thread. `inline`: on the calling thread, INLINE_ROWS_PER_TURN rows
   * per turn of the event loop. Default: inline when the file is in memory (tmpfs, `:memory:`), else worker.
   */
  writes?: 'worker' | 'inline';
  /** Keep at most this many spans, dropping the oldest as new ones arrive; 0 (default) keeps all. */
  maxSpans?: number;
  /** Refuse to create the file (a report reads spans; it never starts an empty file). */
  mustExist?: boolean;
  /** SQLite's page cache in KiB. Default: MEMORY_FILE_PAGE_CACHE_KIB for a file in memory, else SQLite's own. */
  pageCacheKib?: number;
}

/** start_time is ISO 8601 UTC text: its prefix is the hour or the day. */
const SQLITE_SPEND: SpendSqlDialect = {
  table: 'spans',
  bucket: (bucket) => (bucket === 'hour' ? "substr(start_time, 1, 13) || ':00:00.000Z'" : "substr(start_time, 1, 10) || 'T00:00:00.000Z'"),
  param: (name) => `@${name}`,
  integer: 'INTEGER',
};

interface SpendResultRow {
  bucket?: string;
  key: string | null;
  cost_units: number | null;
  calls: number;
  total_tokens: number | null;
}

/**
 * Rows written per turn of the event loop when writes run on it: on tmpfs a row costs about 11 µs
 * (bench/span-writer.ts), so a request that arrives during a write waits at most about 0.2 ms. A batch larger
 * than this is still one transaction (all or none), written a slice per turn.
 */
export const INLINE_ROWS_PER_TURN = 16;
/** WAL pages before a checkpoint, when writes are inline: each checkpoint then copies at most ~256 KB. */
const INLINE_WAL_AUTOCHECKPOINT_PAGES = 64;
/**
 * SQLite's page cache for a span file on tmpfs or ramfs, in KiB. better-sqlite3 builds SQLite with a 16,000 KiB
 * default, a second copy of pages that are in memory already (the pod's volume): it grew to several MiB of the
 * sidecar's private memory under load. 1 MiB keeps the pages the three indexes' inserts and the ring's deletes
 * return to; 128 KiB cost a third more CPU per span written (bench/span-cache.ts, ADR 0005).
 */
export const MEMORY_FILE_PAGE_CACHE_KIB = 1024;
const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;

/** True when the file lives in memory: nothing to fsync, so a commit costs CPU only. */
function inMemoryFile(path: string): boolean {
  if (path === ':memory:' || path.includes('mode=memory')) return true;
  try {
    const { type } = statfsSync(dirname(path));
    return type === TMPFS_MAGIC || type === RAMFS_MAGIC;
  } catch {
    return false;
  }
}

/** Opens (creating or upgrading the schema of) the span file at `path`. Errors name the file. */
export function openSqliteSpanStore(path: string, options: SqliteSpanStoreOptions = {}): LocalSpanStore {
  if (options.mustExist && !path.startsWith('file:') && path !== ':memory:' && !existsSync(path)) {
    throw new SpanStoreOpenError(path, new Error('no such file (nothing has been recorded there yet)'));
  }
  const db = openSpanDatabase(path, true, options.logger);
  // rowid breaks ties between spans that started in the same millisecond: the later insert is newer.
  const selectRecent = db.prepare<[number], SpanRow>(`SELECT ${COLUMN_NAMES.join(', ')} FROM spans ORDER BY start_time DESC, rowid DESC LIMIT ?`);
  // count(*) scans a whole index; do it once and keep the number (this process is the file's only writer).
  let rows = (db.prepare<[], { n: number }>('SELECT count(*) AS n FROM spans').get() as { n: number }).n;
  const inMemoryDatabase = path === ':memory:' || path.includes('mode=memory');
  const maxSpans = options.maxSpans ?? 0;
  const memoryFile = !inMemoryDatabase && inMemoryFile(path);
  const inline = inMemoryDatabase || (options.writes ?? (memoryFile ? 'inline' : 'worker')) === 'inline';
  if (inline) db.pragma(`wal_autocheckpoint = ${INLINE_WAL_AUTOCHECKPOINT_PAGES}`);
  // An in-memory database's pages live in the cache itself: no limit applies there.
  const pageCacheKib = inMemoryDatabase ? undefined : (options.pageCacheKib ?? (memoryFile ? MEMORY_FILE_PAGE_CACHE_KIB : undefined));
  if (pageCacheKib !== undefined) db.pragma(`cache_size = -${Math.max(1, Math.floor(pageCacheKib))}`);
  const write = inline ? inlineWriter(db, maxSpans) : workerWriter(path, maxSpans);
  const counted = (n: number) => (maxSpans > 0 ? Math.min(maxSpans, n) : n);

  return {
    insertBatch(spans) {
      if (spans.length === 0) return;
      const done = write.insert(spans);
      if (done === undefined) {
        rows = counted(rows + spans.length);
        return;
      }
      return done.then(() => {
        rows = counted(rows + spans.length);
      });
    },
    recent(limit) {
      return selectRecent.all(Math.max(0, Math.trunc(limit))).map(rowToSpan);
    },
    count() {
      return rows;
    },
    async spend(query) {
      const statement = spendStatement(SQLITE_SPEND, query);
      const params: Record<string, string> = { since: statement.params.since.toISOString() };
      if (statement.params.until) params.until = statement.params.until.toISOString();
      // A window of a busy file is a long scan: it runs where the writes run, never on the event loop.
      const result = (await write.query(statement.sql, params)) as SpendResultRow[];
      return spendReport(
        query,
        result.map((r): SpendGroupTotal => ({
          ...(r.bucket === undefined ? {} : { bucket: r.bucket }),
          key: r.key,
          costUnits: r.cost_units ?? 0,
          calls: r.calls,
          totalTokens: r.total_tokens ?? 0,
        })),
      );
    },
    async close() {
      await write.close();
      if (db.open) db.close();
    },
  };
}

interface BatchWriter {
  insert(spans: readonly Span[]): void | Promise<void>;
  /** A read that may take long (a report): in the worker when there is one. */
  query(sql: string, params: Record<string, unknown>): unknown[] | Promise<unknown[]>;
  close(): Promise<void>;
}

/**
 * Transactions on the calling thread. A batch of up to INLINE_ROWS_PER_TURN rows is written at once; a larger
 * one opens its transaction, writes a slice per turn of the event loop and commits (or rolls back) at the end,
 * so the loop is never held for more than a slice and a batch is still all or none. Reads on this connection
 * meanwhile may see the rows of the open batch.
 */
function inlineWriter(db: Database.Database, maxSpans: number): BatchWriter {
  const insertAtOnce = prepareBatchInsert(db, maxSpans);
  const insert = db.prepare(INSERT_SQL);
  const prune = maxSpans > 0 ? db.prepare(PRUNE_SQL) : null;
  let inFlight: Promise<void> | null = null;
  const sliced = async (spans: readonly Span[]): Promise<void> => {
    db.exec('BEGIN IMMEDIATE');
    try {
      for (let i = 0; i < spans.length; i++) {
        if (i > 0 && i % INLINE_ROWS_PER_TURN === 0) await yieldTurn();
        insert.run(spanToValues(spans[i]!));
      }
      prune?.run(maxSpans);
      db.exec('COMMIT');
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
  return {
    insert(spans) {
      if (spans.length <= INLINE_ROWS_PER_TURN) {
        insertAtOnce(spans.map(spanToValues));
        return;
      }
      const done = sliced(spans).finally(() => {
        inFlight = null;
      });
      inFlight = done;
      return done;
    },
    query: (sql, params) => db.prepare(sql).all(params),
    async close() {
      await inFlight?.catch(() => undefined);
    },
  };
}

function workerWriter(path: string, maxSpans: number): BatchWriter {
  let worker: Worker | null = null;
  let nextId = 1;
  const pending = new Map<number, { resolve: (rows: unknown[] | undefined) => void; reject: (err: Error) => void }>();

  const failAll = (err: Error): void => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };

  const start = (): Worker => {
    const workerData: SpanWorkerData = {
      driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      path,
      insertSql: INSERT_SQL,
      pruneSql: maxSpans > 0 ? PRUNE_SQL : null,
      maxSpans,
    };
    const w = new Worker(SPAN_WORKER_SOURCE, { eval: true, workerData });
    w.on('message', (reply: WorkerReply) => {
      const p = pending.get(reply.id);
      if (p === undefined) return;
      pending.delete(reply.id);
      if (reply.ok) p.resolve(reply.rows);
      else p.reject(Object.assign(new Error(reply.message), { code: reply.code }));
      // An idle worker must not keep the process alive; a busy one must, or a flush at exit would be lost.
      if (pending.size === 0) w.unref();
    });
    w.on('error', (err: Error) => {
      if (worker === w) worker = null;
      failAll(new Error(`span writer worker failed: ${err.message}`, { cause: err }));
    });
    w.on('exit', (code) => {
      if (worker === w) worker = null;
      failAll(new Error(`span writer worker exited with code ${code}`));
    });
    return w;
  };

  const send = (request: (id: number) => WorkerRequest): Promise<unknown[] | undefined> => {
    // A worker that died is replaced on the next request; a failed batch is the writer's to retry.
    const w = worker ?? (worker = start());
    const id = nextId++;
    w.ref();
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      w.postMessage(request(id));
    });
  };

  return {
    insert(spans) {
      const rows = spans.map(spanToValues);
      return send((id) => ({ id, rows })).then(() => undefined);
    },
    async query(query, params) {
      return (await send((id) => ({ id, query, params }))) ?? [];
    },
    async close() {
      const w = worker;
      worker = null;
      if (w === null) return;
      const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      w.ref();
      w.postMessage({ close: true } satisfies WorkerRequest);
      await exited;
    },
  };
}
