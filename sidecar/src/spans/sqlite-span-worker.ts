// The worker thread that owns the SQLite write connection, so transactions and WAL checkpoints (which
// fsync) never run on the event loop that serves requests (ADR 0400).
//
// Its source is plain JavaScript run with `eval`: a .ts worker would load Node's TypeScript stripper into
// the worker's isolate too (~16 MB RSS measured). It knows no schema: the main thread sends the insert
// statement once and then rows of values. Long reads (the spend report, a scan of the window) run here too,
// for the same reason: they name their own statement.

export interface SpanWorkerData {
  /** Absolute path of better-sqlite3's entry point, resolved by the main thread. */
  driver: string;
  path: string;
  insertSql: string;
  /** Statement that drops rows beyond `maxSpans`; null keeps everything. */
  pruneSql: string | null;
  maxSpans: number;
}
export type WorkerRequest = { id: number; rows: unknown[][] } | { id: number; query: string; params: Record<string, unknown> } | { close: true };
export type WorkerReply = { id: number; ok: true; rows?: unknown[] } | { id: number; ok: false; message: string; code: string | null };

export const SPAN_WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('busy_timeout = 1000');
const insert = db.prepare(workerData.insertSql);
const prune = workerData.pruneSql ? db.prepare(workerData.pruneSql) : null;
const insertAll = db.transaction((rows) => { for (const row of rows) insert.run(row); if (prune) prune.run(workerData.maxSpans); });
parentPort.on('message', (msg) => {
  if (msg.close) { db.close(); parentPort.close(); return; }
  try {
    if (msg.query) {
      parentPort.postMessage({ id: msg.id, ok: true, rows: db.prepare(msg.query).all(msg.params) });
      return;
    }
    insertAll(msg.rows);
    parentPort.postMessage({ id: msg.id, ok: true });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, message: String(err && err.message), code: typeof err?.code === 'string' ? err.code : null });
  }
});
`;
