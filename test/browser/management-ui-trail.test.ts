// The causal trail on a call's details in the management UI, in a real browser: a real `tollgate proxy` with
// provenance on reads the fake Tetragon agent; a client process makes a call (its connect reported with its
// exec_id), then a child of it execs, connects and exits; the call's details show that chain as text, and a
// call no process was named for says it has no trail without asking for one.

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { type FakeTetragonAgent, startFakeTetragonAgent, tcpConnectEvent, tetragonExecId, trailEvent } from '../fakes/tetragon-agent.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { launchChromium } from './chromium.ts';

const OPENAI_KEY = 'sk-browser-trail-test';
const CALLER = fileURLToPath(new URL('../e2e/provenance-caller.ts', import.meta.url));
const POD = { namespace: 'team-a', pod: 'web-1' };

let openai: FakeUpstream;
let agent: FakeTetragonAgent;
let proxy: ProxyProcess;
let browser: Browser;
let page: Page;
let caller: ChildProcess | undefined;
const problems: string[] = [];

beforeAll(async () => {
  openai = await startFakeUpstream('openai', { expectApiKey: OPENAI_KEY });
  agent = await startFakeTetragonAgent();
  proxy = await startProxyProcess({
    configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
storage: { kind: sqlite, path: spans.db }
provenance:
  address: "${agent.address}"
  attributionWindowMs: 500
  arguments: redacted
  bypass: { enabled: false }
  trail: { windowMs: 5000 }
`,
    env: { OPENAI_API_KEY: OPENAI_KEY, TOLLGATE_POD_NAME: POD.pod, TOLLGATE_POD_NAMESPACE: POD.namespace },
  });
  await agent.waitForSubscribers(1);
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.request().method()} ${new URL(response.url()).pathname} ${response.status()}`);
  });
});

afterAll(async () => {
  caller?.kill();
  await browser?.close();
  await proxy?.stop();
  await agent?.stop();
  await openai?.close();
});

/** A client process connected to the proxy; `go` makes its call. */
async function startCaller(): Promise<{ pid: number; sport: number; call(): Promise<{ status: number; spanId: string | null }> }> {
  const child = spawn(process.execPath, [CALLER, proxy.url, '/proxy/beta/v1/chat/completions'], { stdio: ['pipe', 'pipe', 'inherit'] });
  caller = child;
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = JSON.parse((await lines.next()).value as string) as { pid: number; sport: number };
  return {
    ...first,
    async call() {
      child.stdin.write('go\n');
      return JSON.parse((await lines.next()).value as string) as { status: number; spanId: string | null };
    },
  };
}

describe('the causal trail on a call’s details', () => {
  it('shows what the caller’s child did after the answer, under the call', async () => {
    openai.behave({ toolCall: { name: 'run_shell', arguments: { command: 'curl https://example.com' } } });
    const a = await startCaller();
    const agentExec = tetragonExecId(a.pid, 8_000_000);
    agent.emit([tcpConnectEvent({ ...POD, pid: a.pid, sport: a.sport, dport: proxy.port, binary: '/usr/bin/python3', execId: agentExec })]);
    const answer = await a.call();
    expect(answer.status).toBe(200);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    const trailUrl = `${proxy.url}/_local/api/trail/${span.trace_id}`;
    const kept = (await (await fetch(trailUrl)).json()) as { calls: { ended: string }[] };
    const ended = Date.parse(kept.calls[0]!.ended);
    const sh = { ...POD, pid: a.pid + 1, execId: tetragonExecId(a.pid + 1, 8_000_100), parentExecId: agentExec, binary: '/bin/sh' };
    agent.emit([
      trailEvent({ ...sh, type: 'process_exec', arguments: '-c "curl https://example.com"', atMs: ended + 100 }),
      trailEvent({ ...sh, type: 'tcp_connect', daddr: '93.184.216.34', dport: 443, atMs: ended + 150 }),
      trailEvent({ ...sh, type: 'process_exit', status: 0, atMs: ended + 300 }),
    ]);
    await waitFor('the exit in the trail', async () => (await (await fetch(trailUrl)).text()).includes('"kind":"exit"'));

    await page.goto(`${proxy.url}/_local/`);
    const row = page.locator(`#traces tbody tr[data-span-id="${answer.spanId}"]`);
    await row.waitFor();
    await row.getByRole('button').click();
    const tree = page.locator('#span-trail');
    await expect.poll(() => tree.textContent()).toContain(`+0.100s exec pid ${sh.pid} /bin/sh -c "curl https://example.com"`);
    const text = (await tree.textContent()) ?? '';
    expect(text).toContain(`call ${answer.spanId}: gpt-4o-mini on beta`);
    expect(text).toContain(`  caller pid ${a.pid} /usr/bin/python3`);
    expect(text).toContain(`      +0.150s connect pid ${sh.pid} /bin/sh -> 93.184.216.34:443`);
    expect(text).toContain(`      +0.300s exit pid ${sh.pid} /bin/sh exit code 0`);
    expect(await page.locator('#span-trail-status').textContent()).toBe('');
    await page.locator('#span-detail-close').click();
  });

  it('says a call made by a process Tetragon did not name has no trail, without asking for one', async () => {
    const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const spanId = res.headers.get('x-proxy-span-id')!;
    const span = await findSpan(proxy.url, { spanId });
    expect(span.process?.attribution).toBe('unattributed');
    const row = page.locator(`#traces tbody tr[data-span-id="${spanId}"]`);
    await row.waitFor();
    await row.getByRole('button').click();
    await expect.poll(() => page.locator('#span-trail-status').textContent()).toBe('No trail: the process that made this call was not named by Tetragon (provenance).');
    expect(await page.locator('#span-trail').textContent()).toBe('');
    expect(problems).toEqual([]);
  });
});
