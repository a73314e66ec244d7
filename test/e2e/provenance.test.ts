// Provenance end to end: a real `tollgate proxy` process as the sidecar of pod team-a/web-1, the fake Tetragon
// agent sending tcp_connect kprobe events in Tetragon's shape, and real client processes. Two callers at once
// each find their own pid and binary on their call's span; a caller whose connect the agent never reports gets
// `unattributed` once the window has passed; a process that connects to the provider directly raises the
// bypass log line and metric, while the sidecar's own connect to the provider does not. With `audit` on as
// well, one stream serves both.

import { type ChildProcess, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTetragonAgent, startFakeTetragonAgent, tcpConnectEvent } from '../fakes/tetragon-agent.ts';
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

function connectOf(caller: { pid: number; sport: number }, dport: number, over: { binary?: string; arguments?: string; container?: string } = {}): Buffer {
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

  it('asks the agent for the pod’s own kprobe events only', () => {
    expect(agent.requests).toEqual([{ allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1$'], event_set: ['PROCESS_KPROBE'] }] }]);
  });

  it('names each of two concurrent callers on its own span: pid, binary, container, parent; no arguments by default', async () => {
    const [a, b] = await Promise.all([startCaller(proxy.url, CHAT), startCaller(proxy.url, CHAT)]);
    expect(a.sport).not.toBe(b.sport);
    // b's connect is reported before the call, a's only after both calls were answered (a late event)
    agent.emit([connectOf(b, proxy.port, { binary: '/usr/bin/python3', arguments: 'agent.py --api-key=sk-abcdefghijkl' })]);
    const [answerA, answerB] = await Promise.all([a.call(), b.call()]);
    expect([answerA.status, answerB.status]).toEqual([200, 200]);
    agent.emit([connectOf(a, proxy.port)]);
    const [spanA, spanB] = await Promise.all([findSpan(proxy.url, { spanId: answerA.spanId }), findSpan(proxy.url, { spanId: answerB.spanId })]);
    expect(spanA.process).toEqual({
      attribution: 'tetragon',
      pid: a.pid,
      executable_path: process.execPath,
      command_args: null,
      parent_executables: ['/bin/sh'],
      container_name: 'app',
    });
    expect(spanB.process).toEqual({
      attribution: 'tetragon',
      pid: b.pid,
      executable_path: '/usr/bin/python3',
      command_args: null,
      parent_executables: ['/bin/sh'],
      container_name: 'app',
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
    expect(span.process).toEqual({ attribution: 'unattributed', pid: null, executable_path: null, command_args: null, parent_executables: [], container_name: null });
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
