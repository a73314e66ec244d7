import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { runWorkers, WorkQueue } from './work-queue.ts';

describe('WorkQueue', () => {
  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands a key being processed to a second worker; an add meanwhile requeues it after done', async () => {
    const q = new WorkQueue();
    q.add('a');
    const first = await q.get();
    q.add('a');
    expect(q.length).toBe(0);
    q.done(first!);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('a');
  });

  it('gives a waiting worker the next key added', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.add('x');
    expect(await waiting).toBe('x');
  });

  it('backs off per key, doubling with each failure, and forget() starts over', () => {
    const q = new WorkQueue({ baseMs: 5, maxMs: 1_000_000 });
    expect([q.addRateLimited('a'), q.addRateLimited('a'), q.addRateLimited('a')]).toEqual([5, 10, 20]);
    expect(q.addRateLimited('b')).toBe(5);
    q.forget('a');
    expect(q.addRateLimited('a')).toBe(5);
    q.shutDown();
  });

  it('keeps the earliest of several delayed adds of one key', async () => {
    vi.useFakeTimers();
    try {
      const q = new WorkQueue();
      q.addAfter('a', 60_000);
      q.addAfter('a', 10);
      vi.advanceTimersByTime(9);
      expect(q.length).toBe(0);
      vi.advanceTimersByTime(1);
      expect(q.length).toBe(1);
      expect(await q.get()).toBe('a');
      q.shutDown();
    } finally {
      vi.useRealTimers();
    }
  });

  it('releases waiting workers on shutdown', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
  });
});

describe('runWorkers', () => {
  it('runs distinct keys in parallel but one key never concurrently, and retries failures', async () => {
    const q = new WorkQueue({ baseMs: 1, maxMs: 10 });
    const active = new Set<string>();
    let overlap = false;
    let maxParallel = 0;
    const calls: string[] = [];
    let failuresLeft = 2;
    // Each reconcile runs until the test releases it, so the test decides what overlaps, not the clock.
    const running = new Map<string, () => void>();
    const called = new EventEmitter();
    const callsOf = (key: string) => calls.filter((k) => k === key).length;
    const whenCalled = (key: string, times: number) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (callsOf(key) < times) return;
          called.off('call', check);
          resolve();
        };
        called.on('call', check);
        check();
      });
    const release = (key: string) => {
      const finish = running.get(key);
      if (!finish) throw new Error(`${key} is not running`);
      running.delete(key);
      finish();
    };
    const workers = runWorkers(
      q,
      4,
      async (key) => {
        if (active.has(key)) overlap = true;
        active.add(key);
        maxParallel = Math.max(maxParallel, active.size);
        calls.push(key);
        await new Promise<void>((resolve) => {
          running.set(key, resolve);
          called.emit('call');
        });
        active.delete(key);
        if (key === 'flaky' && failuresLeft-- > 0) throw new Error('boom');
      },
      () => {},
    );
    q.add('a');
    q.add('b');
    q.add('flaky');
    await Promise.all([whenCalled('a', 1), whenCalled('b', 1), whenCalled('flaky', 1)]);
    q.add('a'); // while 'a' runs
    release('a');
    await whenCalled('a', 2);
    release('a');
    release('b');
    for (let attempt = 1; attempt <= 3; attempt++) {
      await whenCalled('flaky', attempt); // attempts 2 and 3 come after the rate limiter's delay
      release('flaky');
    }
    await workers.stop();
    expect(overlap).toBe(false);
    expect(maxParallel).toBeGreaterThan(1);
    expect(calls.filter((k) => k === 'a')).toHaveLength(2);
    expect(calls.filter((k) => k === 'flaky')).toHaveLength(3);
    expect(q.failures('flaky')).toBe(0);
  });
});

describe('work queue observer', () => {
  it('reports how long keys waited and how each reconcile ended', async () => {
    const waits: number[] = [];
    const outcomes: string[] = [];
    let retries = 0;
    let threeDone!: () => void;
    const finished = new Promise<void>((resolve) => (threeDone = resolve));
    const observer = {
      waited: (s: number) => waits.push(s),
      reconciled: (o: string) => {
        outcomes.push(o);
        if (outcomes.length === 3) threeDone();
      },
      retried: () => retries++,
    };
    const queue = new WorkQueue({ baseMs: 1, maxMs: 1 }, observer);
    let failFirst = true;
    const workers = runWorkers(
      queue,
      1,
      async (key) => {
        if (key === 'ns/flaky' && failFirst) {
          failFirst = false;
          throw new Error('conflict');
        }
        return key === 'ns/periodic' ? { requeueAfterMs: 60_000 } : undefined;
      },
      () => undefined,
    );
    queue.add('ns/flaky');
    queue.add('ns/periodic');
    await finished;
    await workers.stop();
    expect(outcomes).toEqual(['error', 'requeue_after', 'success']);
    expect(retries).toBe(1);
    // ns/flaky twice (added, then re-added after its failure) and ns/periodic once.
    expect(waits).toHaveLength(3);
    for (const w of waits) expect(w).toBeGreaterThanOrEqual(0);
  });
});
