// The native routes forwarded every path with the proxy's credential, but only answers that carry usage inline
// were metered: images, audio, batches, background responses, the Realtime API's client secrets (a key the caller
// then spends directly) and the like went out at 0 USD and never reached a budget. Now each format declares what
// it can meter and what is free; anything else is refused before anything is sent, unless the route's owner
// allows unmetered calls in the config file or the ProxyConfig, and then each is logged, counted and marked.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { defaultReply, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed({
    configYaml: `
routes:
  - { name: images, format: openai-chat, baseUrl: "http://127.0.0.1:9/images", credential: { kind: api-key, env: OPENAI_API_KEY }, unmetered: allow }
`,
  });
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.reply = defaultReply;
  bed.upstream.calls.length = 0;
});

async function refusedUnmetered(method: string, path: string, body?: unknown): Promise<void> {
  const res = body === undefined ? await fetch(`${bed.proxy.url}${path}`, { method }) : await postJson(bed, path, body);
  const answer = (await res.json()) as { error: { code: string; message: string } };
  expect(res.status, answer.error?.message).toBe(403);
  expect(answer.error.code).toBe('unmetered_endpoint');
  expect(answer.error.message).toMatch(/is not a call Tollgate can meter .*: refused so the proxy's credential is not spent unseen/);
  const span = await bed.span(res.headers.get('x-proxy-span-id'));
  expect(span).toMatchObject({ status: 'rejected', cost_usd: 0 });
}

describe('a path its format cannot meter is refused before anything is sent', () => {
  it.each([
    ['OpenAI image variations', 'POST', '/proxy/beta/v1/images/variations', { model: 'dall-e-2' }],
    ['an OpenAI fine-tuning job', 'POST', '/proxy/beta/v1/fine_tuning/jobs', { model: 'gpt-4o-mini', training_file: 'file-1' }],
    // Batches and background responses are reserved and charged when read (ADR 0913, test/e2e/deferred-charges.test.ts).
    ['an OpenAI vector store', 'POST', '/proxy/beta/v1/vector_stores', { name: 'docs', file_ids: ['file-1'] }],
    ["the Realtime API's client secrets", 'POST', '/proxy/beta/v1/realtime/client_secrets', { session: { type: 'realtime', model: 'gpt-realtime' } }],
    ['an Assistants run', 'POST', '/proxy/beta/v1/threads/thread_1/runs', { assistant_id: 'asst_1' }],
    ['an Anthropic skill', 'POST', '/proxy/gamma-direct/v1/skills', { display_title: 'docs' }],
    // Imagen's generation models are metered per image (ADR 0915); its editing model is not.
    ['Vertex AI image editing', 'POST', '/proxy/alpha/v1/projects/p/locations/us-central1/publishers/google/models/imagen-3.0-capability-001:predict', { instances: [] }],
    ['a Vertex AI context cache', 'POST', '/proxy/alpha/v1/projects/p/locations/us-central1/cachedContents', { contents: [] }],
  ])('%s: 403 unmetered_endpoint, nothing reaches the provider', async (_what, method, path, body) => {
    await refusedUnmetered(method, path, body);
    expect(bed.upstream.calls).toHaveLength(0);
  });

  it('a background response through /v1 is a 400 naming background', async () => {
    const res = await postJson(bed, '/v1/responses', { model: 'gpt-4o-mini', input: 'hi', background: true });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { param: 'background' } });
    expect(bed.upstream.calls).toHaveLength(0);
  });
});

describe('metered and free paths go through', () => {
  it('a chat completion is metered and charged', async () => {
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', messages: [] });
    expect(res.status).toBe(200);
    expect(await bed.span(res.headers.get('x-proxy-span-id'))).toMatchObject({ status: 'ok', input_tokens: 12, unmetered: false });
  });

  it.each([
    ['GET', '/proxy/beta/v1/models'],
    ['POST', '/proxy/beta/v1/moderations'],
    ['POST', '/proxy/gamma-direct/v1/messages/count_tokens'],
  ])('%s %s is free and forwarded', async (method, path) => {
    bed.reply = (_call, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    const res = method === 'GET' ? await fetch(`${bed.proxy.url}${path}`) : await postJson(bed, path, { model: 'claude-haiku-4-5', input: 'x', messages: [] });
    expect(res.status).toBe(200);
    expect(bed.upstream.calls).toHaveLength(1);
  });
});

describe('a route whose owner allows unmetered calls', () => {
  it('forwards them, logs each, counts it and marks its span unmetered', async () => {
    // The route `images` points nowhere reachable: the call is forwarded (and fails there), not refused.
    const res = await postJson(bed, '/proxy/images/v1/images/variations', { model: 'dall-e-2' });
    expect(res.status).toBe(502);
    const span = await bed.span(res.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({ route: 'images', unmetered: true });
    await waitFor('the unmetered call to be logged', () =>
      bed.proxy.logs.some((line) => line.msg === 'unmetered call forwarded: the route allows calls its format cannot meter' && line.route === 'images'),
    );
    const metrics = await (await fetch(`${bed.proxy.url}/metrics`)).text();
    expect(metrics).toContain('tollgate_unmetered_calls_total{route="images"} 1\n');
  });

  it('cannot be allowed through the config API, which has no authentication', async () => {
    const before = await (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
    const res = await postJson(bed, '/_local/api/config', { upstreams: { beta: { unmetered: 'allow' } } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/^upstreams\.beta\.unmetered cannot be set through this API/);
    expect(await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()).toEqual(before);
  });
});
