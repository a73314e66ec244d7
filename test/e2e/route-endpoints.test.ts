// Several keys or regions for one route (ADR 0008, docs/routes.md#several-keys-or-regions-for-one-route): real
// `tollgate proxy` processes whose routes have `endpoints`, against fakes that each check the key they expect.
// Calls share out by weight, go on to the next endpoint when one fails before its answer is relayed (so the caller
// sees no failure), cool an endpoint down for a 429's Retry-After, go to the idle endpoint under
// least-outstanding, and reach each Vertex AI location at its own host and path.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { freePort, refusedConfigFile, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const KEY_A = 'sk-endpoint-a-from-env';
const KEY_B = 'sk-endpoint-b-from-file';
const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const claude = { model: 'claude-sonnet-4@20250514', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };

let a: FakeUpstream;
let b: FakeUpstream;
let keyFile: string;

beforeAll(async () => {
  [a, b] = await Promise.all([startFakeUpstream('openai', { expectApiKey: KEY_A }), startFakeUpstream('openai', { expectApiKey: KEY_B })]);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-endpoints-'));
  keyFile = join(dir, 'key-b');
  writeFileSync(keyFile, `${KEY_B}\n`);
});

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

/** Two OpenAI endpoints of route beta, with their own keys (one from a variable, one from a file); `extra` is appended. */
function twoKeys(opts: { weights?: [number, number]; strategy?: string; extra?: string; third?: string } = {}): string {
  const [wa, wb] = opts.weights ?? [1, 1];
  return `
upstreams:
  beta:
    ${opts.strategy ? `strategy: ${opts.strategy}` : ''}
    endpoints:
      - { name: a, weight: ${wa}, baseUrl: "${a.url}", credential: { env: KEY_A } }
      ${opts.third ?? ''}
      - { name: b, weight: ${wb}, baseUrl: "${b.url}", credential: { file: ${keyFile} } }
storage: { kind: memory }
${opts.extra ?? ''}
`;
}

/** One proxy per describe block: breakers and cool-downs one block causes must not decide what the next sees. */
function ownProxy(config: () => string): () => ProxyProcess {
  let proxy: ProxyProcess;
  beforeAll(async () => {
    a.reset();
    b.reset();
    proxy = await startProxyProcess({ configYaml: config(), env: { KEY_A } });
  });
  afterAll(async () => {
    await proxy?.stop();
  });
  return () => proxy;
}

function post(proxy: ProxyProcess, path: string, body: unknown): Promise<Response> {
  return fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** A call through /v1 or natively on /proxy/beta, alternately: both share the route's endpoints. */
function call(proxy: ProxyProcess, i: number): Promise<Response> {
  return post(proxy, i % 2 === 0 ? '/v1/chat/completions' : '/proxy/beta/v1/chat/completions', chat);
}

async function health(
  proxy: ProxyProcess,
): Promise<{ breakers: Record<string, string>; endpoints?: Record<string, Record<string, { breaker: string; coolingDownMs: number; outstanding: number }>> }> {
  return (await (await fetch(`${proxy.url}/_local/api/health`)).json()) as never;
}

/** The `llm call` log lines, which name the endpoint that answered; they come through a pipe, so after the answers. */
function callLines(proxy: ProxyProcess, count: number): Promise<Record<string, unknown>[]> {
  return waitFor(`${count} llm call lines`, () => {
    const lines = proxy.logs.filter((line) => line.msg === 'llm call');
    return lines.length >= count ? lines : undefined;
  });
}

describe('two OpenAI keys, weights 3 and 1', () => {
  const proxy = ownProxy(() => twoKeys({ weights: [3, 1] }));

  it('share 40 calls 30 to 10, each endpoint sending its own key', async () => {
    for (let i = 0; i < 40; i++) {
      const res = await call(proxy(), i);
      expect(res.status, await res.clone().text()).toBe(200);
      await res.arrayBuffer();
    }
    // Smooth weighted round robin is exact for calls one after another: a a b a, ten times (endpoint-chooser.ts).
    // No tolerance is needed; a weighted random choice would need one (30 ± 8 covers 99.9 % of Binomial(40, 0.75)).
    expect(a.requests).toHaveLength(30);
    expect(b.requests).toHaveLength(10);
    // The fakes refuse any other key with 401, so 40 answers of 200 say each key went only to its endpoint.
    expect(new Set(a.requests.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${KEY_A}`]));
    expect(new Set(b.requests.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${KEY_B}`]));
    const lines = await callLines(proxy(), 40);
    expect(lines.filter((line) => line.endpoint === 'a')).toHaveLength(30);
    expect(lines.filter((line) => line.endpoint === 'b')).toHaveLength(10);
  });
});

describe('an endpoint answering 500s, and one that refuses connections', () => {
  let dead: number;
  beforeAll(async () => {
    dead = await freePort(); // nothing listens here
  });
  const proxy = ownProxy(() =>
    twoKeys({
      extra: 'breaker: { consecutiveFailures: 2, minimumRequests: 100, openMs: 600000 }',
      third: `- { name: dead, baseUrl: "http://127.0.0.1:${dead}", credential: { env: KEY_A } }`,
    }),
  );

  it('has its breaker opened while every call, on /v1 and natively with a JSON body, succeeds through the other', async () => {
    a.behave({ status: 500 });
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await call(proxy(), i);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual(Array(12).fill(200));
    // Each failing endpoint was tried until its breaker opened (consecutiveFailures: 2), never after.
    expect(a.requests).toHaveLength(2);
    expect(b.requests).toHaveLength(12);
    const tripped = await waitFor('both breakers to trip', () => {
      const lines = proxy().logs.filter((line) => line.msg === 'circuit breaker tripped');
      return lines.length >= 2 ? lines : undefined;
    });
    expect(tripped.map((line) => `${String(line.upstream)}/${String(line.endpoint)}`).sort()).toEqual(['beta/a', 'beta/dead']);
    const view = await health(proxy());
    expect(view.breakers.beta).toBe('closed');
    expect(view.endpoints?.beta).toMatchObject({ a: { breaker: 'open' }, dead: { breaker: 'open' }, b: { breaker: 'closed', coolingDownMs: 0 } });
    const metrics = await (await fetch(`${proxy().url}/metrics`)).text();
    expect(sampleValue(metrics, 'tollgate_endpoint_breaker_state', { route: 'beta', endpoint: 'a', state: 'open' })).toBe(1);
    expect(sampleValue(metrics, 'tollgate_endpoint_breaker_state', { route: 'beta', endpoint: 'b', state: 'closed' })).toBe(1);
    expect(sampleValue(metrics, 'tollgate_circuit_breaker_state', { route: 'beta', state: 'closed' })).toBe(1);
  });

  it('once every endpoint is open, refuses with circuit_open naming the route and that all its endpoints are unavailable', async () => {
    b.behave({ status: 500 });
    // b's two failures open its breaker; with no other endpoint left, the caller gets b's answer.
    for (let i = 0; i < 2; i++) expect((await post(proxy(), '/proxy/beta/v1/chat/completions', chat)).status).toBe(500);
    const res = await post(proxy(), '/proxy/beta/v1/chat/completions', chat);
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('circuit_open');
    expect(body.error.message).toMatch(/^all endpoints of upstream beta are unavailable \(a, dead, b: /);
    expect((await health(proxy())).breakers.beta).toBe('open');
    b.reset();
    a.reset();
  });
});

describe('a 429 with Retry-After', () => {
  const proxy = ownProxy(() => twoKeys());

  it('cools that endpoint down for that long: the call goes to the other, and so do the calls after it until the wait is over', async () => {
    a.behave({ status: 429, errorHeaders: { 'retry-after': '1' }, forRequests: 1 });
    // Wall-clock milliseconds, as the proxy counts the cool-down: the 429 came after `sent`, so the cool-down ends
    // at least 1000 ms after it.
    const sent = Date.now();
    const first = await post(proxy(), '/v1/chat/completions', chat);
    expect(first.status).toBe(200);
    expect(a.requests).toHaveLength(1);
    expect(b.requests).toHaveLength(1);
    const cooling = (await health(proxy())).endpoints!.beta!.a!.coolingDownMs;
    expect(cooling).toBeLessThanOrEqual(1000);
    // What is left of it, plus the time since the call was sent, is at least the second it asked for.
    expect(cooling + (Date.now() - sent)).toBeGreaterThanOrEqual(1000);
    // Calls one after another alternate a, b without a cool-down; during it every one goes to b, and a takes a
    // call again only once its second is over.
    const reached = await waitFor('endpoint a to take a call again', async () => {
      const res = await post(proxy(), '/proxy/beta/v1/chat/completions', chat);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      return a.requests.length === 2 ? Date.now() : undefined;
    });
    expect(reached - sent).toBeGreaterThanOrEqual(1000);
    expect(b.requests.length).toBeGreaterThanOrEqual(2);
  });
});

describe('least-outstanding', () => {
  const proxy = ownProxy(() => twoKeys({ strategy: 'least-outstanding' }));

  it('sends calls to the idle endpoint while the other holds a slow stream', async () => {
    let release!: () => void;
    const tail = new Promise<void>((resolve) => (release = resolve));
    a.behave({ holdTail: tail, forRequests: 1 });
    // Both idle: the tie goes to a, which starts a stream and holds its end.
    const stream = await post(proxy(), '/v1/chat/completions', { ...chat, stream: true });
    expect(stream.status).toBe(200);
    expect(a.requests).toHaveLength(1);
    // Round robin would send the third call to a; with a call in flight there, both go to b.
    for (let i = 0; i < 2; i++) {
      const res = await post(proxy(), '/v1/chat/completions', chat);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      await waitFor('the call to b to be settled', async () => (await health(proxy())).endpoints!.beta!.b!.outstanding === 0);
    }
    expect(b.requests).toHaveLength(2);
    expect((await health(proxy())).endpoints!.beta!.a!.outstanding).toBe(1);
    release();
    expect(await stream.text()).toContain('[DONE]');
    expect(a.requests).toHaveLength(1);
    await waitFor('the stream to be settled', async () => (await health(proxy())).endpoints!.beta!.a!.outstanding === 0);
  });
});

describe('Vertex AI in two locations', () => {
  let bed: UpstreamBed;
  let central: FakeUpstream;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    [bed, central] = await Promise.all([startUpstreamBed(), startFakeUpstream('vertex')]);
    const endpoints = `[{ name: east, location: us-east5, baseUrl: "${bed.vertex.url}" }, { name: central, location: us-central1, baseUrl: "${central.url}" }]`;
    proxy = await startProxyProcess({
      configYaml: `
upstreams:
  gamma: { project: ${PROJECT}, endpoints: ${endpoints} }
  alpha: { project: ${PROJECT}, endpoints: ${endpoints} }
storage: { kind: memory }
`,
      env: bed.env,
    });
  });

  afterAll(async () => {
    await proxy?.stop();
    await Promise.all([bed?.close(), central?.close()]);
  });

  it('gamma: each location is reached at its own host with its own location in the path', async () => {
    for (let i = 0; i < 4; i++) expect((await post(proxy, '/proxy/gamma/v1/messages', claude)).status).toBe(200);
    const model = `publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`;
    expect(bed.vertex.requests.map((r) => r.path)).toEqual(Array(2).fill(`/v1/projects/${PROJECT}/locations/us-east5/${model}`));
    expect(central.requests.map((r) => r.path)).toEqual(Array(2).fill(`/v1/projects/${PROJECT}/locations/us-central1/${model}`));
    // Each with a Google token from the metadata server, through the real google-auth-library.
    for (const request of [...bed.vertex.requests, ...central.requests]) expect(request.headers.authorization).toMatch(/^Bearer \S+/);
  });

  it('alpha: a native call names its location in its own path; each endpoint puts its own there', async () => {
    bed.vertex.reset();
    central.reset();
    const path = `/proxy/alpha/v1/projects/${PROJECT}/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent`;
    const gemini = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
    for (let i = 0; i < 2; i++) expect((await post(proxy, path, gemini)).status).toBe(200);
    expect(bed.vertex.requests.map((r) => r.path)).toEqual([`/v1/projects/${PROJECT}/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent`]);
    expect(central.requests.map((r) => r.path)).toEqual([`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`]);
  });

  it('alpha passes the caller’s body through unread, so a failing endpoint is not retried: the caller gets its answer', async () => {
    bed.vertex.reset();
    central.reset();
    central.behave({ status: 503, forRequests: 1 });
    const path = `/proxy/alpha/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`;
    const gemini = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
    // One call goes to each endpoint (round robin 1:1); the one that reaches central gets its 503.
    const statuses = [(await post(proxy, path, gemini)).status, (await post(proxy, path, gemini)).status];
    expect(statuses.sort()).toEqual([200, 503]);
    expect(bed.vertex.requests).toHaveLength(1);
    expect(central.requests).toHaveLength(1);
  });
});

describe('a bad endpoint in the config file', () => {
  it('stops the proxy at start with exit code 2, naming the field', async () => {
    const { code, stderr } = await refusedConfigFile('upstreams:\n  beta:\n    endpoints: [{ name: a }, { name: b, weight: 0 }]\n');
    expect(code).toBe(2);
    expect(stderr).toContain('upstreams.beta.endpoints[1].weight must be a number greater than 0 and at most 1000 (got 0)');
  });
});
