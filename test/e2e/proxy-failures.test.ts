// What a caller and an operator see when things go wrong: upstream down, slow, failing, streams cut or
// corrupted, credentials missing, the breaker opening and recovering, and bad input refused.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { freePort, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let deadPort: number;

const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const claude = { model: 'claude-sonnet-4-20250514', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };
const gemini = `/proxy/alpha/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`;

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${proxy.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function span(res: Response): Promise<SpanJson> {
  return findSpan(proxy.url, { spanId: res.headers.get('x-proxy-span-id') });
}

function logged(text: string): Record<string, unknown>[] {
  return proxy.logs.filter((l) => String(l.msg).includes(text));
}

/** The proxy's log lines come through a pipe, so a line can arrive after the response it belongs to. */
function untilLogged(text: string): Promise<Record<string, unknown>[]> {
  return waitFor(`the proxy to log \`${text}\``, () => {
    const lines = logged(text);
    return lines.length > 0 ? lines : undefined;
  });
}

beforeAll(async () => {
  bed = await startUpstreamBed();
  deadPort = await freePort(); // nothing listens here
  bed.metadata.setFailing(true); // ADC fails until a test turns it back on
});

afterAll(async () => {
  await bed?.close();
});

/**
 * Each describe block runs its own proxy: tests here fail upstreams on purpose, and a breaker one block
 * opened must not decide what the next block sees.
 */
function ownProxy(): void {
  beforeAll(async () => {
    proxy = await startProxyProcess({
      configYaml: bed
        .configYaml(
          `
server: { bodyLimitBytes: 4096 }
breaker: { consecutiveFailures: 3, openMs: 300, minimumRequests: 100 }
`,
        )
        .replace(/gamma-cloud: \{ baseUrl: "[^"]+"/, `gamma-cloud: { baseUrl: "http://127.0.0.1:${deadPort}"`)
        .replace(/beta: \{ baseUrl: "([^"]+)" \}/, 'beta: { baseUrl: "$1", timeoutMs: 400 }'),
      env: { ...bed.env, ANTHROPIC_API_KEY: undefined },
    });
  });
  afterAll(async () => {
    await proxy?.stop();
  });
}

afterEach(() => bed.reset());

describe('upstream failures become 502s that name the cause', () => {
  ownProxy();

  it('upstream down', async () => {
    const res = await post(`/proxy/gamma-cloud/v1/projects/${PROJECT}/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`, {
      anthropic_version: 'vertex-2023-10-16',
      max_tokens: 5,
      messages: [],
    });
    expect(res.status).toBe(502);
    expect(res.headers.get('x-proxy-trace-id')).toMatch(/^[0-9a-f]{32}$/);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toMatch(/upstream_unreachable|credential_unavailable/);
  });

  it('upstream slower than its timeout', async () => {
    bed.openai.behave({ delayMs: 2000 });
    const res = await post('/proxy/beta/v1/chat/completions', chat);
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    expect(await span(res)).toMatchObject({ status: 'error', error: expect.stringContaining('upstream_timeout') });
  });

  it('a missing API key fails the call that needs it, naming the variable', async () => {
    const res = await post('/proxy/gamma-direct/v1/messages', claude);
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('credential_unavailable');
    expect(body.error.message).toContain('ANTHROPIC_API_KEY');
    expect(bed.anthropic.requests).toHaveLength(0);
  });

  it('an ADC failure logs `failed to get ADC token` and returns 502', async () => {
    const res = await post(gemini, { contents: [] });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('credential_unavailable');
    await untilLogged('failed to get ADC token');
    expect(bed.vertex.requests).toHaveLength(0);
    bed.metadata.setFailing(false);
    const ok = await post(gemini, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
    expect(ok.status).toBe(200);
  });

  it('an upstream 5xx passes through with its body and is recorded as upstream_error', async () => {
    bed.openai.behave({ status: 503, forRequests: 1 });
    const res = await post('/proxy/beta/v1/chat/completions', chat);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBeTruthy();
    expect(await span(res)).toMatchObject({ status: 'upstream_error', status_code: 503 });
  });
});

describe('streams that break', () => {
  ownProxy();

  it('a stream cut mid-way reaches the caller cut, and the span records the error and the usage seen', async () => {
    bed.openai.behave({ abortStream: true, usage: { input: 10, output: 20 } });
    const cut = await post('/proxy/beta/v1/chat/completions', { ...chat, stream: true });
    expect(cut.status).toBe(200);
    await expect(cut.text()).rejects.toThrow();
    const recorded = await span(cut);
    expect(recorded.status).toBe('error');
    expect(String(recorded.error)).toContain('upstream_stream_error');
  });

  it('a Bedrock frame with a bad CRC is reported as a stream error', async () => {
    bed.bedrock.behave({ malformedStream: true, usage: { input: 10, output: 20 } });
    const res = await post('/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke-with-response-stream', {
      anthropic_version: 'bedrock-2023-05-31',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer().catch(() => undefined);
    const recorded = await span(res);
    expect(recorded.status).toBe('error');
    expect(String(recorded.error)).toMatch(/crc|checksum/i);
  });

  it('a stream that ends without its final events is recorded as an error, not as ok', async () => {
    bed.openai.behave({ truncateStream: true, usage: { input: 10, output: 20 } });
    const res = await post('/proxy/beta/v1/chat/completions', { ...chat, stream: true });
    expect(res.status).toBe(200);
    await res.text();
    expect((await span(res)).status).toBe('error');
  });
});

describe('circuit breaker', () => {
  ownProxy();

  it('opens after consecutive failures, logs `circuit breaker tripped`, and recovers through a probe', async () => {
    bed.openai.behave({ status: 500 });
    for (let i = 0; i < 3; i++) expect((await post('/proxy/beta/v1/chat/completions', chat)).status).toBe(500);
    const before = bed.openai.requests.length;
    const open = await post('/proxy/beta/v1/chat/completions', chat);
    expect(open.status).toBe(502);
    expect(((await open.json()) as { error: { code: string } }).error.code).toBe('circuit_open');
    const trip = await untilLogged('circuit breaker tripped');
    expect(trip.at(-1)).toMatchObject({ upstream: 'beta' });
    expect(bed.openai.requests.length).toBe(before); // the open breaker sent nothing upstream
    bed.openai.behave({});
    // Calls are refused until openMs has passed; then one probe goes through and its success closes the breaker.
    const refusals: string[] = [];
    const probe = await waitFor(
      'the breaker to let a probe through',
      async () => {
        const res = await post('/proxy/beta/v1/chat/completions', chat);
        if (res.status !== 502) return res;
        refusals.push(((await res.json()) as { error: { code: string } }).error.code);
        return undefined;
      },
      { intervalMs: 20 },
    );
    expect(refusals.filter((code) => code !== 'circuit_open')).toEqual([]);
    expect(probe.status).toBe(200);
    expect(bed.openai.requests.length).toBe(before + 1); // refused calls never reached the upstream, the probe did
    expect(await untilLogged('circuit breaker half-open; letting one probe through')).toHaveLength(1);
    expect((await post('/proxy/beta/v1/chat/completions', chat)).status).toBe(200);
  });
});

describe('bad input gets a clear 4xx', () => {
  ownProxy();

  it('unknown route', async () => {
    const res = await post('/proxy/delta/v1/chat/completions', chat);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('unknown route "delta"');
  });

  it('malformed JSON on a route that reads the body', async () => {
    const res = await post('/proxy/beta/v1/chat/completions', '{"model": "gpt-4o-mini",');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('not valid JSON');
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('a body over the limit, read or streamed', async () => {
    const big = { ...chat, messages: [{ role: 'user', content: 'x'.repeat(8000) }] };
    const read = await post('/proxy/beta/v1/chat/completions', big);
    expect(read.status).toBe(413);
    const streamed = await post(gemini, { contents: [{ role: 'user', parts: [{ text: 'x'.repeat(8000) }] }] });
    expect(streamed.status).toBe(413);
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('the config file is checked before anything listens', async () => {
    await expect(startProxyProcess({ configYaml: 'upstreams:\n  beta: { baseUrl: "ftp://nope" }\n' })).rejects.toThrow(/upstreams\.beta\.baseUrl must be an http\(s\) URL/);
    await expect(startProxyProcess({ configYaml: 'pricing:\n  models: [ { provider: openai, model: x, input_per_million: -1, output_per_million: 1 } ]\n' })).rejects.toThrow(
      /pricing\.models\[0\]\.input_per_million/,
    );
    await expect(startProxyProcess({ configYaml: 'upstreams: [\n' })).rejects.toThrow(/not valid YAML at line/);
  });

  it('a span file that cannot be created stops start-up with exit 2 and a message naming the path, not a stack trace', async () => {
    // A plain file where the span file's folder should be: no user, root included, can create the folder.
    const blocked = join(mkdtempSync(join(tmpdir(), 'tollgate-blocked-')), 'not-a-folder');
    writeFileSync(blocked, '');
    const failure = await startProxyProcess({ configYaml: `storage: { kind: sqlite, path: "${blocked}/spans.db" }\n` }).then(
      () => 'started',
      (error: Error) => error.message,
    );
    expect(failure).toMatch(new RegExp(`^tollgate proxy exited with 2: tollgate proxy: storage\\.path ${blocked}/spans\\.db cannot be opened: \\S`));
    expect(failure).not.toContain('    at ');
  });
});

describe('health', () => {
  ownProxy();

  it('/healthz answers ok while serving', async () => {
    const res = await fetch(`${proxy.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });
});

describe('storage faults', () => {
  it("while another process holds the span file's write lock, GET /_local/api/traces answers with what is stored, says what is pending, and loses nothing", async () => {
    const locked = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
    const db = new Database(join(locked.dir, 'spans.db'));
    try {
      db.pragma('busy_timeout = 5000');
      db.exec('BEGIN IMMEDIATE'); // the writer's transactions now wait out SQLite's busy timeout, then fail
      const call = await fetch(`${locked.url}/proxy/beta/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(call.status).toBe(200);
      const spanId = call.headers.get('x-proxy-span-id');
      const traces = (await (await fetch(`${locked.url}/_local/api/traces`)).json()) as { spans: { span_id: string }[]; pending: number };
      // answered before the blocked write could finish or fail: the call is pending, not dropped
      expect(traces.pending).toBe(1);
      expect(traces.spans.map((s) => s.span_id)).not.toContain(spanId);
      db.exec('COMMIT');
      let stored: { span_id: string }[] = [];
      for (let i = 0; i < 100 && !stored.some((s) => s.span_id === spanId); i++) {
        stored = ((await (await fetch(`${locked.url}/_local/api/traces`)).json()) as { spans: { span_id: string }[] }).spans;
      }
      expect(stored.map((s) => s.span_id)).toContain(spanId);
    } finally {
      if (db.inTransaction) db.exec('ROLLBACK');
      db.close();
      await locked.stop();
    }
  });
});
