// SIGTERM: stop accepting, let in-flight calls (streams included) finish, flush spans to SQLite, exit 0.
// The span file is then read directly, as an analyst answering "who spent what" would.

import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;

beforeAll(async () => {
  bed = await startUpstreamBed();
});

afterAll(async () => {
  await bed?.close();
});

it('drains an in-flight stream on SIGTERM, flushes its span and exits 0', async () => {
  const proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
  const dbPath = join(proxy.dir, 'spans.db');
  bed.openai.behave({ delayMs: 600, usage: { input: 30, output: 12 }, chunkCount: 20 });
  const inFlight = fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': 'carol' },
    body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  // let the request reach the upstream before the signal
  await waitFor('the request to reach the upstream', () => bed.openai.requests.length > 0, 5_000);
  expect(bed.openai.requests).toHaveLength(1);
  proxy.child.kill('SIGTERM');
  const res = await inFlight;
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('data: [DONE]');
  const exited = await new Promise<number | null>((resolve) => {
    if (proxy.child.exitCode !== null) resolve(proxy.child.exitCode);
    else proxy.child.once('exit', (code) => resolve(code));
  });
  expect(exited).toBe(0);
  expect(proxy.logs.some((l) => l.msg === 'tollgate proxy stopped')).toBe(true);

  const db = new Database(dbPath, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT user_id, gen_ai_provider_name, gen_ai_request_model, gen_ai_total_tokens, gen_ai_cost_usd, start_time, trace_id, status FROM spans')
      .all() as Record<string, unknown>[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ user_id: 'carol', gen_ai_provider_name: 'openai', gen_ai_request_model: 'gpt-4o-mini', gen_ai_total_tokens: 42, status: 'ok' });
    expect(rows[0]!.gen_ai_cost_usd).toBeCloseTo((30 * 0.15 + 12 * 0.6) / 1e6, 12);
    expect(String(rows[0]!.start_time)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  } finally {
    db.close();
  }
  await proxy.stop();
});

it('a stream longer than the drain deadline is cut at it, recorded as stopped by the shutdown, and its span is kept', async () => {
  // An upstream whose stream starts and never ends.
  const open: ServerResponse[] = [];
  const endless: Server = createServer((_req, res) => {
    open.push(res);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n');
  });
  await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve));
  const upstream = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`;
  const proxy = await startProxyProcess({
    configYaml: `server: { drainTimeoutMs: 300 }\nupstreams: { beta: { baseUrl: "${upstream}" } }\nstorage: { kind: sqlite, path: spans.db }\n`,
    env: { OPENAI_API_KEY: 'sk-test' },
  });
  try {
    const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'cut-by-shutdown' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const reader = res.body!.getReader();
    await reader.read(); // the stream is flowing
    proxy.child.kill('SIGTERM');
    await expect(
      (async () => {
        for (;;) if ((await reader.read()).done) return 'ended cleanly';
      })(),
    ).rejects.toThrow();
    const exited = await new Promise<number | null>((resolve) => {
      if (proxy.child.exitCode !== null) resolve(proxy.child.exitCode);
      else proxy.child.once('exit', (code) => resolve(code));
    });
    expect(exited).toBe(0);
    expect(proxy.logs.map((l) => l.msg)).not.toContain('span recorded after the span writer closed; dropped');
    const db = new Database(join(proxy.dir, 'spans.db'), { readonly: true });
    try {
      const rows = db.prepare("SELECT status, error FROM spans WHERE request_id = 'cut-by-shutdown'").all() as { status: string; error: string }[];
      expect(rows).toEqual([{ status: 'error', error: 'shutting_down: the proxy stopped and closed the connection after waiting 300 ms for the call to finish' }]);
    } finally {
      db.close();
    }
  } finally {
    await proxy.stop();
    for (const res of open) res.destroy();
    await new Promise((resolve) => endless.close(resolve));
  }
});

it('starts with no config file as the local proxy, on its embedded defaults', async () => {
  const proxy = await startProxyProcess();
  try {
    const config = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as {
      config: { storage: { kind: string; path: string }; pricing: { models: { provider: string; model: string }[] } };
    };
    expect(config.config.storage).toMatchObject({ kind: 'sqlite', path: 'tollgate.db' });
    const models = config.config.pricing.models.map((m) => `${m.provider}/${m.model}`);
    expect(models).toEqual(expect.arrayContaining(['openai/gpt-4o', 'anthropic/claude-sonnet-4', 'google/gemini-2.5-flash']));
  } finally {
    await proxy.stop();
  }
});

it('serves probes on a health-only listener that forwards nothing', async () => {
  const { freePort } = await import('./proxy-process.ts');
  const healthPort = await freePort();
  const proxy = await startProxyProcess({ env: { TOLLGATE_HEALTH_PORT: String(healthPort) } });
  try {
    const health = await fetch(`http://127.0.0.1:${healthPort}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const proxied = await fetch(`http://127.0.0.1:${healthPort}/proxy/beta/v1/chat/completions`, { method: 'POST', body: '{}' });
    expect(proxied.status).toBe(404);
    const management = await fetch(`http://127.0.0.1:${healthPort}/_local/api/config`);
    expect(management.status).toBe(404);
  } finally {
    await proxy.stop();
  }
});

it('in a pod (TOLLGATE_STATE_DIR set) keeps its span file in the state directory, not the read-only working directory', async () => {
  const { mkdtempSync, existsSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const stateDir = mkdtempSync(join(tmpdir(), 'tollgate-state-'));
  const proxy = await startProxyProcess({ env: { TOLLGATE_STATE_DIR: stateDir } });
  try {
    const { config } = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { config: { storage: { path: string; maxSpans: number } } };
    expect(config.storage).toMatchObject({ path: join(stateDir, 'spans.db'), maxSpans: 20_000 });
    expect(existsSync(join(stateDir, 'spans.db'))).toBe(true);
    expect(existsSync(join(proxy.dir, 'tollgate.db'))).toBe(false);
  } finally {
    await proxy.stop();
  }
});
