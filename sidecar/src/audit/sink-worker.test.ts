// The per-sink worker with a scripted sink (a real AuditSink whose answers the test decides): order, a queue
// bounded by events and by bytes, retries, dead letters (a batch too large for one string among them), a sink
// that is down, the drain deadline, and the counting invariant.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait-for.ts';
import { fakeEvent, mixedEvents } from '../../../test/fakes/tetragon-agent.ts';
import { DeadLetterFile } from './dead-letter.ts';
import { SinkWorker, type SinkWorkerSettings } from './sink-worker.ts';
import { type AuditRecord, type AuditSink, SinkWriteError } from './sinks/audit-sink.ts';
import { TetragonEvent } from './tetragon-protocol.ts';

const logs: Record<string, unknown>[] = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) });

/**
 * A sink whose next answers are queued by the test; with none queued it succeeds, or fails with `failing`
 * when set (a collector that is down). Records what it got.
 */
class ScriptedSink implements AuditSink {
  readonly kind = 'scripted';
  readonly name = 'scripted';
  readonly maxBatch: number;
  written: number[] = [];
  attempts = 0;
  answers: (Error | 'hang' | undefined)[] = [];
  failing: Error | undefined;
  #hung: (() => void)[] = [];
  constructor(maxBatch = 10) {
    this.maxBatch = maxBatch;
  }
  async write(batch: readonly AuditRecord[], signal: AbortSignal): Promise<void> {
    this.attempts++;
    const answer = this.answers.shift() ?? this.failing;
    if (answer === 'hang') {
      await new Promise<void>((resolve) => {
        this.#hung.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      if (signal.aborted) throw new Error('aborted');
    } else if (answer) throw answer;
    this.written.push(...batch.map((r) => r.sequence));
  }
  async close(): Promise<void> {}
}

let dir: string;
let sequence = 0;
const events = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 4).map((raw) => new TetragonEvent(raw));
const record = (): AuditRecord => ({ sequence: ++sequence, receivedAt: Date.now(), event: events[sequence % events.length]! });

function settings(overrides: Partial<SinkWorkerSettings> = {}): SinkWorkerSettings {
  return { maxEvents: 100, maxBytes: 1 << 20, whenFull: 'drop_newest', retry: { maxAttempts: 3, initialMs: 1, maxMs: 2 }, failureLogIntervalMs: 60_000, ...overrides };
}

function deadLetters(): { sink: string; sequence: number; reason: string; attempts: number }[] {
  try {
    return readFileSync(join(dir, 'dead.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { sink: string; sequence: number; reason: string; attempts: number });
  } catch {
    return [];
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-sink-worker-'));
  logs.length = 0;
  sequence = 0;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('SinkWorker', () => {
  it('delivers in arrival order, in batches of at most maxBatch', async () => {
    const sink = new ScriptedSink(4);
    const worker = new SinkWorker(sink, settings(), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }), logger);
    for (let i = 0; i < 25; i++) worker.offer(record());
    await worker.drain(Date.now() + 5_000);
    expect(sink.written).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(worker.status()).toMatchObject({ received: 25, delivered: 25, dropped: 0, deadLettered: 0, queueDepth: 0, inFlight: 0 });
  });

  it('retries a failed batch with the same events, then succeeds; counts each retried event', async () => {
    const sink = new ScriptedSink(10);
    sink.answers = [new Error('collector busy'), new SinkWriteError('again', true)];
    const worker = new SinkWorker(sink, settings(), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }), logger);
    worker.offer(record());
    await worker.drain(Date.now() + 5_000);
    expect(sink.attempts).toBe(3);
    expect(worker.status()).toMatchObject({ received: 1, delivered: 1, retried: 2, failures: 2, deadLettered: 0, lastError: 'again' });
    const failed = logs.filter((l) => l.msg === 'audit sink write failed');
    expect(failed).toHaveLength(1); // rate-limited
    expect(failed[0]).toMatchObject({ sink: 'scripted', err: 'collector busy', attempt: 1, willRetry: true });
  });

  it('dead-letters a batch after the last attempt, and at once when the error is not retryable', async () => {
    const sink = new ScriptedSink(1);
    sink.answers = [new Error('down'), new Error('down'), new Error('down'), new SinkWriteError('schema mismatch', false)];
    const worker = new SinkWorker(sink, settings(), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }), logger);
    worker.offer(record());
    worker.offer(record());
    worker.offer(record());
    await worker.drain(Date.now() + 5_000);
    expect(worker.status()).toMatchObject({ received: 3, delivered: 1, deadLettered: 2, retried: 2, failures: 4 });
    expect(deadLetters().map((d) => [d.sequence, d.reason])).toEqual([
      [1, 'gave up after 3 attempts: down'],
      [2, 'not retryable: schema mismatch'],
    ]);
    expect(sink.written).toEqual([3]);
  });

  it('drops newest (or oldest) when the queue is full, counting and logging the drops', async () => {
    for (const whenFull of ['drop_newest', 'drop_oldest'] as const) {
      const sink = new ScriptedSink(100);
      sink.answers = ['hang'];
      sequence = 0;
      const worker = new SinkWorker(sink, settings({ maxEvents: 3, whenFull }), new DeadLetterFile({ path: join(dir, `dead-${whenFull}.jsonl`), maxBytes: 1 << 20 }), logger);
      worker.offer(record()); // taken by the hanging write
      await new Promise((r) => setImmediate(r));
      for (let i = 0; i < 5; i++) worker.offer(record());
      expect(worker.status()).toMatchObject({ received: 6, dropped: 2, queueDepth: 3, inFlight: 1 });
      await worker.drain(Date.now() + 50);
      const s = worker.status();
      expect(s.delivered + s.dropped + s.deadLettered).toBe(s.received);
      expect(logs.some((l) => l.msg === 'audit events dropped' && String(l.reason).includes(whenFull))).toBe(true);
      if (whenFull === 'drop_newest') expect(sink.written).toEqual([]);
    }
  });

  it('at the drain deadline dead-letters the batch in flight and everything queued, in order', async () => {
    const sink = new ScriptedSink(2);
    sink.answers = ['hang'];
    const worker = new SinkWorker(sink, settings(), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }), logger);
    for (let i = 0; i < 5; i++) worker.offer(record());
    await worker.drain(Date.now() + 100);
    expect(worker.status()).toMatchObject({ received: 5, delivered: 0, deadLettered: 5, queueDepth: 0, inFlight: 0 });
    expect(deadLetters().map((d) => d.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(deadLetters()[0]!.reason).toMatch(/drain deadline/);
    // events offered after the drain began are counted as dropped, not lost
    worker.offer(record());
    expect(worker.status()).toMatchObject({ received: 6, dropped: 1 });
  });

  it('counts events as dropped when the dead-letter file is full', async () => {
    const sink = new ScriptedSink(1);
    sink.answers = [new SinkWriteError('refused', false), new SinkWriteError('refused', false)];
    const worker = new SinkWorker(sink, settings(), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1500 }), logger);
    worker.offer(record());
    worker.offer(record());
    await worker.drain(Date.now() + 5_000);
    const s = worker.status();
    expect(s.deadLettered).toBe(1);
    expect(s.dropped).toBe(1);
    expect(logs.some((l) => l.msg === 'audit events dropped' && String(l.reason).includes('is full'))).toBe(true);
  });

  it('bounds the queue by bytes too: past maxBytes, queued and in flight together, events are dropped per whenFull and counted', async () => {
    const big = new TetragonEvent(fakeEvent({ namespace: 'team-a', pod: 'web-1', extraBytes: 64 * 1024 }));
    const size = big.raw.length;
    const bigRecord = (): AuditRecord => ({ sequence: ++sequence, receivedAt: Date.now(), event: big });
    for (const whenFull of ['drop_newest', 'drop_oldest'] as const) {
      const sink = new ScriptedSink(1);
      sink.answers = ['hang'];
      sequence = 0;
      // Room for four of these events; the event bound (100) is far away.
      const worker = new SinkWorker(
        sink,
        settings({ maxBytes: 4 * size + 100, whenFull }),
        new DeadLetterFile({ path: join(dir, `dead-${whenFull}.jsonl`), maxBytes: 1 << 20 }),
        logger,
      );
      worker.offer(bigRecord()); // taken by the hanging write: in flight, still held
      await waitFor('the first write', () => sink.attempts === 1);
      for (let i = 0; i < 10; i++) worker.offer(bigRecord());
      const s = worker.status();
      expect(s).toMatchObject({ received: 11, dropped: 7, queueDepth: 3, inFlight: 1, queueBytes: 3 * size, inFlightBytes: size });
      expect(s.queueBytes + s.inFlightBytes).toBeLessThanOrEqual(4 * size + 100);
      expect(logs.some((l) => l.msg === 'audit events dropped' && String(l.reason).includes(`${4 * size + 100} bytes, ${whenFull}`))).toBe(true);
      // an event larger than the whole bound can never be queued, whatever the policy
      const huge = new TetragonEvent(fakeEvent({ namespace: 'team-a', pod: 'web-1', extraBytes: 5 * size }));
      worker.offer({ sequence: ++sequence, receivedAt: Date.now(), event: huge });
      expect(worker.status()).toMatchObject({ received: 12, dropped: 8, queueDepth: 3 });
      await worker.drain(Date.now() + 50);
      const end = worker.status();
      expect(end.delivered + end.dropped + end.deadLettered).toBe(end.received);
      expect(end).toMatchObject({ queueBytes: 0, inFlightBytes: 0 });
      // drop_newest kept the first events, drop_oldest the latest
      const kept = readFileSync(join(dir, `dead-${whenFull}.jsonl`), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { sequence: number }).sequence);
      expect(kept).toEqual(whenFull === 'drop_newest' ? [1, 2, 3, 4] : [1, 9, 10, 11]);
    }
  });

  it('dead-letters a batch too large for one string line by line, as many events as the file has room for, and keeps going', async () => {
    // 60 events of 9 MiB: the batch's dead-letter lines together are longer than the longest string V8 holds.
    const huge = new TetragonEvent(fakeEvent({ namespace: 'team-a', pod: 'web-1', extraBytes: 9 * 1024 * 1024 }));
    const sink = new ScriptedSink(100);
    sink.answers = [new SinkWriteError('collector refused the batch', false)];
    const worker = new SinkWorker(sink, settings({ maxBytes: 2 ** 40 }), new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 50 * 1024 * 1024 }), logger);
    for (let i = 0; i < 60; i++) worker.offer({ sequence: ++sequence, receivedAt: Date.now(), event: huge });
    await waitFor('the batch to be counted', () => worker.status().inFlight === 0 && worker.status().queueDepth === 0 && worker.status().received === 60);
    worker.offer(record()); // the worker is alive and delivers the next event
    await worker.drain(Date.now() + 5_000);
    const s = worker.status();
    const lines = readFileSync(join(dir, 'dead.jsonl'), 'utf8').split('\n').filter(Boolean);
    // each line is about 9 × 4/3 + 9 = 21 MiB: two fit in 50 MiB, the 58 others are dropped and counted
    expect(lines).toHaveLength(2);
    expect(s).toMatchObject({ received: 61, deadLettered: 2, dropped: 58, delivered: 1 });
    for (const line of lines) {
      const entry = JSON.parse(line) as { tetragon_event_base64: string; event: unknown; reason: string };
      expect(Buffer.from(entry.tetragon_event_base64, 'base64').equals(huge.raw)).toBe(true);
      expect(entry.event).toEqual(JSON.parse(huge.json()));
      expect(entry.reason).toBe('not retryable: collector refused the batch');
    }
    expect(logs.some((l) => l.msg === 'audit events dropped' && String(l.reason).includes('is full'))).toBe(true);
    expect(sink.written).toEqual([61]);
  });

  it('a sink that failed a batch through its retries is down: its batches go to the dead-letter file without attempts, a probe now and then, until one is delivered', async () => {
    const sink = new ScriptedSink(5);
    sink.failing = new SinkWriteError('UNAVAILABLE: connection refused', true);
    const worker = new SinkWorker(
      sink,
      settings({ retry: { maxAttempts: 3, initialMs: 1, maxMs: 1_000 } }),
      new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }),
      logger,
    );
    for (let i = 0; i < 5; i++) worker.offer(record());
    await waitFor('the first batch dead-lettered', () => worker.status().deadLettered === 5);
    expect(worker.status()).toMatchObject({ down: true, failures: 3 });
    expect(worker.status().downSince).toBeDefined();
    expect(Date.parse(worker.status().nextProbeAt!)).toBeGreaterThanOrEqual(Date.parse(worker.status().downSince!));
    expect(logs.filter((l) => String(l.msg).startsWith('audit sink down'))).toHaveLength(1);

    // While down: 40 events in 8 batches, none retried: each batch goes straight to the file or gets one probe.
    for (let i = 0; i < 40; i++) worker.offer(record());
    await waitFor('all 45 dead-lettered', () => worker.status().deadLettered === 45);
    const whileDown = deadLetters().slice(5);
    expect(whileDown).toHaveLength(40);
    for (const d of whileDown) {
      expect(d.attempts).toBeLessThanOrEqual(1);
      expect(d.reason).toMatch(d.attempts === 0 ? /^sink down since .*: UNAVAILABLE: connection refused$/ : /^sink down, probe failed: UNAVAILABLE/);
    }
    expect(sink.attempts - 3).toBe(new Set(whileDown.filter((d) => d.attempts === 1).map((d) => Math.ceil((d.sequence - 5) / 5))).size);
    expect(worker.status()).toMatchObject({ dropped: 0, retried: 10 });

    // Back: the next probe is delivered and the sink is up again.
    sink.failing = undefined;
    const delivered = await waitFor('a probe to be delivered', () => {
      worker.offer(record());
      return worker.status().delivered > 0 && worker.status();
    });
    expect(delivered.down).toBe(false);
    expect(logs.find((l) => l.msg === 'audit sink delivering again')).toMatchObject({ sink: 'scripted' });
    await worker.drain(Date.now() + 5_000);
    const end = worker.status();
    expect(end.dropped).toBe(0);
    expect(end.delivered + end.deadLettered).toBe(end.received);
  });

  it('a batch being retried while the queue fills past half gives up at once and marks the sink down, so nothing is dropped', async () => {
    const sink = new ScriptedSink(10);
    sink.failing = new SinkWriteError('DEADLINE_EXCEEDED', true);
    // A backoff of up to a minute: without the early give-up the queue (20 events) would overflow meanwhile.
    const worker = new SinkWorker(
      sink,
      settings({ maxEvents: 20, retry: { maxAttempts: 8, initialMs: 60_000, maxMs: 60_000 } }),
      new DeadLetterFile({ path: join(dir, 'dead.jsonl'), maxBytes: 1 << 20 }),
      logger,
    );
    worker.offer(record());
    await waitFor('the first attempt', () => sink.attempts === 1);
    for (let i = 0; i < 10; i++) worker.offer(record());
    await waitFor('the first batch dead-lettered', () => worker.status().deadLettered >= 1);
    expect(deadLetters()[0]).toMatchObject({ sequence: 1, attempts: 1, reason: 'gave up after 1 attempts, queue half full: DEADLINE_EXCEEDED' });
    expect(worker.status().down).toBe(true);
    // Down: each event is dead-lettered as it comes, however many come.
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 5; i++) worker.offer(record());
      await waitFor('the queue to be emptied', () => worker.status().queueDepth === 0 && worker.status().inFlight === 0);
    }
    await worker.drain(Date.now() + 5_000);
    expect(worker.status()).toMatchObject({ received: 41, deadLettered: 41, dropped: 0 });
  });
});
