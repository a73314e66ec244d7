// What each span store costs the event loop that serves requests: spans recorded at a fixed rate through the
// SpanWriter into memory (the baseline), SQLite (worker thread), DuckDB (thread pool), BigQuery and Firestore
// (their local emulators, test/emulators). Reports the main thread's event-loop utilisation, its extra active
// time per span over the memory baseline (everything the store makes the main thread do, asynchronous
// continuations and request encoding included), and the event-loop delay. Usage:
//   node bench/span-stores.ts [seconds=10] [rate=500] [stores=memory,sqlite,duckdb,bigquery,firestore]
// Results: BENCHMARKS.md ("Span stores"). Decision: docs/decisions/0402-span-stores.md.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import pino from 'pino';
import { openBigQuerySpanStore } from '../sidecar/src/spans/bigquery-span-store.ts';
import { openDuckDbSpanStore } from '../sidecar/src/spans/duckdb-span-store.ts';
import { openFirestoreSpanStore } from '../sidecar/src/spans/firestore-span-store.ts';
import { openMemorySpanStore } from '../sidecar/src/spans/memory-span-store.ts';
import { REMOTE_STORE_RETRY } from '../sidecar/src/spans/open-span-store.ts';
import { sampleSpan } from '../test/support/sample-span.ts';
import type { SpanStore } from '../sidecar/src/spans/span-store.ts';
import { SpanWriter } from '../sidecar/src/spans/span-writer.ts';
import { openSqliteSpanStore } from '../sidecar/src/spans/sqlite-span-store.ts';
import { startBigQueryEmulator } from '../test/emulators/bigquery.ts';
import { startFirestoreEmulator } from '../test/emulators/firestore.ts';

const seconds = Number(process.argv[2] ?? 10);
const rate = Number(process.argv[3] ?? 500);
const kinds = (process.argv[4] ?? 'memory,sqlite,duckdb,bigquery,firestore').split(',');
const opts = { bufferSize: 10_000, batchSize: 200, flushIntervalMs: 200 };
const logger = pino({ level: 'warn' });
process.env.METADATA_SERVER_DETECTION = 'none';

async function measure(name: string, store: SpanStore, remote: boolean): Promise<{ activeMs: number; spans: number }> {
  const writer = new SpanWriter(store, remote ? { ...opts, retry: REMOTE_STORE_RETRY } : opts, logger);
  // a first batch pays the one-off costs (worker start, table creation, connections)
  for (let i = 0; i < 10; i++) writer.record(sampleSpan());
  await writer.flush();
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const before = performance.eventLoopUtilization();
  const total = seconds * rate;
  const start = performance.now();
  let i = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000));
      for (; i < due; i++) writer.record(sampleSpan({ userId: `user-${i % 50}`, requestId: `req-${i}`, startTime: new Date().toISOString() }));
      if (i >= total) resolve();
      else setTimeout(tick, 2);
    };
    tick();
  });
  await writer.flush();
  const elu = performance.eventLoopUtilization(before);
  delay.disable();
  const stats = writer.stats();
  await writer.close();
  await store.close();
  console.log(
    `${name.padEnd(9)} spans=${i} written=${stats.written - 10} dropped=${stats.dropped} | event loop busy ${(elu.utilization * 100).toFixed(2)}% ` +
      `(${elu.active.toFixed(0)} ms) | loop delay ms p99=${(delay.percentile(99) / 1e6).toFixed(2)} max=${(delay.max / 1e6).toFixed(2)}`,
  );
  return { activeMs: elu.active, spans: i };
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-stores-'));
const results = new Map<string, { activeMs: number; spans: number }>();
try {
  for (const kind of kinds) {
    if (kind === 'memory') results.set(kind, await measure(kind, openMemorySpanStore(opts.bufferSize), false));
    if (kind === 'sqlite') results.set(kind, await measure(kind, openSqliteSpanStore(join(dir, 'spans.db')), false));
    if (kind === 'duckdb') results.set(kind, await measure(kind, await openDuckDbSpanStore(join(dir, 'spans.duckdb')), false));
    if (kind === 'bigquery') {
      const bq = await startBigQueryEmulator();
      try {
        results.set(
          kind,
          await measure(kind, openBigQuerySpanStore({ projectId: bq.projectId, dataset: 'bench', table: 'spans', apiEndpoint: bq.endpoint }, { logger, prepare: true }), true),
        );
      } finally {
        await bq.stop();
      }
    }
    if (kind === 'firestore') {
      const fs = await startFirestoreEmulator();
      process.env.FIRESTORE_EMULATOR_HOST = fs.host;
      try {
        results.set(kind, await measure(kind, openFirestoreSpanStore({ projectId: fs.projectId, collection: 'bench' }, { logger }), true));
      } finally {
        await fs.stop();
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const base = results.get('memory');
if (base) {
  for (const [kind, r] of results) {
    if (kind !== 'memory') console.log(`${kind.padEnd(9)} main-thread time per span over memory: ${(((r.activeMs - base.activeMs) * 1000) / r.spans).toFixed(1)} µs`);
  }
}
process.exit(0);
