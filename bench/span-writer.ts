// How long does writing spans to SQLite hold the event loop at 500 spans/s, when the SpanWriter's batches
// run as transactions on the main thread (`writes: 'inline'`) versus in the store's worker thread (the
// default)? Reports main-thread time per batch (percentiles), share of wall time, and the event-loop delay
// histogram. Usage:
//   node bench/span-writer.ts [seconds=20]
// Decision record: docs/decisions/0400-span-writes-on-main-thread.md.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { sampleSpan } from '../test/support/sample-span.ts';
import type { Span } from '../sidecar/src/spans/span.ts';
import type { SpanStore } from '../sidecar/src/spans/span-store.ts';
import { SpanWriter } from '../sidecar/src/spans/span-writer.ts';
import { openSqliteSpanStore } from '../sidecar/src/spans/sqlite-span-store.ts';

const seconds = Number(process.argv[2] ?? 20);
const RATE = 500;
const opts = { bufferSize: 10_000, batchSize: 100, flushIntervalMs: 200 };

const logger = pino({ level: 'warn' });

function makeSpan(i: number): Span {
  return sampleSpan({ userId: `user-${i % 50}`, requestId: `req-${i}`, startTime: new Date().toISOString() });
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function run(mode: 'main' | 'worker'): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-'));
  const path = join(dir, 'spans.db');
  const inner = openSqliteSpanStore(path, { writes: mode === 'main' ? 'inline' : 'worker' });
  // Time what the main thread spends per batch: the SQLite transaction, or the structured clone to the worker.
  const blocked: number[] = [];
  const timed: SpanStore = {
    ...inner,
    insertBatch(spans) {
      const t = performance.now();
      const done = inner.insertBatch(spans);
      blocked.push(performance.now() - t);
      return done;
    },
  };
  const writer = new SpanWriter(timed, opts, logger);
  await new Promise((r) => setTimeout(r, 300)); // let the worker start
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const total = seconds * RATE;
  const start = performance.now();
  let i = 0;
  // Paced by timers (not a busy loop) so the worker variant is not starved of the second core.
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * RATE) / 1000));
      for (; i < due; i++) writer.record(makeSpan(i));
      if (i >= total) resolve();
      else setTimeout(tick, 2);
    };
    tick();
  });
  h.disable();
  await writer.close();
  await inner.close();
  const check = openSqliteSpanStore(path);
  const stored = check.count();
  await check.close();
  rmSync(dir, { recursive: true, force: true });
  blocked.sort((a, b) => a - b);
  const f = (n: number): string => n.toFixed(3);
  const busy = blocked.reduce((a, b) => a + b, 0);
  console.log(
    `${mode.padEnd(6)} spans=${i} stored=${stored} batches=${blocked.length} main-thread ms per batch ` +
      `p50=${f(pct(blocked, 50))} p99=${f(pct(blocked, 99))} max=${f(blocked.at(-1) ?? 0)} ` +
      `busy=${((busy / (seconds * 1000)) * 100).toFixed(2)}% | loop delay ms p99=${f(h.percentile(99) / 1e6)} max=${f(h.max / 1e6)}`,
  );
}

for (const mode of ['main', 'worker', 'main', 'worker'] as const) await run(mode);
