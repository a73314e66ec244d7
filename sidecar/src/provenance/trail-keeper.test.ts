// The causal trail (ADR 1604) fed with events in Tetragon's shape (process_exec, process_exit, tcp_connect and
// security_file_permission kprobes, encoded with the project's proto) read by the trail's own reader, and with
// finished call spans as the span gate lets them go. Times are written out: the answer of each call ends at
// T0 + 1000 ms (started T0, 1000 ms long).

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { tetragonExecId, trailEvent, type TrailEventSpec } from '../../../test/fakes/tetragon-agent.ts';
import { TetragonEvent } from '../audit/tetragon-protocol.ts';
import type { Span, SpanToolCall } from '../spans/span.ts';
import { ArgumentPolicy } from './argument-redaction.ts';
import { readTrailAction } from './trail-event.ts';
import { TRAIL_LIMITS, TrailKeeper, type TrailLimits } from './trail-keeper.ts';
import { trailJson, type TrailActionJson } from './trail-view.ts';

const T0 = Date.parse('2026-11-29T09:00:00.000Z');
const ENDED = T0 + 1000;
const POD = { namespace: 'team-a', pod: 'web-1' };
const AGENT = tetragonExecId(4242, 1_000);
const AGENT_PARENT = tetragonExecId(4200, 500);
const OTHER_AGENT = tetragonExecId(5151, 1_100);
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TOOL: SpanToolCall = { id: 'call_1', name: 'run_shell', argumentsSha256: 'a'.repeat(64) };

function span(over: { traceId?: string; spanId?: string; execId?: string | null; startMs?: number; toolCalls?: SpanToolCall[]; attempt?: number | null }): Span {
  return {
    spanId: over.spanId ?? '00f067aa0ba902b7',
    traceId: over.traceId ?? TRACE,
    attempt: over.attempt ?? null,
    model: 'gpt-4o-mini',
    route: 'beta',
    startTime: new Date(over.startMs ?? T0).toISOString(),
    durationMs: 1000,
    toolCalls: over.toolCalls ?? [TOOL],
    process: {
      attribution: 'tetragon',
      pid: 4242,
      executablePath: '/usr/bin/python3',
      commandArgs: null,
      parentExecutables: ['/bin/sh'],
      containerName: 'app',
      execId: over.execId === undefined ? AGENT : over.execId,
    },
  } as Span;
}

function keeper(opts: { windowMs?: number; maxTraces?: number; limits?: Partial<TrailLimits>; now?: () => number; logger?: pino.Logger } = {}) {
  return new TrailKeeper({
    settings: { windowMs: opts.windowMs ?? 30_000, maxTraces: opts.maxTraces ?? 100, holdMs: 7_000, sidecarPorts: new Set([8181]) },
    logger: opts.logger ?? pino({ level: 'silent' }),
    limits: { ...TRAIL_LIMITS, ...opts.limits },
    now: opts.now ?? (() => ENDED),
  });
}

const POLICY = new ArgumentPolicy('redacted', ['sk-[A-Za-z0-9_-]{8,}']);

/** The event as the agent sends it, read the way the runtime reads it. */
function feed(k: TrailKeeper, spec: TrailEventSpec): void {
  const action = readTrailAction(new TetragonEvent(trailEvent(spec)), POLICY);
  if (action !== null) k.onAction(action);
}

function child(pid: number, parentExecId: string, atMs: number) {
  return { ...POD, pid, execId: tetragonExecId(pid, atMs), parentExecId, binary: '/bin/sh', atMs };
}

function chain(k: TrailKeeper, traceId = TRACE) {
  const calls = k.calls(traceId);
  return calls ? trailJson(traceId, k.windowMs, calls) : null;
}

/** kind and pid of each action, children indented by two spaces per level. */
function outline(actions: TrailActionJson[], depth = 0): string[] {
  return actions.flatMap((a) => [`${' '.repeat(depth * 2)}${a.kind} ${a.pid}`, ...outline(a.children, depth + 1)]);
}

describe('the causal trail', () => {
  it('links a child’s exec, its connect, its file write and its exit to the call, nested under the exec', () => {
    const k = keeper();
    k.onCall(span({}));
    const sh = child(4300, AGENT, ENDED + 100);
    feed(k, { ...sh, type: 'process_exec', arguments: '-c "curl https://example.com --key sk-abcdefghijkl"' });
    feed(k, { ...sh, type: 'tcp_connect', daddr: '93.184.216.34', dport: 443, atMs: ENDED + 150 });
    feed(k, { ...sh, type: 'file', path: '/tmp/out.txt', mask: 2, atMs: ENDED + 160 });
    // a read (MAY_READ, 4) posted by the same policy is not an action
    feed(k, { ...sh, type: 'file', path: '/etc/hosts', mask: 4, atMs: ENDED + 170 });
    feed(k, { ...sh, type: 'process_exit', status: 0, atMs: ENDED + 300 });
    const trail = chain(k)!;
    expect(trail.calls).toHaveLength(1);
    const [call] = trail.calls;
    expect(call).toMatchObject({
      span_id: '00f067aa0ba902b7',
      started: '2026-11-29T09:00:00.000Z',
      ended: '2026-11-29T09:00:01.000Z',
      process: { pid: 4242, exec_id: AGENT, executable_path: '/usr/bin/python3' },
      tool_calls: [{ id: 'call_1', name: 'run_shell', arguments_sha256: 'a'.repeat(64) }],
    });
    expect(call!.actions).toEqual([
      {
        kind: 'exec',
        time: '2026-11-29T09:00:01.100Z',
        pid: 4300,
        exec_id: sh.execId,
        parent_exec_id: AGENT,
        binary: '/bin/sh',
        arguments: ['/bin/sh', '-c', 'curl https://example.com --key [redacted]'],
        children: [
          {
            kind: 'connect',
            time: '2026-11-29T09:00:01.150Z',
            pid: 4300,
            exec_id: sh.execId,
            parent_exec_id: AGENT,
            binary: '/bin/sh',
            destination: '93.184.216.34:443',
            children: [],
          },
          { kind: 'file', time: '2026-11-29T09:00:01.160Z', pid: 4300, exec_id: sh.execId, parent_exec_id: AGENT, binary: '/bin/sh', path: '/tmp/out.txt', children: [] },
          { kind: 'exit', time: '2026-11-29T09:00:01.300Z', pid: 4300, exec_id: sh.execId, parent_exec_id: AGENT, binary: '/bin/sh', exit_code: 0, children: [] },
        ],
      },
    ]);
  });

  it('follows descendants through the execs seen, and through the ancestors the agent sends', () => {
    const k = keeper();
    k.onCall(span({}));
    const sh = child(4300, AGENT, ENDED + 100);
    const curl = child(4301, sh.execId, ENDED + 200);
    feed(k, { ...sh, type: 'process_exec' });
    feed(k, { ...curl, type: 'process_exec', binary: '/usr/bin/curl' });
    // curl's connect carries only its parent (sh); sh's exec said sh's parent is the agent
    feed(k, { ...curl, type: 'tcp_connect', daddr: '10.0.0.9', dport: 80, atMs: ENDED + 250 });
    // a great-grandchild whose parent's exec was never seen, with --enable-ancestors: curl, sh, the agent
    const lost = child(4400, tetragonExecId(4399, 1), ENDED + 400);
    feed(k, {
      ...lost,
      type: 'process_exec',
      ancestors: [
        { pid: 4301, execId: curl.execId, binary: '/usr/bin/curl' },
        { pid: 4300, execId: sh.execId, binary: '/bin/sh' },
      ],
    });
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4300', '  exec 4301', '    connect 4301', '    exec 4400']);
  });

  it('leaves out an unrelated process, an action before the answer ended, and one after the window', () => {
    const k = keeper({ windowMs: 5_000 });
    k.onCall(span({}));
    feed(k, { ...child(7000, tetragonExecId(6999, 1), ENDED + 100), type: 'process_exec' });
    feed(k, { ...child(4300, AGENT, ENDED - 10), type: 'process_exec' });
    feed(k, { ...child(4301, AGENT, ENDED + 5_001), type: 'process_exec' });
    feed(k, { ...child(4302, AGENT, ENDED + 5_000), type: 'process_exec' });
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4302']);
  });

  it('does not count the caller’s connect into the sidecar’s port (its next call) as an action', () => {
    const k = keeper();
    k.onCall(span({}));
    const agent = { ...POD, pid: 4242, execId: AGENT, parentExecId: AGENT_PARENT, binary: '/usr/bin/python3' };
    feed(k, { ...agent, type: 'tcp_connect', daddr: '127.0.0.1', dport: 8181, atMs: ENDED + 50 });
    feed(k, { ...agent, type: 'tcp_connect', daddr: '140.82.112.3', dport: 443, atMs: ENDED + 60 });
    expect(chain(k)!.calls[0]!.actions.map((a) => a.destination)).toEqual(['140.82.112.3:443']);
  });

  it('gives each of two interleaved callers its own actions, and a tree’s action to its latest call', () => {
    const k = keeper();
    const second = '5bf92f3577b34da6a3ce929d0e0e4737';
    const third = '6bf92f3577b34da6a3ce929d0e0e4738';
    k.onCall(span({ traceId: TRACE, startMs: T0 }));
    k.onCall(span({ traceId: second, execId: OTHER_AGENT, startMs: T0 + 20 }));
    feed(k, { ...child(5200, OTHER_AGENT, ENDED + 60), type: 'process_exec' });
    feed(k, { ...child(4300, AGENT, ENDED + 70), type: 'process_exec' });
    // the first agent calls again (ended at T0 + 1500); its later child belongs to that call, not the first
    k.onCall(span({ traceId: third, startMs: T0 + 500 }));
    feed(k, { ...child(4310, AGENT, T0 + 1_600), type: 'process_exec' });
    expect(outline(chain(k, TRACE)!.calls[0]!.actions)).toEqual(['exec 4300']);
    expect(outline(chain(k, second)!.calls[0]!.actions)).toEqual(['exec 5200']);
    expect(outline(chain(k, third)!.calls[0]!.actions)).toEqual(['exec 4310']);
  });

  it('links actions that arrive before their call’s span, and moves them to a later call that arrives late', () => {
    const k = keeper();
    feed(k, { ...child(4300, AGENT, ENDED + 100), type: 'process_exec' });
    k.onCall(span({}));
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4300']);
    // the agent's second call ended at T0 + 1500; a child at T0 + 1600 arrives first, linked to the first call
    // for now, then the second call's span comes and takes it
    const later = '7bf92f3577b34da6a3ce929d0e0e4739';
    feed(k, { ...child(4310, AGENT, T0 + 1_600), type: 'process_exec' });
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4300', 'exec 4310']);
    k.onCall(span({ traceId: later, startMs: T0 + 500 }));
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4300']);
    expect(outline(chain(k, later)!.calls[0]!.actions)).toEqual(['exec 4310']);
  });

  it('forgets an action that waited longer than the hold for its call', () => {
    let now = ENDED;
    const k = keeper({ now: () => now });
    feed(k, { ...child(4300, AGENT, ENDED + 100), type: 'process_exec' });
    // the hold is 7 s; the span comes 8 s later
    now = ENDED + 8_000;
    k.onCall(span({}));
    expect(chain(k)!.calls[0]!.actions).toEqual([]);
    expect(k.drops().size).toBe(0);
  });

  it('keeps no call without an exec_id (procfs, unattributed) and no attempt span', () => {
    const k = keeper();
    k.onCall(span({ execId: null }));
    k.onCall(span({ attempt: 1 }));
    expect(chain(k)).toBeNull();
  });
});

describe('the trail’s bounds', () => {
  it('forgets the oldest trace past maxTraces, and counts it', () => {
    const k = keeper({ maxTraces: 2 });
    const ids = ['1'.repeat(32), '2'.repeat(32), '3'.repeat(32)];
    for (const traceId of ids) k.onCall(span({ traceId }));
    expect(ids.map((id) => k.calls(id) !== undefined)).toEqual([false, true, true]);
    expect(Object.fromEntries(k.drops())).toEqual({ trace: 1 });
  });

  it('links at most maxActionsPerTrace actions, counts the rest, and logs once a minute', () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    let now = ENDED;
    const k = keeper({ limits: { maxActionsPerTrace: 2 }, logger, now: () => now });
    k.onCall(span({}));
    for (let i = 0; i < 5; i++) feed(k, { ...child(4300 + i, AGENT, ENDED + 100 + i), type: 'process_exec' });
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4300', 'exec 4301']);
    expect(Object.fromEntries(k.drops())).toEqual({ action: 3 });
    expect(lines.map((l) => l.msg)).toEqual(['causal trail dropped entries']);
    now += 60_000;
    feed(k, { ...child(4310, AGENT, ENDED + 200), type: 'process_exec' });
    expect(lines).toHaveLength(2);
    // the line says how many were dropped since the previous one: the two suppressed and this one
    expect(lines[1]).toMatchObject({ dropped: 3, byReason: { action: 4 } });
  });

  it('forgets the oldest traces when all traces together hold maxActions, so memory stays bounded', () => {
    const k = keeper({ limits: { maxActions: 3 } });
    const first = '1'.repeat(32);
    const second = '2'.repeat(32);
    k.onCall(span({ traceId: first, startMs: T0 }));
    for (let i = 0; i < 3; i++) feed(k, { ...child(4300 + i, AGENT, ENDED + 100 + i), type: 'process_exec' });
    // a later call of another agent (ended at T0 + 2000): its first action needs room, the first trace goes
    k.onCall(span({ traceId: second, execId: OTHER_AGENT, startMs: T0 + 1_000 }));
    feed(k, { ...child(5200, OTHER_AGENT, T0 + 2_100), type: 'process_exec' });
    expect(k.calls(first)).toBeUndefined();
    expect(outline(chain(k, second)!.calls[0]!.actions)).toEqual(['exec 5200']);
    expect(Object.fromEntries(k.drops())).toEqual({ trace: 1 });
  });

  it('keeps at most maxCallsPerTrace calls of one trace (an agent that sends one trace id for a whole session), forgetting the oldest with its actions', () => {
    const k = keeper({ limits: { maxCallsPerTrace: 2 } });
    // three calls of one trace, a second apart; each is followed by one exec of the caller's child
    for (let i = 0; i < 3; i++) {
      k.onCall(span({ spanId: `00f067aa0ba902b${i}`, startMs: T0 + i * 1_000 }));
      feed(k, { ...child(4300 + i, AGENT, ENDED + i * 1_000 + 100), type: 'process_exec' });
    }
    const calls = chain(k)!.calls;
    expect(calls.map((c) => c.span_id)).toEqual(['00f067aa0ba902b1', '00f067aa0ba902b2']);
    expect(calls.map((c) => outline(c.actions))).toEqual([['exec 4301'], ['exec 4302']]);
    expect(Object.fromEntries(k.drops())).toEqual({ call: 1 });
  });

  it('counts an unlinked action pushed out of a full pending buffer, and a process pushed out of the exec tree', () => {
    const k = keeper({ limits: { maxPending: 2, maxProcesses: 2 } });
    for (let i = 0; i < 3; i++) feed(k, { ...child(4300 + i, AGENT, ENDED + 100 + i), type: 'process_exec' });
    expect(Object.fromEntries(k.drops())).toEqual({ pending: 1, process: 1 });
    // the two still held are linked when the call comes
    k.onCall(span({}));
    expect(outline(chain(k)!.calls[0]!.actions)).toEqual(['exec 4301', 'exec 4302']);
  });
});
