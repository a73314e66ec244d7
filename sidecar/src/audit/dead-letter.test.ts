// The dead-letter file on a real file: a batch of large events is written in pieces and reads back line for
// line, byte for byte; the file bound is kept per event; a line cut short by an earlier run does not swallow
// the next one.

import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeEvent, mixedEvents } from '../../../test/fakes/tetragon-agent.ts';
import { DeadLetterFile } from './dead-letter.ts';
import type { AuditRecord } from './sinks/audit-sink.ts';
import { TetragonEvent } from './tetragon-protocol.ts';

interface Entry {
  sink: string;
  reason: string;
  attempts: number;
  sequence: number;
  event_type: string;
  tetragon_event_base64: string;
  event: unknown;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-dead-letter-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function entries(path: string): Entry[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Entry);
}

const records = (events: TetragonEvent[], from = 1): AuditRecord[] => events.map((event, i) => ({ sequence: from + i, receivedAt: Date.now(), event }));

describe('DeadLetterFile', () => {
  it('writes a batch of large and small events whole, each line the agent bytes and the protojson of its event', async () => {
    const events = [
      ...mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 3),
      fakeEvent({ namespace: 'team-a', pod: 'web-1', extraBytes: 3 * 1024 * 1024 + 1 }), // several base64 pieces, not a multiple of 3
      ...mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 2),
      fakeEvent({ namespace: 'team-a', pod: 'web-1', extraBytes: 2 * 1024 * 1024 }),
    ].map((raw) => new TetragonEvent(raw));
    const path = join(dir, 'dead.jsonl');
    const file = new DeadLetterFile({ path, maxBytes: 1 << 30 });
    expect(await file.write('collector', 'gave up after 3 attempts: UNAVAILABLE', 3, records(events))).toEqual({ written: events.length });
    await file.close();
    const written = entries(path);
    expect(written.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    written.forEach((e, i) => {
      expect(e).toMatchObject({ sink: 'collector', reason: 'gave up after 3 attempts: UNAVAILABLE', attempts: 3, event_type: events[i]!.info.type });
      expect(Buffer.from(e.tetragon_event_base64, 'base64').equals(events[i]!.raw)).toBe(true);
      expect(e.event).toEqual(JSON.parse(events[i]!.json()));
    });
  });

  it('keeps its bound per event: the events that fit are written, the rest are named as not written', async () => {
    const events = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 10).map((raw) => new TetragonEvent(raw));
    const path = join(dir, 'dead.jsonl');
    const file = new DeadLetterFile({ path, maxBytes: 4096 });
    const outcome = await file.write('collector', 'not retryable', 1, records(events));
    await file.close();
    expect(outcome.written).toBeGreaterThan(0);
    expect(outcome.written).toBeLessThan(10);
    expect(outcome.reason).toBe(`dead-letter file ${path} is full (4096 bytes)`);
    expect(entries(path).map((e) => e.sequence)).toEqual(Array.from({ length: outcome.written }, (_, i) => i + 1));
    expect(statSync(path).size).toBeLessThanOrEqual(4096);
  });

  it('starts a new line after a line an earlier run left cut short', async () => {
    const path = join(dir, 'dead.jsonl');
    appendFileSync(path, '{"sink":"collector","reason":"killed mid-wri');
    const file = new DeadLetterFile({ path, maxBytes: 1 << 20 });
    const events = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 2).map((raw) => new TetragonEvent(raw));
    expect(await file.write('collector', 'sink down', 0, records(events))).toEqual({ written: 2 });
    await file.close();
    const lines = readFileSync(path, 'utf8').split('\n');
    expect(lines[0]).toBe('{"sink":"collector","reason":"killed mid-wri');
    expect(lines.slice(1, 3).map((l) => (JSON.parse(l) as Entry).sequence)).toEqual([1, 2]);
  });
});
