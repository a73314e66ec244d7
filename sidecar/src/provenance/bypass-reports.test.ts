// The queue of bypass entries to the operator (ADR 1605): it keeps nothing until an operator link opens it, holds
// at most its limit, counts and logs (once a minute) what it drops, and cuts strings to the operator's bounds.

import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { BypassEntryMessage } from '../../../contracts/push-protocol.ts';
import { BYPASS_QUEUE_LIMIT, BypassReportQueue } from './bypass-reports.ts';

function captured(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

function entry(pid: number, over: Partial<BypassEntryMessage> = {}): BypassEntryMessage {
  return {
    provider: 'openai',
    pid,
    binary: '/usr/bin/curl',
    container: 'app',
    destination: '162.159.140.245:443',
    connects: 1,
    firstSeenUnixMs: 1_764_410_400_000,
    lastSeenUnixMs: 1_764_410_400_000,
    ...over,
  };
}

describe('bypass report queue', () => {
  it('keeps nothing until the operator link opens it (a proxy outside a pod has no operator)', () => {
    const queue = new BypassReportQueue(captured().logger);
    queue.add(entry(1));
    expect(queue.size).toBe(0);
    expect(queue.dropped).toBe(0);
    queue.open();
    queue.add(entry(2));
    expect(queue.take(64).map((e) => e.pid)).toEqual([2]);
  });

  it('holds 256 entries while the operator is away, drops the rest with one log line a minute, and hands them out oldest first', () => {
    const { logger, lines } = captured();
    let now = 5_000_000;
    const queue = new BypassReportQueue(logger, { now: () => now });
    queue.open();
    expect(BYPASS_QUEUE_LIMIT).toBe(256);
    for (let pid = 1; pid <= 260; pid++) queue.add(entry(pid));
    expect(queue.size).toBe(256);
    expect(queue.dropped).toBe(4);
    const dropLines = () => lines.filter((l) => l.msg === 'bypass reports dropped: the queue to the operator is full');
    // the first drop is logged, the next three within the minute are not
    expect(dropLines().map((l) => [l.dropped, l.queued])).toEqual([[1, 256]]);

    now += 60_000;
    queue.add(entry(261));
    // the line stands for the three held back and this one
    expect(dropLines().map((l) => l.dropped)).toEqual([1, 4]);
    expect(queue.dropped).toBe(5);

    // 64 a report: the first report carries pids 1..64, the next 65..128
    expect(queue.take(64).map((e) => e.pid)).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
    expect(queue.take(64)[0]!.pid).toBe(65);
    expect(queue.size).toBe(128);
  });

  it('cuts a binary path, container, provider and destination to what the operator accepts', () => {
    const queue = new BypassReportQueue(captured().logger);
    queue.open();
    queue.add(entry(7, { binary: `/${'a'.repeat(999)}`, container: 'c'.repeat(80), provider: 'p'.repeat(70), destination: 'd'.repeat(70) }));
    const [cut] = queue.take(1);
    // 512, 63, 63 and 64 characters (BYPASS_REPORT_LIMITS)
    expect(cut!.binary).toBe(`/${'a'.repeat(511)}`);
    expect(cut!.container).toBe('c'.repeat(63));
    expect(cut!.provider).toBe('p'.repeat(63));
    expect(cut!.destination).toBe('d'.repeat(64));
  });
});
