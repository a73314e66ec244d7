// Worker thread that owns the SQLite write connection, so transactions and WAL checkpoints (which fsync)
// never run on the event loop that serves requests (ADR 0400).

import { parentPort, workerData } from 'node:worker_threads';
import type { Span } from './span.ts';
import { openSpanDatabase, prepareBatchInsert } from './sqlite-span-schema.ts';

export type WorkerRequest = { id: number; spans: readonly Span[] } | { close: true };
export type WorkerReply = { id: number; ok: true } | { id: number; ok: false; message: string; code: string | null };

if (parentPort !== null) {
  const port = parentPort;
  // The main thread created or upgraded the schema before starting us.
  const db = openSpanDatabase((workerData as { path: string }).path, false);
  const insertBatch = prepareBatchInsert(db);
  port.on('message', (msg: WorkerRequest) => {
    if ('close' in msg) {
      db.close();
      port.close();
      return;
    }
    let reply: WorkerReply;
    try {
      insertBatch(msg.spans);
      reply = { id: msg.id, ok: true };
    } catch (err) {
      const e = err as Error & { code?: unknown };
      reply = { id: msg.id, ok: false, message: e.message, code: typeof e.code === 'string' ? e.code : null };
    }
    port.postMessage(reply);
  });
}
