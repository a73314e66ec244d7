// The per-sink worker with a scripted sink (a real AuditSink whose answers the test decides): order, bounded
// queue, retries, dead letters, the drain deadline, and the counting invariant.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mixedEvents } from '../../../test/fakes/tetragon-agent.ts';
import { DeadLetterFile } from './dead-letter.ts';
import { SinkWorker, type SinkWorkerSettings } from './sink-worker.ts';
import { type AuditRecord, type AuditSink, SinkWriteError } from './sinks/audit-sink.ts';
import { TetragonEvent } from './tetragon-protocol.ts';

const logs: Record<string, unknown>[] = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) });

/** A sink whose next answers are queued by the test; with none queued it succeeds. Records what it got. */
class ScriptedSink implements AuditSink {
  readonly kind = 'scripted';
  readonly name = 'scripted';
  readonly maxBatch: number;
  written: number[] = [];
  attempts = 0;
  answers: (Error | 'hang' | undefined)[] = [];
  #hung: (() => void)[] = [];
  constructor(maxBatch = 10) {
    this.maxBatch = maxBatch;
  }
  async write(batch: readonly AuditRecord[], signal: AbortSignal): Promise<void> {
    this.attempts++;
    const answer = this.answers.shift();
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
  return { maxEvents: 100, whenFull: 'drop_newest', retry: { maxAttempts: 3, initialMs: 1, maxMs: 2 }, failureLogIntervalMs: 60_000, ...overrides };
}

function deadLetters(): { sink: string; sequence: number; reason: string }[] {
  try {
    return readFileSync(join(dir, 'dead.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { sink: string; sequence: number; reason: string });
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
});
