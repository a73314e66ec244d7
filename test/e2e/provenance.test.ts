// Provenance end to end: a real `tollgate proxy` process as the sidecar of pod team-a/web-1, the fake Tetragon
// agent sending tcp_connect kprobe events in Tetragon's shape, and real client processes. Two callers at once
// each find their own pid and binary on their call's span; a caller whose connect the agent never reports gets
// `unattributed` once the window has passed; a process that connects to the provider directly raises the
// bypass log line and metric, while the sidecar's own connect to the provider does not. With `audit` on as
// well, one stream serves both. The causal trail: a call whose answer asks for a tool, then a child of the caller
// that execs, connects, writes a file and exits, beside an unrelated process's exec: the trail API and
// `tollgate trail` show the child's chain under the call and leave the other process out.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTetragonAgent, startFakeTetragonAgent, tcpConnectEvent, tetragonExecId, trailEvent } from '../fakes/tetragon-agent.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { type ProxyProcess, startProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const CALLER = fileURLToPath(new URL('./provenance-caller.ts', import.meta.url));
const POD = { namespace: 'team-a', pod: 'web-1' };
const POD_ENV = { TOLLGATE_POD_NAME: POD.pod, TOLLGATE_POD_NAMESPACE: POD.namespace };
const CHAT = '/proxy/beta/v1/chat/completions';

interface Caller {
  child: ChildProcess;
  pid: number;
  sport: number;
  /** Sends `go`; resolves with the answer's status and span id. */
  call(): Promise<{ status: number; spanId: string | null }>;
}

const callers: ChildProcess[] = [];

/** A client process connected to `url`, waiting for `go`. */
async function startCaller(url: string, path: string, key?: string, protocol: 'http1' | 'h2' = 'http1'): Promise<Caller> {
  const child = spawn(process.execPath, [CALLER, url, path, ...(key ? [key] : [])], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, CALLER_PROTOCOL: protocol },
  });
  callers.push(child);
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = JSON.parse((await lines.next()).value as string) as { pid: number; sport: number };
  return {
    child,
    ...first,
    async call() {
      child.stdin.write('go\n');
      return JSON.parse((await lines.next()).value as string) as { status: number; spanId: string | null };
    },
  };
}

function connectOf(caller: { pid: number; sport: number }, dport: number, over: { binary?: string; arguments?: string; container?: string; execId?: string } = {}): Buffer {
  return tcpConnectEvent({ ...POD, pid: caller.pid, sport: caller.sport, dport, binary: over.binary ?? process.execPath, arguments: over.arguments ?? CALLER, ...over });
}

function logsWith(proxy: ProxyProcess, msg: string): Record<string, unknown>[] {
  return proxy.logs.filter((l) => l.msg === msg);
}

afterAll(() => {
  for (const child of callers) child.kill();
});

describe('the calling process on every span, and bypass detection', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let bed: UpstreamBed;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    bed = await startUpstreamBed();
    proxy = await startProxyProcess({
      configYaml: bed.configYaml(`
provenance:
  address: "${agent.address}"
  attributionWindowMs: 1000
`),
      env: { ...bed.env, ...POD_ENV },
    });
    await agent.waitForSubscribers(1);
  });

  afterAll(async () => {
    await proxy?.stop();
    await bed?.close();
    await agent?.stop();
  });

  it('asks the agent for the pod’s own events only: kprobes, and execs and exits for the causal trail', () => {
    expect(agent.requests).toEqual([{ allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1$'], event_set: ['PROCESS_EXEC', 'PROCESS_EXIT', 'PROCESS_KPROBE'] }] }]);
  });

  it('names each of two concurrent callers on its own span: pid, binary, container, parent; no arguments by default', async () => {
    const [a, b] = await Promise.all([startCaller(proxy.url, CHAT), startCaller(proxy.url, CHAT)]);
    expect(a.sport).not.toBe(b.sport);
    // b's connect is reported before the call, a's only after both calls were answered (a late event)
    agent.emit([connectOf(b, proxy.port, { binary: '/usr/bin/python3', arguments: 'agent.py --api-key=sk-abcdefghijkl', execId: 'bm9kZS1hOjE6Yg==' })]);
    const [answerA, answerB] = await Promise.all([a.call(), b.call()]);
    expect([answerA.status, answerB.status]).toEqual([200, 200]);
    agent.emit([connectOf(a, proxy.port, { execId: 'bm9kZS1hOjE6YQ==' })]);
    const [spanA, spanB] = await Promise.all([findSpan(proxy.url, { spanId: answerA.spanId }), findSpan(proxy.url, { spanId: answerB.spanId })]);
    expect(spanA.process).toEqual({
      attribution: 'tetragon',
      pid: a.pid,
      executable_path: process.execPath,
      command_args: null,
      parent_executables: ['/bin/sh'],
      container_name: 'app',
      exec_id: 'bm9kZS1hOjE6YQ==',
    });
    expect(spanB.process).toEqual({
      attribution: 'tetragon',
      pid: b.pid,
      executable_path: '/usr/bin/python3',
      command_args: null,
      parent_executables: ['/bin/sh'],
      container_name: 'app',
      exec_id: 'bm9kZS1hOjE6Yg==',
    });
  });

  it('names an HTTP/2 caller too, its connect reported after the answer', async () => {
    const h2 = await startCaller(proxy.url, CHAT, undefined, 'h2');
    const answer = await h2.call();
    expect(answer.status).toBe(200);
    agent.emit([connectOf(h2, proxy.port, { binary: '/usr/local/bin/aws' })]);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    expect(span.process).toMatchObject({ attribution: 'tetragon', pid: h2.pid, executable_path: '/usr/local/bin/aws' });
  });

  it('says `unattributed` when no connect matches within the window', async () => {
    const c = await startCaller(proxy.url, CHAT);
    // a connect from the same pid to another port, and one from another source port: neither is this connection
    agent.emit([connectOf({ pid: c.pid, sport: c.sport }, proxy.port + 1), connectOf({ pid: c.pid, sport: c.sport + 1 }, proxy.port)]);
    const answer = await c.call();
    expect(answer.status).toBe(200);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    expect(span.process).toEqual({
      attribution: 'unattributed',
      pid: null,
      executable_path: null,
      command_args: null,
      parent_executables: [],
      container_name: null,
      exec_id: null,
    });
  });

  it('logs and counts a process that calls the provider directly, and not the sidecar’s own connect', async () => {
    const providerPort = Number(new URL(bed.openai.url).port);
    const direct = await startCaller(bed.openai.url, '/v1/chat/completions', OPENAI_KEY);
    // the sidecar's own upstream connect, as the agent reports it from the sidecar's container, comes first
    agent.emit([
      connectOf({ pid: proxy.child.pid!, sport: 45_000 }, providerPort, { container: 'tollgate-proxy', binary: '/usr/local/bin/node' }),
      connectOf(direct, providerPort, { binary: '/usr/bin/curl' }),
    ]);
    await direct.call();
    const [line] = await waitFor(
      'the bypass log line',
      () => logsWith(proxy, 'provider call bypassed the sidecar').length > 0 && logsWith(proxy, 'provider call bypassed the sidecar'),
    );
    expect(line).toMatchObject({ provider: 'openai', pid: direct.pid, binary: '/usr/bin/curl', container: 'app', pod: 'team-a/web-1', destination: `127.0.0.1:${providerPort}` });
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(sampleValue(metrics, 'tollgate_provenance_bypass_total', { provider: 'openai' })).toBe(1);
    // the same process again within the minute: counted, not logged again
    agent.emit([connectOf({ pid: direct.pid, sport: direct.sport + 1 }, providerPort, { binary: '/usr/bin/curl' })]);
    await waitFor(
      'the second bypass counted',
      async () => sampleValue(await (await fetch(`${proxy.url}/metrics`)).text(), 'tollgate_provenance_bypass_total', { provider: 'openai' }) === 2,
    );
    expect(logsWith(proxy, 'provider call bypassed the sidecar')).toHaveLength(1);
  });
});

describe('provenance from /proc, the pod sharing its process namespace', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let bed: UpstreamBed;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    bed = await startUpstreamBed();
    // The test's processes share the proxy's PID and network namespaces, as a pod's containers do with
    // shareProcessNamespace: true. The agent reports nothing here.
    proxy = await startProxyProcess({
      configYaml: bed.configYaml(`
provenance: { address: "${agent.address}", procfs: true, arguments: all }
`),
      env: { ...bed.env, ...POD_ENV },
    });
  });

  afterAll(async () => {
    await proxy?.stop();
    await bed?.close();
    await agent?.stop();
  });

  it('finds the caller through its socket in /proc: pid, executable, argv, parent', async () => {
    const caller = await startCaller(proxy.url, CHAT);
    const answer = await caller.call();
    expect(answer.status).toBe(200);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    // argv as the caller was started (arguments: all); its parent is this test's own process
    expect(span.process).toEqual({
      attribution: 'procfs',
      pid: caller.pid,
      executable_path: realpathSync(process.execPath),
      command_args: [process.execPath, CALLER, proxy.url, CHAT],
      parent_executables: expect.arrayContaining([realpathSync(process.execPath)]) as unknown,
      container_name: null,
      // /proc knows no exec_id: that is Tetragon's
      exec_id: null,
    });
    expect(span.process?.parent_executables[0]).toBe(realpathSync(process.execPath));
  });
});

describe('provenance beside the audit fan-out', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let bed: UpstreamBed;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    bed = await startUpstreamBed();
    proxy = await startProxyProcess({
      configYaml: bed.configYaml(`
audit:
  source: { address: "${agent.address}" }
  sinks: [{ name: siem, kind: jsonl, path: audit.jsonl }]
provenance: { attributionWindowMs: 1000 }
`),
      env: { ...bed.env, ...POD_ENV },
    });
    await agent.waitForSubscribers(1);
  });

  afterAll(async () => {
    await proxy?.stop();
    await bed?.close();
    await agent?.stop();
  });

  it('reads one stream for both: the audit sink gets the connect, and the span names its process', async () => {
    const a = await startCaller(proxy.url, CHAT);
    agent.emit([connectOf(a, proxy.port)]);
    const answer = await a.call();
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    expect(span.process).toMatchObject({ attribution: 'tetragon', pid: a.pid });
    expect(agent.requests).toHaveLength(1);
    expect(agent.subscribers()).toBe(1);
    const audited = await waitFor('the connect in the audit file', async () => {
      const { readFileSync, existsSync } = await import('node:fs');
      const path = join(proxy.dir, 'audit.jsonl');
      return existsSync(path) && readFileSync(path, 'utf8').includes('tcp_connect') && readFileSync(path, 'utf8');
    });
    expect(audited).toContain(`"sport":${a.sport}`);
  });
});

const CLI = fileURLToPath(new URL('../../cmd/tollgate.ts', import.meta.url));

describe('the causal trail: what the caller’s process tree did after the answer', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let bed: UpstreamBed;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    bed = await startUpstreamBed();
    proxy = await startProxyProcess({
      configYaml: bed.configYaml(`
provenance:
  address: "${agent.address}"
  attributionWindowMs: 1000
  arguments: redacted
  trail: { windowMs: 5000 }
`),
      env: { ...bed.env, ...POD_ENV },
    });
    await agent.waitForSubscribers(1);
  });

  afterAll(async () => {
    await proxy?.stop();
    await bed?.close();
    await agent?.stop();
  });

  it('links the child’s exec, connect, file write and exit to the call, not an unrelated process; the API and the CLI show it', async () => {
    bed.openai.behave({ toolCall: { name: 'run_shell', arguments: { command: 'curl -sS https://example.com -o /tmp/out.txt' } } });
    const a = await startCaller(proxy.url, CHAT);
    const agentExec = tetragonExecId(a.pid, 7_000_000);
    agent.emit([tcpConnectEvent({ ...POD, pid: a.pid, sport: a.sport, dport: proxy.port, binary: '/usr/bin/python3', execId: agentExec })]);
    const answer = await a.call();
    expect(answer.status).toBe(200);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    const traceId = span.trace_id;
    const trailUrl = `${proxy.url}/_local/api/trail/${traceId}`;
    // the call is kept with its caller before anything happened after it
    const before = (await (await fetch(trailUrl)).json()) as TrailBody;
    expect(before.calls).toHaveLength(1);
    expect(before.calls[0]).toMatchObject({ span_id: answer.spanId, route: 'beta', process: { pid: a.pid, exec_id: agentExec, executable_path: '/usr/bin/python3' }, actions: [] });
    const ended = Date.parse(before.calls[0]!.ended);

    const sh = { ...POD, pid: a.pid + 1, execId: tetragonExecId(a.pid + 1, 7_000_100), parentExecId: agentExec, binary: '/bin/sh', parentBinary: '/usr/bin/python3' };
    const stranger = { ...POD, pid: 61_000, execId: tetragonExecId(61_000, 7_000_120), parentExecId: tetragonExecId(60_999, 1), binary: '/usr/bin/env' };
    agent.emit([
      trailEvent({ ...sh, type: 'process_exec', arguments: '-c "curl -sS https://example.com --token=abc123"', atMs: ended + 100 }),
      trailEvent({ ...stranger, type: 'process_exec', atMs: ended + 120 }),
      trailEvent({ ...sh, type: 'tcp_connect', daddr: '93.184.216.34', dport: 443, atMs: ended + 150 }),
      trailEvent({ ...sh, type: 'file', path: '/tmp/out.txt', mask: 2, atMs: ended + 160 }),
      trailEvent({ ...sh, type: 'process_exit', status: 0, atMs: ended + 300 }),
    ]);
    const trail = await waitFor('the exit in the trail', async () => {
      const body = (await (await fetch(trailUrl)).json()) as TrailBody;
      return body.calls[0]?.actions[0]?.children.some((c) => c.kind === 'exit') === true && body;
    });
    const at = (ms: number) => new Date(ended + ms).toISOString();
    const own = { pid: sh.pid, exec_id: sh.execId, parent_exec_id: agentExec, binary: '/bin/sh' };
    expect(trail).toMatchObject({ trace_id: traceId, window_ms: 5000 });
    // SHA-256 of the arguments as canonical JSON: {"command":"curl -sS https://example.com -o /tmp/out.txt"}
    expect(trail.calls[0]!.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/) as unknown, name: 'run_shell', arguments_sha256: 'b533806b16cee0c56b7ed875566d9fd894df71f6df8cdaadaf67ec541de7420a' },
    ]);
    expect(trail.calls[0]!.actions).toEqual([
      {
        kind: 'exec',
        time: at(100),
        ...own,
        arguments: ['/bin/sh', '-c', 'curl -sS https://example.com --[redacted]'],
        children: [
          { kind: 'connect', time: at(150), ...own, destination: '93.184.216.34:443', children: [] },
          { kind: 'file', time: at(160), ...own, path: '/tmp/out.txt', children: [] },
          { kind: 'exit', time: at(300), ...own, exit_code: 0, children: [] },
        ],
      },
    ]);

    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'trail', traceId, '--url', proxy.url]);
    expect(stdout).toContain(`trace ${traceId} (actions up to 5s after each answer)`);
    expect(stdout).toContain(`  caller pid ${a.pid} /usr/bin/python3 (container app)`);
    expect(stdout).toMatch(/\n  answer: 1 tool call\n    tool call run_shell call_\w+ arguments sha256 b533806b16ce\n/);
    expect(stdout).toContain(
      [
        '  then:',
        `    +0.100s exec pid ${sh.pid} /bin/sh -c "curl -sS https://example.com --[redacted]"`,
        `      +0.150s connect pid ${sh.pid} /bin/sh -> 93.184.216.34:443`,
        `      +0.160s file pid ${sh.pid} /bin/sh wrote /tmp/out.txt`,
        `      +0.300s exit pid ${sh.pid} /bin/sh exit code 0`,
      ].join('\n'),
    );
    expect(stdout).not.toContain('/usr/bin/env');
  });

  it('answers 404 trail_not_found for a trace it keeps nothing of, 400 for a malformed id', async () => {
    const unknown = await fetch(`${proxy.url}/_local/api/trail/${'ab'.repeat(16)}`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('trail_not_found');
    const malformed = await fetch(`${proxy.url}/_local/api/trail/not-a-trace-id`);
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('trace id must be 32 hex digits') as unknown,
    });
  });
});

interface TrailActionBody {
  kind: string;
  children: TrailActionBody[];
}

interface TrailBody {
  trace_id: string;
  window_ms: number;
  calls: { span_id: string; ended: string; tool_calls: { id: string | null; name: string; arguments_sha256: string }[]; actions: TrailActionBody[] }[];
}
