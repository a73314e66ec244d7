// The matcher between connections the sidecar accepted and Tetragon's tcp_connect events, and the span gate that
// waits for a late one: port reuse, late events, the window, the ring's bound, argument redaction.

import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Span } from '../spans/span.ts';
import { ArgumentPolicy, splitTetragonArguments } from './argument-redaction.ts';
import { ConnectRing } from './connect-ring.ts';
import { ConnectionTracker } from './connection-tracker.ts';
import { SpanGate, UNATTRIBUTED } from './span-gate.ts';
import type { TcpConnect } from './tcp-connect-event.ts';
import { PROVENANCE_DEFAULTS } from '../../../contracts/provenance-config.ts';

const T0 = Date.parse('2026-11-29T06:00:00.000Z');
const SIDECAR_PORT = 8181;

function connect(over: Partial<TcpConnect>): TcpConnect {
  return {
    atMs: T0,
    podNamespace: 'team-a',
    podName: 'web-1',
    containerName: 'app',
    pid: 100,
    binary: '/usr/bin/python3',
    arguments: 'agent.py',
    parents: ['/bin/sh'],
    saddr: '127.0.0.1',
    daddr: '127.0.0.1',
    sport: 40_000,
    dport: SIDECAR_PORT,
    ...over,
  };
}

function tracker(aheadMs = 2_000): ConnectionTracker {
  const policy = new ArgumentPolicy('none', []);
  return new ConnectionTracker({
    aheadMs,
    describe: (e) => ({
      attribution: 'tetragon',
      pid: e.pid,
      executablePath: e.binary,
      commandArgs: policy.commandArgs(e.binary, []),
      parentExecutables: e.parents,
      containerName: e.containerName,
    }),
  });
}

const socket = (remotePort: number) => ({ remoteAddress: '::ffff:127.0.0.1', remotePort, localPort: SIDECAR_PORT });

function span(requestId: string): Span {
  return { requestId } as Span;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('connection attribution', () => {
  it('a reused source port goes to the connect just before the connection, not an older or a later one', () => {
    const t = tracker();
    t.onConnect(connect({ pid: 11, atMs: T0 }));
    t.onConnect(connect({ pid: 22, atMs: T0 + 30_000 }));
    t.onConnect(connect({ pid: 33, atMs: T0 + 90_000 }));
    // seen 100 ms after the second connect: the first is older, the third 59.9 s later (beyond the 2 s window)
    t.noteRequest('r1', socket(40_000), T0 + 30_100);
    expect(t.connectionOf('r1')?.process?.pid).toBe(22);
    // another connection on the same port seen right after the first connect
    t.noteRequest('r2', socket(40_000), T0 + 50);
    expect(t.connectionOf('r2')?.process?.pid).toBe(11);
  });

  it('ignores a connect to another port or from another source port', () => {
    const t = tracker();
    t.onConnect(connect({ pid: 11, dport: 443 }));
    t.onConnect(connect({ pid: 12, sport: 40_001 }));
    t.noteRequest('r1', socket(40_000), T0 + 10);
    expect(t.connectionOf('r1')?.process).toBeNull();
  });

  it('looks a kept-alive connection up once: later requests on the same socket share its process', () => {
    const t = tracker();
    const s = socket(40_000);
    t.onConnect(connect({ pid: 11 }));
    expect(t.noteRequest('r1', s, T0 + 10)).toBeDefined();
    // a new connect on that port (after the first connection closed) changes nothing for the open socket
    t.onConnect(connect({ pid: 99, atMs: T0 + 20 }));
    expect(t.noteRequest('r2', s, T0 + 60_000)).toBeUndefined();
    expect(t.connectionOf('r2')?.process?.pid).toBe(11);
  });

  it('gives a late connect to both views of an HTTP/2 connection: its socket and its session', () => {
    const t = tracker();
    const raw = socket(40_000);
    const session = socket(40_000);
    t.noteConnection(raw, T0 + 5);
    t.noteRequest('r1', session, T0 + 9);
    t.onConnect(connect({ pid: 11, atMs: T0 + 3 }));
    expect(t.connectionOf('r1')?.process?.pid).toBe(11);
    expect(t.stats().waiting).toBe(0);
  });

  it('holds a span whose connect arrives late and writes it with the process when it comes', () => {
    const t = tracker();
    const written: Span[] = [];
    const gate = new SpanGate({ record: (s) => written.push(s) });
    gate.follow(t, 2_000);
    t.noteRequest('r1', socket(40_000), T0 + 10);
    const s = span('r1');
    gate.record(s);
    expect(written).toEqual([]);
    expect(gate.held).toBe(1);
    // the agent's event comes after the span finished, stamped 5 ms before the request was seen
    t.onConnect(connect({ pid: 11, atMs: T0 + 5 }));
    expect(written).toEqual([s]);
    expect(s.process).toMatchObject({ attribution: 'tetragon', pid: 11, executablePath: '/usr/bin/python3', parentExecutables: ['/bin/sh'], containerName: 'app' });
    expect(gate.held).toBe(0);
  });

  it('writes a span `unattributed` once the window passes without a connect, and tells the OTLP export only then', () => {
    vi.useFakeTimers();
    const t = tracker();
    const written: Span[] = [];
    const exported: Span[] = [];
    const gate = new SpanGate({ record: (s) => written.push(s) });
    gate.follow(t, 2_000);
    const otlp = gate.delayed({ callFinished: (s) => exported.push(s) });
    t.noteRequest('r1', socket(40_000), Date.now());
    const s = span('r1');
    gate.record(s);
    otlp.callFinished(s, null, { start: 0, upstreamStart: 0, upstreamHeaders: 0, upstreamEnd: 0 }, true);
    vi.advanceTimersByTime(1_999);
    expect([written.length, exported.length]).toEqual([0, 0]);
    vi.advanceTimersByTime(1);
    expect(written).toEqual([s]);
    expect(exported).toEqual([s]);
    expect(s.process).toEqual(UNATTRIBUTED);
  });

  it('passes spans straight through with provenance off, and a request it never saw goes on unattributed', () => {
    const written: Span[] = [];
    const gate = new SpanGate({ record: (s) => written.push(s) });
    const off = span('r1');
    gate.record(off);
    expect(written).toEqual([off]);
    expect(off.process).toBeUndefined();
    gate.follow(tracker(), 2_000);
    const unseen = span('never-noted');
    gate.record(unseen);
    expect(written).toEqual([off, unseen]);
    expect(unseen.process).toEqual(UNATTRIBUTED);
  });
});

describe('connect ring', () => {
  it('keeps the newest events only and counts the ones pushed out', () => {
    const ring = new ConnectRing(3);
    for (let i = 0; i < 5; i++) ring.add(connect({ pid: i, sport: 41_000 + i }));
    expect(ring.dropped).toBe(2);
    const window = { aheadMs: 2_000, behindMs: 60_000 };
    const at = (port: number) => ring.find({ remoteAddress: '127.0.0.1', remotePort: port, localPort: SIDECAR_PORT, seenAtMs: T0 }, window)?.pid;
    expect([41_000, 41_001, 41_002, 41_003, 41_004].map(at)).toEqual([undefined, undefined, 2, 3, 4]);
  });
});

describe('process arguments on spans', () => {
  it("splits Tetragon's quoted arguments", () => {
    expect(splitTetragonArguments('-c "curl https://ebpf.io/x" --verbose')).toEqual(['-c', 'curl https://ebpf.io/x', '--verbose']);
  });

  it('records none by default, redacts secrets when asked, all when asked', () => {
    const args = ['agent.py', '--api-key=sk-abcdefghijkl', 'Bearer xyz', '--model', 'gpt-4o'];
    expect(new ArgumentPolicy(PROVENANCE_DEFAULTS.arguments, PROVENANCE_DEFAULTS.redact).commandArgs('/usr/bin/python3', args)).toBeNull();
    expect(new ArgumentPolicy('redacted', PROVENANCE_DEFAULTS.redact).commandArgs('/usr/bin/python3', args)).toEqual([
      '/usr/bin/python3',
      'agent.py',
      '--[redacted]',
      '[redacted]',
      '--model',
      'gpt-4o',
    ]);
    expect(new ArgumentPolicy('all', []).commandArgs('/usr/bin/python3', args)).toEqual(['/usr/bin/python3', ...args]);
  });
});
