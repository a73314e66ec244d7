import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { mixedEvents } from '../../../../test/fakes/tetragon-agent.ts';
import { TetragonEvent } from '../tetragon-protocol.ts';
import { JsonlSink } from './jsonl-sink.ts';

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'tollgate-jsonl-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('appends one protojson line per event and rotates by size, keeping `keep` files', async () => {
  const path = join(dir, 'audit.jsonl');
  const events = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 12).map((raw, i) => ({ sequence: i + 1, receivedAt: Date.now(), event: new TetragonEvent(raw) }));
  // Lines differ a little in length by event type; 3 of the longest fit, 4 of the shortest do not.
  const sizes = events.map((e) => Buffer.byteLength(`${e.event.json()}\n`));
  expect(3 * Math.max(...sizes)).toBeLessThan(4 * Math.min(...sizes));
  const sink = new JsonlSink({ name: 'siem', path, rotate: { maxBytes: 3 * Math.max(...sizes), keep: 2 } });
  for (const e of events) await sink.write([e]);
  await sink.close();
  expect(readdirSync(dir).sort()).toEqual(['audit.jsonl', 'audit.jsonl.1', 'audit.jsonl.2']);
  const current = readFileSync(path, 'utf8').split('\n').filter(Boolean);
  expect(current).toEqual(events.slice(9).map((e) => e.event.json()));
  expect(readFileSync(`${path}.1`, 'utf8').split('\n').filter(Boolean)).toEqual(events.slice(6, 9).map((e) => e.event.json()));
  expect(readFileSync(`${path}.2`, 'utf8').split('\n').filter(Boolean)).toEqual(events.slice(3, 6).map((e) => e.event.json()));
});
