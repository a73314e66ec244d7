// What a bypass report becomes over time (ADR 1605), with the clock in the test's hand: the minute per pod, binary
// and provider, the connects held back counted in the next Event, a pod's ten a minute, and a note that stays on
// one line. The Events written to a real API server are in test/cluster/provider-bypass-events.test.ts.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { BypassEntryMessage } from '../../../contracts/push-protocol.ts';
import type { EventInput } from '../../../kube-client/event-recorder.ts';
import { BypassEvents } from './bypass-events.ts';

const POD = { namespace: 'team-a', pod: 'web-1', podUid: '3f1c0d52-0000-4000-8000-000000000001' };

function entry(over: Partial<BypassEntryMessage> = {}): BypassEntryMessage {
  return {
    provider: 'openai',
    pid: 4242,
    binary: '/usr/bin/curl',
    container: 'app',
    destination: '162.159.140.245:443',
    connects: 1,
    firstSeenUnixMs: 0,
    lastSeenUnixMs: 0,
    ...over,
  };
}

function setup() {
  let now = 1_764_410_400_000;
  const recorded: EventInput[] = [];
  const counted: Record<string, number> = {};
  const events = new BypassEvents({
    recorder: { record: async (input) => void recorded.push(input) },
    logger: pino({ level: 'silent' }),
    metrics: { bypassEntries: (outcome, count) => void (counted[outcome] = (counted[outcome] ?? 0) + count) },
    now: () => now,
  });
  return { events, recorded, counted, advance: (ms: number) => void (now += ms) };
}

describe('ProviderBypass Events', () => {
  it('records one a minute per pod, binary and provider; the next one counts the connects held back', () => {
    const { events, recorded, counted, advance } = setup();
    events.report(POD, { entries: [entry({ connects: 3 })] });
    advance(30_000);
    // the same binary from another process, and twice more: held back
    events.report(POD, { entries: [entry({ pid: 4243, connects: 2 })] });
    // another provider is another key
    events.report(POD, { entries: [entry({ provider: 'anthropic', destination: '[2606:4700::6812:1]:443' })] });
    advance(30_000);
    events.report(POD, { entries: [entry({ pid: 4244, connects: 1 })] });

    expect(recorded.map((e) => e.note)).toEqual([
      'process /usr/bin/curl (pid 4242, container app) connected to openai at 162.159.140.245:443 without the sidecar (3 connects)',
      'process /usr/bin/curl (pid 4242, container app) connected to anthropic at [2606:4700::6812:1]:443 without the sidecar (1 connect)',
      // a minute after the first: its own connect and the 2 held back at 30 s
      'process /usr/bin/curl (pid 4244, container app) connected to openai at 162.159.140.245:443 without the sidecar (3 connects)',
    ]);
    expect(recorded[0]).toMatchObject({
      type: 'Warning',
      reason: 'ProviderBypass',
      regarding: { apiVersion: 'v1', kind: 'Pod', name: 'web-1', namespace: 'team-a', uid: POD.podUid },
    });
    expect(counted).toEqual({ recorded: 3, rate_limited: 1 });
  });

  it('writes at most ten a minute for one pod whatever the binaries, and ten again the next minute', () => {
    const { events, recorded, counted, advance } = setup();
    events.report(POD, { entries: Array.from({ length: 12 }, (_, i) => entry({ binary: `/tmp/a${i}` })) });
    expect(recorded).toHaveLength(10);
    // another pod has its own ten
    events.report({ ...POD, pod: 'web-2', podUid: 'other-uid' }, { entries: [entry()] });
    expect(recorded).toHaveLength(11);
    advance(60_000);
    events.report(POD, { entries: Array.from({ length: 12 }, (_, i) => entry({ binary: `/tmp/b${i}` })) });
    expect(recorded).toHaveLength(21);
    expect(counted).toEqual({ recorded: 21, rate_limited: 4 });
  });

  it('refuses a report over its bounds whole, and keeps a line break in a path from starting a line', () => {
    const { events, recorded, counted } = setup();
    events.report(POD, { entries: [entry(), entry({ binary: `/${'x'.repeat(512)}` })] });
    events.report(POD, { entries: [entry({ provider: '' })] });
    events.report(POD, { entries: [entry({ pid: 1.5 })] });
    expect(recorded).toEqual([]);
    expect(counted).toEqual({ refused: 4 });

    events.report(POD, { entries: [entry({ binary: '/tmp/evil\nWarning: all is well' })] });
    expect(recorded[0]!.note).toBe('process /tmp/evil?Warning: all is well (pid 4242, container app) connected to openai at 162.159.140.245:443 without the sidecar (1 connect)');

    // C1 controls (U+009B is a terminal's CSI, U+0085 a next line) and Unicode's line and paragraph separators too
    events.report(POD, { entries: [entry({ binary: '/tmp/x\u009b2J\u0085y\u2028z\u2029w', container: 'a\u009bpp' })] });
    expect(recorded[1]!.note).toBe('process /tmp/x?2J?y?z?w (pid 4242, container a?pp) connected to openai at 162.159.140.245:443 without the sidecar (1 connect)');
  });

  it('logs the refused reports of a pod once a minute, counting those it did not log, however fast they come', () => {
    const lines: Record<string, unknown>[] = [];
    let now = 1_764_410_400_000;
    const events = new BypassEvents({
      recorder: { record: async () => undefined },
      logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }),
      now: () => now,
    });
    const oversize = { entries: Array.from({ length: 65 }, () => entry()) };
    for (let i = 0; i < 1000; i++) events.report(POD, oversize);
    // another pod's refusal is its own line
    events.report({ ...POD, pod: 'web-2', podUid: 'other-uid' }, oversize);
    now += 60_000;
    events.report(POD, oversize);
    expect(lines.map((l) => [l.msg, l.pod, l.suppressed])).toEqual([
      ['bypass report refused: 65 entries, more than 64', 'team-a/web-1', 0],
      ['bypass report refused: 65 entries, more than 64', 'team-a/web-2', 0],
      ['bypass report refused: 65 entries, more than 64', 'team-a/web-1', 999],
    ]);
  });
});
