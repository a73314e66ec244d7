// The refusal rule on a built-in route, end to end (docs/routes.md#what-a-route-forwards): OpenAI's Realtime API
// mints a client secret, a key the caller then spends at OpenAI directly, where Tollgate never sees the usage. On
// route beta it is refused before anything is sent; on a beta whose config file says `unmetered: allow` it is
// forwarded with the proxy's key, and each such call is logged, counted and marked on its span.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const CLIENT_SECRETS = '/proxy/beta/v1/realtime/client_secrets';
const SESSION = { session: { type: 'realtime', model: 'gpt-realtime' } };

let bed: UpstreamBed;

beforeAll(async () => {
  bed = await startUpstreamBed();
});

afterAll(async () => {
  await bed?.close();
});

beforeEach(() => bed.reset());

/** A proxy against the bed; `allow`: route beta's config says `unmetered: allow`. */
function ownProxy(allow: boolean): () => ProxyProcess {
  let proxy: ProxyProcess;
  beforeAll(async () => {
    const plain = bed.configYaml();
    const beta = `beta: { baseUrl: "${bed.openai.url}" }`;
    expect(plain).toContain(beta);
    const configYaml = allow ? plain.replace(beta, `beta: { baseUrl: "${bed.openai.url}", unmetered: allow }`) : plain;
    proxy = await startProxyProcess({ configYaml, env: bed.env });
  });
  afterAll(async () => {
    await proxy?.stop();
  });
  return () => proxy;
}

function post(proxy: ProxyProcess, path: string, body: unknown): Promise<Response> {
  return fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-tollgate-user': 'alice' }, body: JSON.stringify(body) });
}

async function unmeteredCount(proxy: ProxyProcess): Promise<number | undefined> {
  return sampleValue(await (await fetch(`${proxy.url}/metrics`)).text(), 'tollgate_unmetered_calls_total', { route: 'beta' });
}

describe("the Realtime API's client secrets on route beta, by default", () => {
  const proxy = ownProxy(false);

  it('are refused with 403 unmetered_endpoint naming the path, nothing sent, a rejected span', async () => {
    const res = await post(proxy(), CLIENT_SECRETS, SESSION);
    const answer = (await res.json()) as { error: { code: string; message: string; type: string } };
    expect(res.status).toBe(403);
    expect(answer.error.code).toBe('unmetered_endpoint');
    expect(answer.error.message).toBe(
      "POST /v1/realtime/client_secrets on route beta is not a call Tollgate can meter (format openai): refused so the proxy's credential is not spent unseen; see docs/routes.md#what-a-route-forwards",
    );
    expect(bed.openai.requests).toHaveLength(0);
    const span = await findSpan(proxy().url, { spanId: res.headers.get('x-proxy-span-id') });
    expect(span).toMatchObject({ route: 'beta', user_id: 'alice', status: 'rejected', status_code: null, cost_usd: 0, unmetered: false });
    expect(await unmeteredCount(proxy())).toBeUndefined();
    expect(proxy().logs.some((line) => line.msg === 'unmetered call forwarded: the route allows calls its format cannot meter')).toBe(false);
  });
});

describe("a Bedrock model whose answers carry nothing to bill, through route gamma-cloudb's InvokeModel", () => {
  const proxy = ownProxy(false);

  it('is refused with 403 unmetered_endpoint saying why, never signed or sent', async () => {
    const res = await post(proxy(), `/proxy/gamma-cloudb/model/${encodeURIComponent('stability.sd3-5-large-v1:0')}/invoke`, { prompt: 'a lighthouse', mode: 'text-to-image' });
    expect(res.status).toBe(403);
    const answer = (await res.json()) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('unmetered_endpoint');
    expect(answer.error.message).toContain(
      'is not a call Tollgate can meter (stability.sd3-5-large-v1:0 answers without token counts and is not an image model Tollgate counts (Nova Canvas, Titan Image Generator v2))',
    );
    expect(bed.bedrock.requests).toHaveLength(0);
    // A geography prefix is the same model.
    expect((await post(proxy(), `/proxy/gamma-cloudb/model/${encodeURIComponent('us.stability.stable-image-core-v1:1')}/invoke`, { prompt: 'x' })).status).toBe(403);
    expect(bed.bedrock.requests).toHaveLength(0);
  });
});

describe("the Realtime API's client secrets on a route beta whose config file allows unmetered calls", () => {
  const proxy = ownProxy(true);

  it('are forwarded with the proxy key, logged, counted and marked unmetered on the span', async () => {
    const res = await post(proxy(), CLIENT_SECRETS, SESSION);
    expect(res.status).toBe(200);
    const secret = (await res.json()) as { value: string; session: { type: string } };
    expect(secret.value).toMatch(/^ek_/);
    expect(secret.session.type).toBe('realtime');
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.path).toBe('/v1/realtime/client_secrets');
    expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(seen.json).toEqual(SESSION);

    const span = await findSpan(proxy().url, { spanId: res.headers.get('x-proxy-span-id') });
    // What the key is spent on later is not seen: no usage, cost 0, and the span says why.
    expect(span).toMatchObject({ route: 'beta', user_id: 'alice', status: 'ok', status_code: 200, unmetered: true, input_tokens: 0, output_tokens: 0, cost_usd: 0 });
    const line = await waitFor('the unmetered call to be logged', () =>
      proxy().logs.find((entry) => entry.msg === 'unmetered call forwarded: the route allows calls its format cannot meter'),
    );
    expect(line).toMatchObject({ level: 40, route: 'beta', method: 'POST', path: '/v1/realtime/client_secrets' });
    expect(await unmeteredCount(proxy())).toBe(1);

    // A metered call on the same route is neither counted nor marked.
    const chat = await post(proxy(), '/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.status).toBe(200);
    expect(await findSpan(proxy().url, { spanId: chat.headers.get('x-proxy-span-id') })).toMatchObject({ unmetered: false });
    expect(await unmeteredCount(proxy())).toBe(1);
  });
});
