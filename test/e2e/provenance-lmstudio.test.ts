// Provenance on the LM Studio-compatible port (local.lmstudioPort): a call there is metered like one on the proxy
// port, so its span names the process that opened the connection, matched on the LM Studio port's tcp_connect.

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTetragonAgent, startFakeTetragonAgent, tcpConnectEvent } from '../fakes/tetragon-agent.ts';
import { type FakeUpstream, startFakeUpstream } from '../fakes/llm-upstream.ts';
import { startFakeOllama, type FakeOllama } from '../fakes/ollama.ts';
import { findSpan } from '../support/spans.ts';
import { freePort, type ProxyProcess, startProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY } from './upstream-bed.ts';

const CALLER = fileURLToPath(new URL('./provenance-caller.ts', import.meta.url));
const POD = { namespace: 'team-a', pod: 'web-1' };

describe('provenance on the LM Studio-compatible port', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let openai: FakeUpstream;
  let ollama: FakeOllama;
  let proxy: ProxyProcess;
  let lmstudioPort: number;
  let caller: ChildProcess | undefined;

  beforeAll(async () => {
    [agent, openai, ollama] = await Promise.all([
      startFakeTetragonAgent(),
      startFakeUpstream('openai', { expectApiKey: OPENAI_KEY }),
      startFakeOllama({ models: ['llama3.2:latest'] }),
    ]);
    lmstudioPort = await freePort();
    proxy = await startProxyProcess({
      configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
local:
  runtime: { baseUrl: "${ollama.url}" }
  lmstudioPort: 1
provenance:
  address: "${agent.address}"
  attributionWindowMs: 1000
`,
      env: { OPENAI_API_KEY: OPENAI_KEY, TOLLGATE_LMSTUDIO_PORT: String(lmstudioPort), TOLLGATE_POD_NAME: POD.pod, TOLLGATE_POD_NAMESPACE: POD.namespace },
    });
    await agent.waitForSubscribers(1);
  });

  afterAll(async () => {
    caller?.kill();
    await proxy?.stop();
    await Promise.all([openai?.close(), ollama?.close(), agent?.stop()]);
  });

  it('names the caller of a cloud model on the LM Studio port', async () => {
    caller = spawn(process.execPath, [CALLER, `http://127.0.0.1:${lmstudioPort}`, '/v1/chat/completions'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: caller.stdout! })[Symbol.asyncIterator]();
    const { pid, sport } = JSON.parse((await lines.next()).value as string) as { pid: number; sport: number };
    agent.emit([tcpConnectEvent({ ...POD, pid, sport, dport: lmstudioPort, binary: '/usr/bin/python3', arguments: 'agent.py' })]);
    caller.stdin!.write('go\n');
    const answer = JSON.parse((await lines.next()).value as string) as { status: number; spanId: string | null };
    expect(answer.status).toBe(200);
    const span = await findSpan(proxy.url, { spanId: answer.spanId });
    expect(span).toMatchObject({ model: 'gpt-4o-mini', route: 'beta' });
    expect(span.process).toMatchObject({ attribution: 'tetragon', pid, executable_path: '/usr/bin/python3', container_name: 'app' });
  });
});
