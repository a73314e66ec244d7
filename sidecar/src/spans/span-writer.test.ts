import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openMemorySpanStore } from './memory-span-store.ts';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import type { Span } from './span.ts';
import { type LocalSpanStore, type SpanStore, SpanStoreWriteError } from './span-store.ts';
import { DROP_LOG_INTERVAL_MS, SpanWriter } from './span-writer.ts';
import { openSqliteSpanStore } from './sqlite-span-store.ts';

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

function capturedLogger(): { logger: pino.Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

/** A real memory store that also remembers the size of every batch it was given. */
function batchRecordingStore(): LocalSpanStore & { batches: number[] } {
  const inner = openMemorySpanStore(1000);
  const batches: number[] = [];
  return {
    batches,
    insertBatch(spans) {
      batches.push(spans.length);
      return inner.insertBatch(spans);
    },
    recent: (limit) => inner.recent(limit),
    count: () => inner.count(),
    spend: (query) => inner.spend(query),
    close: () => inner.close(),
  };
}

/** A store that never finishes a write keeps the buffer full, as one stuck behind a lock would. */
function stuckStore(): SpanStore {
  const idle = openMemorySpanStore(1);
  return { ...idle, insertBatch: () => new Promise<void>(() => {}) };
}

const turns = async (n = 5): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

const spans = (n: number): Span[] => Array.from({ length: n }, (_, i) => sampleSpan({ requestId: `r${i}` }));

let dir: string;
const writers: SpanWriter[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-writer-'));
});
afterEach(async () => {
  for (const w of writers.splice(0)) await w.close();
  rmSync(dir, { recursive: true, force: true });
});

function writer(store: SpanStore, opts: Partial<ConstructorParameters<typeof SpanWriter>[1]>, logger = pino({ level: 'silent' }), now?: () => number): SpanWriter {
  const w = new SpanWriter(store, { bufferSize: 100, batchSize: 10, flushIntervalMs: 60_000, ...opts }, logger, now);
  writers.push(w);
  return w;
}

describe('SpanWriter', () => {
  it('writes full batches on the next turns of the event loop, one transaction per batch', async () => {
    const store = batchRecordingStore();
    const w = writer(store, {});
    for (const s of spans(25)) w.record(s);
    // record() only buffers: nothing is written while the request that recorded is still running.
    expect(store.batches).toEqual([]);
    await turns();
    expect(store.batches).toEqual([10, 10]);
    expect(w.stats()).toEqual({ recorded: 25, written: 20, dropped: 0, buffered: 5, writeErrors: 0, droppedBufferFull: 0, failing: false });
    await w.flush();
    expect(store.batches).toEqual([10, 10, 5]);
    expect(
      store
        .recent(100)
        .map((s) => s.requestId)
        .sort(),
    ).toEqual(
      spans(25)
        .map((s) => s.requestId)
        .sort(),
    );
  });

  it('writes a partial batch when the flush interval passes', async () => {
    const store = batchRecordingStore();
    const w = writer(store, { flushIntervalMs: 5 });
    for (const s of spans(3)) w.record(s);
    await vi.waitFor(() => expect(store.batches).toEqual([3]));
    expect(w.stats().written).toBe(3);
  });

  it('flushes on close and drops (counted, logged) spans recorded afterwards', async () => {
    const store = batchRecordingStore();
    const { logger, lines } = capturedLogger();
    const w = writer(store, {}, logger);
    for (const s of spans(7)) w.record(s);
    await w.close();
    expect(store.count()).toBe(7);
    w.record(sampleSpan());
    expect(w.stats()).toEqual({ recorded: 7, written: 7, dropped: 1, buffered: 0, writeErrors: 0, droppedBufferFull: 1, failing: false });
    expect(lines.map((l) => l.msg)).toEqual(['span recorded after the span writer closed; dropped']);
  });

  it('drops spans beyond the buffer, counts them, and logs `span processor buffer full` rate-limited', async () => {
    const { logger, lines } = capturedLogger();
    let clock = 1_000_000;
    const w = new SpanWriter(stuckStore(), { bufferSize: 5, batchSize: 5, flushIntervalMs: 60_000 }, logger, () => clock);
    for (const s of spans(5)) w.record(s);
    await turns(); // that batch leaves for the store and never comes back: the buffer can only fill up
    for (const s of spans(8)) w.record(s); // 5 fit, 3 dropped, all within one turn
    expect(w.stats()).toMatchObject({ recorded: 10, dropped: 3, buffered: 10 });
    const full = () => lines.filter((l) => l.msg === 'span processor buffer full');
    // A burst is reported whole at the end of its turn.
    await turns(1);
    expect(full()).toHaveLength(1);
    expect(full()[0]).toMatchObject({ level: 40, dropped: 3, droppedSinceLastLog: 3, bufferSize: 5 });

    clock += DROP_LOG_INTERVAL_MS - 1;
    w.record(sampleSpan());
    await turns();
    expect(full()).toHaveLength(1);
    clock += 1;
    w.record(sampleSpan());
    await turns();
    expect(full()).toHaveLength(2);
    expect(full()[1]).toMatchObject({ dropped: 5, droppedSinceLastLog: 2 });
    expect(w.stats()).toEqual({ recorded: 10, written: 0, dropped: 5, buffered: 10, writeErrors: 0, droppedBufferFull: 5, failing: false });
    void w.close();
  });

  it('reports every drop: the end of a burst comes in the next line, at the latest when the writer closes', async () => {
    const { logger, lines } = capturedLogger();
    let clock = 1_000_000;
    // The writer's timer is faked (setImmediate is not: turns() still lets promises settle), so "it ticked" is
    // an advance of the fake clock rather than a sleep.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const w = new SpanWriter(stuckStore(), { bufferSize: 10, batchSize: 10, flushIntervalMs: 5 }, logger, () => clock);
    const full = () => lines.filter((l) => l.msg === 'span processor buffer full');
    for (const s of spans(10)) w.record(s);
    await turns(); // the first batch leaves for the store and never comes back
    for (const s of spans(1610)) w.record(s); // 10 fit, 1600 dropped in one burst
    await turns(1);
    expect(full().map((l) => l.droppedSinceLastLog)).toEqual([1600]);
    for (let i = 0; i < 30; i++) w.record(sampleSpan()); // dropping goes on
    await vi.advanceTimersByTimeAsync(20); // the writer's timer ticks; the drop-log interval has not passed
    expect(full()).toHaveLength(1);
    clock += DROP_LOG_INTERVAL_MS;
    await vi.advanceTimersByTimeAsync(5); // the next tick logs what was dropped since
    expect(full()[1]).toMatchObject({ dropped: 1630, droppedSinceLastLog: 30 });
    for (let i = 0; i < 7; i++) w.record(sampleSpan()); // the burst's tail, then quiet until close
    const closing = w.close();
    expect(full()[2]).toMatchObject({ dropped: 1637, droppedSinceLastLog: 7 });
    void closing;
  });

  it('goes through a real SQLite store in its worker thread', async () => {
    const store = openSqliteSpanStore(join(dir, 'spans.db'));
    const w = writer(store, { bufferSize: 1000, batchSize: 50 });
    for (const s of spans(260)) w.record(s);
    await w.close();
    expect(w.stats()).toEqual({ recorded: 260, written: 260, dropped: 0, buffered: 0, writeErrors: 0, droppedBufferFull: 0, failing: false });
    expect(store.count()).toBe(260);
    await store.close();
  });

  it('retries a batch once when the file is locked, and writes it once the lock is gone', async () => {
    const path = join(dir, 'spans.db');
    const store = openSqliteSpanStore(path);
    const { logger, lines } = capturedLogger();
    const w = writer(store, { batchSize: 4 }, logger);
    // Another process holds the write lock past the store's busy_timeout.
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    for (const s of spans(4)) w.record(s);
    await vi.waitFor(() => expect(w.stats().writeErrors).toBe(1), { timeout: 10_000 });
    const failure = lines.find((l) => l.msg === 'failed to write spans; will retry once');
    expect(failure).toMatchObject({ level: 50, spans: 4, writeErrors: 1 });
    expect(JSON.stringify(failure?.err)).toMatch(/locked|busy/i);
    expect(w.stats()).toMatchObject({ written: 0, dropped: 0, buffered: 4 });

    other.exec('COMMIT');
    other.close();
    await w.flush();
    expect(w.stats()).toEqual({ recorded: 4, written: 4, dropped: 0, buffered: 0, writeErrors: 1, droppedBufferFull: 0, failing: false });
    expect(store.count()).toBe(4);
    await w.close();
    await store.close();
  });

  it('drops a batch that fails twice, counting and logging it, and keeps going', async () => {
    // An inline SQLite store whose connection is gone: every write throws.
    const store = openSqliteSpanStore(join(dir, 'spans.db'), { writes: 'inline' });
    await store.close();
    const { logger, lines } = capturedLogger();
    const w = writer(store, { batchSize: 3 }, logger);
    for (const s of spans(3)) w.record(s);
    await w.flush();
    expect(w.stats()).toEqual({ recorded: 3, written: 0, dropped: 3, buffered: 0, writeErrors: 2, droppedBufferFull: 0, failing: true });
    expect(lines.map((l) => l.msg)).toEqual(['failed to write spans; will retry once', 'failed to write spans; batch dropped']);
    expect(lines[1]).toMatchObject({ level: 50, spans: 3, dropped: 3, writeErrors: 2 });
    expect(JSON.stringify(lines[1]?.err)).toMatch(/not open/);
  });

  describe('with a remote store that goes away (retryable failures)', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    /** A real memory store behind a switch: while `down`, every write fails as a remote store's would. */
    function flakyStore() {
      const inner = openMemorySpanStore(1000);
      const state = { down: true, attempts: 0 };
      const store: LocalSpanStore = {
        ...inner,
        insertBatch(batch) {
          state.attempts++;
          if (state.down) return Promise.reject(new SpanStoreWriteError('warehouse unreachable: connect ECONNREFUSED', true));
          return Promise.resolve(inner.insertBatch(batch));
        },
      };
      return { store, inner, state };
    }

    it('backs off exponentially, keeps new spans in the ring (dropping past it, counted), and writes everything once the store is back', async () => {
      vi.useFakeTimers();
      const { logger, lines } = capturedLogger();
      const { store, inner, state } = flakyStore();
      const retry = { maxAttempts: 10, initialBackoffMs: 1000, maxBackoffMs: 4000 };
      const w = writer(store, { bufferSize: 20, batchSize: 5, flushIntervalMs: 100, retry }, logger);
      for (const s of spans(5)) w.record(s);
      await vi.advanceTimersByTimeAsync(0);
      expect(state.attempts).toBe(1);
      // the second attempt waits at least half the first backoff (jitter), and at most all of it
      await vi.advanceTimersByTimeAsync(499);
      expect(state.attempts).toBe(1);
      await vi.advanceTimersByTimeAsync(1000);
      expect(state.attempts).toBe(2);
      // meanwhile calls go on: the ring takes 20, the rest are dropped and counted
      for (const s of spans(25)) w.record(s);
      expect(w.stats()).toMatchObject({ recorded: 25, dropped: 5, writeErrors: 2 });
      // backoff doubles up to its cap: at most 2 s, then 4 s, 4 s... never faster than half of that
      const before = state.attempts;
      await vi.advanceTimersByTimeAsync(10_000);
      expect(state.attempts - before).toBeGreaterThanOrEqual(2);
      expect(state.attempts - before).toBeLessThanOrEqual(5);
      state.down = false;
      await vi.advanceTimersByTimeAsync(5000);
      expect(w.stats()).toMatchObject({ recorded: 25, written: 25, dropped: 5, buffered: 0 });
      expect(inner.count()).toBe(25);
      const failures = lines.filter((l) => l.msg === 'failed to write spans; will retry');
      expect(failures[0]).toMatchObject({ level: 50, spans: 5, attempt: 1, maxAttempts: 10 });
      expect(lines.filter((l) => l.msg === 'span processor buffer full')[0]).toMatchObject({ dropped: 5 });
      expect(lines.some((l) => l.msg === 'failed to write spans; batch dropped')).toBe(false);
    });

    it('gives a batch up after maxAttempts, counted and logged, and goes on with the next', async () => {
      vi.useFakeTimers();
      const { logger, lines } = capturedLogger();
      const { store, inner, state } = flakyStore();
      const w = writer(store, { bufferSize: 20, batchSize: 5, flushIntervalMs: 100, retry: { maxAttempts: 3, initialBackoffMs: 100, maxBackoffMs: 100 } }, logger);
      for (const s of spans(5)) w.record(s);
      await vi.advanceTimersByTimeAsync(1000);
      expect(state.attempts).toBe(3);
      expect(w.stats()).toMatchObject({ written: 0, dropped: 5, writeErrors: 3 });
      expect(lines.find((l) => l.msg === 'failed to write spans; batch dropped')).toMatchObject({ spans: 5, attempts: 3, dropped: 5 });
      state.down = false;
      for (const s of spans(5)) w.record(s);
      await vi.advanceTimersByTimeAsync(200);
      expect(inner.count()).toBe(5);
      expect(w.stats()).toMatchObject({ recorded: 10, written: 5, dropped: 5, buffered: 0 });
    });

    it('does not let a store that is down hold up shutdown: close() gives up after closeTimeoutMs and counts what is left', async () => {
      vi.useFakeTimers();
      const { logger, lines } = capturedLogger();
      const { store } = flakyStore();
      const w = new SpanWriter(
        store,
        { bufferSize: 50, batchSize: 5, flushIntervalMs: 100, closeTimeoutMs: 3000, retry: { maxAttempts: 1000, initialBackoffMs: 10, maxBackoffMs: 10 } },
        logger,
      );
      for (const s of spans(12)) w.record(s);
      const closed = w.close();
      let done = false;
      void closed.then(() => (done = true));
      await vi.advanceTimersByTimeAsync(2900);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(200);
      expect(done).toBe(true);
      expect(w.stats()).toMatchObject({ recorded: 12, written: 0, dropped: 12, buffered: 0 });
      expect(lines.find((l) => l.msg === 'spans not written before shutdown; dropped')).toMatchObject({ level: 50, spans: 12, dropped: 12 });
    });
  });

  it('rejects unusable options, naming the option', () => {
    const store = openMemorySpanStore();
    expect(() => new SpanWriter(store, { bufferSize: 0, batchSize: 1, flushIntervalMs: 1 }, pino({ level: 'silent' }))).toThrow(
      'span writer bufferSize must be a positive integer, got 0',
    );
  });
});
