// The local proxy's runtime features as a developer meets them: the official `openai` SDK pointed at the
// LM Studio-compatible port (and at /v1 of the proxy port) of a real `tollgate proxy`, with a fake Ollama as
// the local runtime and the fake OpenAI as the cloud; the runtime started and stopped through the management
// API as the default `ollama serve` (a fake `ollama` first on PATH); a model pulled with its progress stream.
// Local calls are spans with provider `local` and cost 0, cloud calls are priced, both on the same list.

import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { get } from 'node:http';
import OpenAI, { APIError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeOllamaBinDir } from '../fakes/ollama-cli.ts';
import { startFakeOllama, type FakeOllama } from '../fakes/ollama.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { freePort, startProxyProcess, type ProxyProcess } from './proxy-process.ts';

const OPENAI_KEY = 'sk-openai-local-test';
const WEATHER: ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

/** What a tool-using client sends after running the tool: the call, then its result. */
function toolRound(call: { id: string; function: { name: string; arguments: string } }): ChatCompletionMessageParam[] {
  return [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: call.function }] },
    { role: 'tool', tool_call_id: call.id, content: '{"sky":"sunny"}' },
  ];
}

describe('the LM Studio-compatible port and /v1 with a local runtime', () => {
  let openai: FakeUpstream;
  let ollama: FakeOllama;
  let proxy: ProxyProcess;
  let lmstudio: OpenAI;
  let lmstudioUrl: string;

  beforeAll(async () => {
    [openai, ollama] = await Promise.all([startFakeUpstream('openai', { expectApiKey: OPENAI_KEY }), startFakeOllama({ models: ['llama3.2:latest', 'nomic-embed-text:latest'] })]);
    const port = await freePort();
    proxy = await startProxyProcess({
      configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
local:
  runtime: { baseUrl: "${ollama.url}" }
  lmstudioPort: 1
storage: { kind: sqlite, path: spans.db }
budgets:
  policies:
    - { name: carol-tiny, users: [carol], limitUsd: 0.000006, period: month, timeZone: UTC, alertThresholds: [100], enforcement: block }
`,
      // the variable wins over the file, as TOLLGATE_PORT does
      env: { OPENAI_API_KEY: OPENAI_KEY, TOLLGATE_LMSTUDIO_PORT: String(port) },
    });
    lmstudioUrl = `http://127.0.0.1:${port}`;
    lmstudio = new OpenAI({ baseURL: `${lmstudioUrl}/v1`, apiKey: 'lm-studio', maxRetries: 0 });
  });

  afterAll(async () => {
    await proxy?.stop();
    await Promise.all([openai?.close(), ollama?.close()]);
  });

  it('lists the local and the cloud models, owned_by telling them apart', async () => {
    const models = [];
    for await (const model of lmstudio.models.list()) models.push(model);
    const owners = Object.fromEntries(models.map((model) => [model.id, model.owned_by]));
    expect(owners).toMatchObject({
      'llama3.2:latest': 'local',
      'nomic-embed-text:latest': 'local',
      'gpt-4o-mini': 'openai',
      'claude-sonnet-4': 'anthropic',
      'gemini-2.5-flash': 'google',
    });
    // The proxy port's /v1 lists the same when a local runtime is configured.
    const onProxyPort = (await (await fetch(`${proxy.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(onProxyPort.data.map((model) => model.id).sort()).toEqual(models.map((model) => model.id).sort());
    // A model pulled since is listed at once (the listing is cached for two seconds at most).
    const pulled = await fetch(`${proxy.url}/_local/api/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"qwen2.5-coder:7b"}' });
    await pulled.text();
    await waitFor('the pulled model on /v1/models', async () => (await lmstudio.models.retrieve('qwen2.5-coder:7b').catch(() => undefined))?.owned_by === 'local', 5_000);
  });

  it('routes a local model to the runtime and a cloud model to its provider: spans local at cost 0, cloud priced', async () => {
    const { data: local, response: localResponse } = await lmstudio.chat.completions.create({ model: 'llama3.2', messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    expect(local.choices[0]!.message.content).toBe('Hello from the fake Ollama.');
    const ollamaCall = ollama.requests.at(-1)!;
    expect(ollamaCall.path).toBe('/v1/chat/completions');
    // No credential of the caller's or the proxy's reaches the runtime.
    expect(ollamaCall.headers.authorization).toBeUndefined();
    expect(await findSpan(proxy.url, { spanId: localResponse.headers.get('x-proxy-span-id') })).toMatchObject({
      provider: 'local',
      route: 'local',
      model: 'llama3.2',
      name: 'chat llama3.2',
      input_tokens: 26,
      output_tokens: 9,
      cost_usd: 0,
      priced: true,
      status: 'ok',
    });

    const { data: cloud, response: cloudResponse } = await lmstudio.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    expect(cloud.model).toBe('gpt-4o-mini-2024-07-18');
    expect(openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    // 21 prompt and 9 completion tokens at 0.15 and 0.6 USD per million: 3.15e-6 + 5.4e-6.
    expect(await findSpan(proxy.url, { spanId: cloudResponse.headers.get('x-proxy-span-id') })).toMatchObject({
      provider: 'openai',
      route: 'beta',
      input_tokens: 21,
      output_tokens: 9,
      cost_usd: 0.00000855,
      priced: true,
    });
  });

  it('refuses a cloud model to a user whose budget is spent, on this port too, and still serves the local models (cost 0)', async () => {
    const carol = new OpenAI({ baseURL: `${lmstudioUrl}/v1`, apiKey: 'lm-studio', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'carol' } });
    const hi: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Hi' }];
    // One gpt-4o-mini call (0.00000855 USD) spends carol's 0.000006 USD. It is admitted: while it runs it holds
    // its estimated cost (about 80 bytes of request at four a token × 0.15 USD per million, plus max_tokens 1 ×
    // 0.60 per million: under 0.000005; ADR 1308).
    await carol.chat.completions.create({ model: 'gpt-4o-mini', messages: hi, max_tokens: 1 });
    await waitFor("carol's budget spent", async () => {
      const record = (await (await fetch(`${proxy.url}/_local/api/budgets/carol`)).json()) as { state?: string };
      return record.state === 'exhausted';
    });
    const refused = await carol.chat.completions.create({ model: 'gpt-4o-mini', messages: hi }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).code).toBe('budget_exceeded');

    const { data: local, response } = await carol.chat.completions.create({ model: 'llama3.2', messages: hi }).withResponse();
    expect(local.choices[0]!.message.content).toBe('Hello from the fake Ollama.');
    expect(await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).toMatchObject({ provider: 'local', user_id: 'carol', cost_usd: 0, status: 'ok' });
    // The proxy port's native route to the runtime is as free.
    const native = await fetch(`${proxy.url}/proxy/local/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'carol' },
      body: JSON.stringify({ model: 'llama3.2', messages: hi }),
    });
    expect(native.status, await native.clone().text()).toBe(200);
  });

  it('streams both ways, with the final usage chunk when asked for', async () => {
    for (const model of ['llama3.2', 'gpt-4o-mini']) {
      const { data: stream, response } = await lmstudio.chat.completions
        .create({ model, messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } })
        .withResponse();
      const chunks: ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
      expect(text.length, model).toBeGreaterThan(0);
      const usage = chunks.at(-1)!.usage!;
      const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') });
      expect(span.input_tokens, model).toBe(usage.prompt_tokens);
      expect(span.output_tokens, model).toBe(usage.completion_tokens);
      expect(span.provider).toBe(model === 'llama3.2' ? 'local' : 'openai');
    }
    // Without include_usage the proxy still counts the tokens (it asks the runtime for them), and the caller
    // gets no usage chunk it did not ask for.
    const { data: plain, response } = await lmstudio.chat.completions.create({ model: 'llama3.2', messages: [{ role: 'user', content: 'Hi' }], stream: true }).withResponse();
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of plain) chunks.push(chunk);
    expect(chunks.every((chunk) => chunk.usage === undefined || chunk.usage === null)).toBe(true);
    expect((ollama.requests.at(-1)!.json as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
    expect(await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).toMatchObject({ input_tokens: 26, output_tokens: 9 });
  });

  it('passes tool calls and results both ways', async () => {
    openai.behave({ toolCall: { name: 'get_weather', arguments: { city: 'Paris' } }, forRequests: 1 });
    for (const model of ['llama3.2', 'gpt-4o-mini']) {
      const first = await lmstudio.chat.completions.create({ model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [WEATHER] });
      const call = first.choices[0]!.message.tool_calls?.[0];
      expect(first.choices[0]!.finish_reason, model).toBe('tool_calls');
      expect(call?.type === 'function' ? call.function.name : undefined).toBe('get_weather');
      expect(JSON.parse(call?.type === 'function' ? call.function.arguments : '{}')).toEqual({ city: 'Paris' });
      const upstream = model === 'llama3.2' ? ollama : openai;
      expect((upstream.requests.at(-1)!.json as { tools: unknown }).tools).toEqual([WEATHER]);
      if (call?.type !== 'function') throw new Error('no function call');
      const second = await lmstudio.chat.completions.create({ model, messages: toolRound(call), tools: [WEATHER] });
      expect(second.choices[0]!.finish_reason, model).toBe('stop');
      const sent = (upstream.requests.at(-1)!.json as { messages: ChatCompletionMessageParam[] }).messages;
      expect(sent.at(-1)).toEqual({ role: 'tool', tool_call_id: call.id, content: '{"sky":"sunny"}' });
    }
    // Streamed, the local runtime's tool call arrives whole.
    const stream = await lmstudio.chat.completions.create({ model: 'llama3.2', messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER], stream: true });
    const names: string[] = [];
    for await (const chunk of stream) for (const call of chunk.choices[0]?.delta.tool_calls ?? []) if (call.function?.name) names.push(call.function.name);
    expect(names).toEqual(['get_weather']);
  });

  it('serves embeddings and completions for local models, and says a chat model is not served there', async () => {
    const { data: embedding, response } = await lmstudio.embeddings.create({ model: 'nomic-embed-text', input: ['hello world', 'good night moon'] }).withResponse();
    expect(embedding.data.map((item) => item.index)).toEqual([0, 1]);
    expect(await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).toMatchObject({
      name: 'embeddings nomic-embed-text',
      provider: 'local',
      input_tokens: 5,
      total_tokens: 5,
      cost_usd: 0,
    });
    const completion = await lmstudio.completions.create({ model: 'llama3.2', prompt: 'def add(a, b):' });
    expect(completion.choices[0]!.text).toBe(' return a + b');
    const streamed = await lmstudio.completions.create({ model: 'llama3.2', prompt: 'def add(a, b):', stream: true });
    let text = '';
    for await (const chunk of streamed) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(' return a + b');

    const refused = await lmstudio.embeddings.create({ model: 'claude-sonnet-4', input: 'hello' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(400);
    expect((refused as APIError).message).toContain('is not served on /v1/embeddings');
  });

  it('answers an unknown model in OpenAI shape, and passes the runtime errors on', async () => {
    const unknown = await lmstudio.chat.completions.create({ model: 'llama9', messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    expect((unknown as APIError).status).toBe(404);
    expect((unknown as APIError).code).toBe('model_not_found');
    expect((unknown as APIError).message).toContain("the models with a price entry and the local runtime's");
  });

  it('checks Host and Origin on the LM Studio port as on every listener', async () => {
    // fetch() will not send another Host: node:http will, as a DNS-rebinding page's browser does.
    const rebound = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      get(`${lmstudioUrl}/v1/models`, { headers: { host: 'rebind.evil.example:1234' } }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (text: string) => (body += text));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      }).once('error', reject);
    });
    expect(rebound.status).toBe(403);
    expect((JSON.parse(rebound.body) as { error: { code: string } }).error.code).toBe('host_not_allowed');
    const page = await fetch(`${lmstudioUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama3.2', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(page.status).toBe(403);
    // The proxy port's own page is not this port's: a page from 8181 calling 1234 is another origin.
    const proxyPage = await fetch(`${lmstudioUrl}/v1/models`, { headers: { origin: proxy.url, 'sec-fetch-site': 'same-site' } });
    expect(proxyPage.status).toBe(403);
    // Only /v1 is served here: the management API stays on the proxy port.
    expect((await fetch(`${lmstudioUrl}/_local/api/config`)).status).toBe(404);
  });
});

describe('the local runtime run by the proxy: `ollama serve` started, checked and stopped', () => {
  let proxy: ProxyProcess;
  let binDir: string;
  let runtimePort: number;

  beforeAll(async () => {
    binDir = fakeOllamaBinDir();
    runtimePort = await freePort();
    proxy = await startProxyProcess({
      configYaml: `local: { runtime: { baseUrl: "http://127.0.0.1:${runtimePort}" } }\nstorage: { kind: memory }\n`,
      // the default command, `ollama serve`, finds the fake first on PATH
      env: { PATH: `${binDir}:${process.env.PATH}`, FAKE_OLLAMA_MODELS: 'llama3.2:latest', OPENAI_API_KEY: 'sk-not-for-the-runtime' },
    });
  });

  afterAll(async () => {
    await proxy?.stop();
    rmSync(binDir, { recursive: true, force: true });
  });

  const post = async (path: string, body?: unknown) => {
    const res = await fetch(
      `${proxy.url}/_local/api/${path}`,
      body === undefined ? { method: 'POST' } : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const health = async () => ((await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { local: Record<string, any> }).local;
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it('answers plainly when there is nothing to stop, and starts the runtime once', async () => {
    expect(await post('stop')).toEqual({ status: 200, body: { status: 'not_running', baseUrl: `http://127.0.0.1:${runtimePort}` } });
    expect((await health()).reachable).toBe(false);

    const started = await post('start');
    expect(started).toMatchObject({ status: 200, body: { status: 'started', managed: true, version: '0.12.6' } });
    const pid = started.body.pid as number;
    expect(alive(pid)).toBe(true);
    expect(await post('start')).toEqual({ status: 200, body: { status: 'already_running', managed: true, pid, baseUrl: `http://127.0.0.1:${runtimePort}` } });

    const view = await health();
    expect(view).toMatchObject({ reachable: true, version: '0.12.6', models: ['llama3.2:latest'], process: { state: 'running', pid, command: ['ollama', 'serve'] } });
    expect(view.process.logTail.join('\n')).toContain(`Listening on 127.0.0.1:${runtimePort}`);
    // The runtime does not inherit the proxy's provider credentials.
    const environ = execFileSync('cat', [`/proc/${pid}/environ`])
      .toString('utf8')
      .split('\0');
    expect(environ.some((entry) => entry.startsWith('OPENAI_API_KEY='))).toBe(false);
    expect(environ).toContain(`OLLAMA_HOST=127.0.0.1:${runtimePort}`);

    const logs = (await (await fetch(`${proxy.url}/_local/api/runtime/logs`)).json()) as { lines: string[] };
    expect(logs.lines.some((line) => line.includes('Listening on'))).toBe(true);
  });

  it('pulls a model through the runtime, streaming its progress, and passes the runtime refusal on', async () => {
    const res = await fetch(`${proxy.url}/_local/api/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"qwen2.5-coder"}' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { status?: string; completed?: number; total?: number; error?: string });
    expect(lines[0]).toEqual({ status: 'pulling manifest' });
    expect(lines.some((line) => line.total !== undefined && line.completed === line.total)).toBe(true);
    expect(lines.at(-1)).toEqual({ status: 'success' });
    expect((await health()).models).toContain('qwen2.5-coder:latest');

    const missing = await fetch(`${proxy.url}/_local/api/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"no-such-model"}' });
    expect((await missing.text()).trim().split('\n').at(-1)).toBe('{"error":"pull model manifest: file does not exist"}');
    expect(await post('pull', { model: '../etc' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    expect(await post('pull', { name: 'llama3.2' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    const text = await fetch(`${proxy.url}/_local/api/pull`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"model":"llama3.2"}' });
    expect(text.status).toBe(415);
  });

  it('stops the runtime it started, and stopping again is no error', async () => {
    const pid = (await health()).process.pid as number;
    const stopped = await post('stop');
    expect(stopped).toMatchObject({ status: 200, body: { status: 'stopped', pid } });
    expect(alive(pid)).toBe(false);
    expect(await post('stop')).toMatchObject({ status: 200, body: { status: 'not_running' } });
    expect((await health()).process).toMatchObject({ state: 'stopped', pid: null, exit: { stoppedByProxy: true } });
    const unreachable = await post('pull', { model: 'llama3.2' });
    expect(unreachable).toMatchObject({ status: 502, body: { error: { code: 'local_runtime_unreachable' } } });
  });

  it('stops the runtime when the proxy stops', async () => {
    const started = await post('start');
    const pid = started.body.pid as number;
    expect(alive(pid)).toBe(true);
    expect(await proxy.stop()).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(proxy.logs.some((line) => line.msg === 'local runtime stopped' && line.pid === pid)).toBe(true);
  });
});

describe('a runtime started elsewhere, and a runtime that cannot start', () => {
  it('uses a runtime that already answers and refuses to stop it; a command that fails is reported with its last lines', async () => {
    const ollama = await startFakeOllama();
    const binDir = fakeOllamaBinDir();
    const proxy = await startProxyProcess({
      configYaml: `local: { runtime: { baseUrl: "${ollama.url}" } }\nstorage: { kind: memory }\n`,
      env: { PATH: `${binDir}:${process.env.PATH}` },
    });
    try {
      const post = async (path: string) => {
        const res = await fetch(`${proxy.url}/_local/api/${path}`, { method: 'POST' });
        return { status: res.status, body: (await res.json()) as Record<string, any> };
      };
      expect(await post('start')).toMatchObject({ status: 200, body: { status: 'already_running', managed: false, version: '0.12.6' } });
      const stop = await post('stop');
      expect(stop).toMatchObject({ status: 409, body: { error: { code: 'local_runtime_not_managed' } } });
      expect(stop.body.error.message).toContain('was not started by this proxy');
    } finally {
      await proxy.stop();
      await ollama.close();
    }

    const failing = await startProxyProcess({
      configYaml: `local: { runtime: { baseUrl: "http://127.0.0.1:${await freePort()}" } }\nstorage: { kind: memory }\n`,
      env: { PATH: `${binDir}:${process.env.PATH}`, FAKE_OLLAMA_EXIT: '3' },
    });
    try {
      const res = await fetch(`${failing.url}/_local/api/start`, { method: 'POST' });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(res.status).toBe(502);
      expect(body.error.code).toBe('local_runtime_start_failed');
      expect(body.error.message).toContain('exited before its API answered (exit code 3)');
      expect(body.error.message).toContain('could not create blob directory: permission denied');
    } finally {
      await failing.stop();
      rmSync(binDir, { recursive: true, force: true });
    }
  });
});

describe('where the local runtime is off', () => {
  it('is off in a pod: no LM Studio port, no runtime models, a clear 409 from the runtime API', async () => {
    const port = await freePort();
    const dir = (await import('node:fs')).mkdtempSync(`${(await import('node:os')).tmpdir()}/tollgate-pod-`);
    const proxy = await startProxyProcess({ env: { TOLLGATE_STATE_DIR: dir, TOLLGATE_LMSTUDIO_PORT: String(port) } });
    try {
      const start = await fetch(`${proxy.url}/_local/api/start`, { method: 'POST' });
      expect(start.status).toBe(409);
      expect(((await start.json()) as { error: { code: string } }).error.code).toBe('local_runtime_disabled');
      expect(await fetch(`http://127.0.0.1:${port}/v1/models`).catch((error: Error) => error.message)).toBe('fetch failed');
      expect(((await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { local: unknown }).local).toEqual({ enabled: false });
      const embeddings = await fetch(`${proxy.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"x","input":"y"}' });
      expect(embeddings.status).toBe(404);
    } finally {
      await proxy.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps serving when the LM Studio port is taken, and says why in the log and the health view', async () => {
    const blocker = (await import('node:net')).createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    const proxy = await startProxyProcess({ configYaml: 'storage: { kind: memory }\n', env: { TOLLGATE_LMSTUDIO_PORT: String(port) } });
    try {
      const line = await waitFor('the listener warning', () => proxy.logs.find((entry) => entry.msg === 'LM Studio-compatible listener not started'), 5_000);
      expect(line).toMatchObject({ port, problem: `port ${port} is in use (LM Studio itself listens there)` });
      const local = ((await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { local: { lmstudio: unknown } }).local;
      expect(local.lmstudio).toEqual({ port, listening: false, problem: `port ${port} is in use (LM Studio itself listens there)` });
      expect((await fetch(`${proxy.url}/healthz`)).status).toBe(200);
    } finally {
      await proxy.stop();
      blocker.close();
    }
  });
});
