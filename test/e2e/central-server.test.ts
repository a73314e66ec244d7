// The central server as docs/central-server.md sets it up: `tollgate proxy --mode server` with server.auth,
// a real process, tokens minted by a local OIDC issuer (and one playing accounts.google.com), a fake
// tokeninfo endpoint and a fake identity-aware proxy. It checks the Done-when: no token → 401 and
// `all auth strategies failed` in the log; a valid ID token → the call goes through and the span's user_id is
// the token's e-mail, whatever x-tollgate-user says; the IAP header pair with X-Proxy-Auth winning; health and
// the management API behind identities; budgets keyed on the identity, granted by admins only; and the
// official openai SDK with an ID token as its apiKey.

import OpenAI, { AuthenticationError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { startFakeTokeninfo, type FakeTokeninfo } from '../fakes/google-tokeninfo.ts';
import { startFakeIap, type FakeIap } from '../fakes/iap-signer.ts';
import { startOidcIssuer, type LocalOidcIssuer } from '../fakes/oidc-issuer.ts';
import { rawRequest } from '../security/raw-http.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { freePort, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';

const OPENAI_KEY = 'sk-central-server-key';
const AUD = 'tollgate';
const IAP_CLIENT = '123-iap.apps.googleusercontent.com';
const BACKEND = '/projects/123/global/backendServices/456';
const ROBOT = 'tollgate-client@proj.iam.gserviceaccount.com';
const ADMIN = 'admin@example.com';

let issuer: LocalOidcIssuer;
let google: LocalOidcIssuer;
let tokeninfo: FakeTokeninfo;
let iap: FakeIap;
let openai: FakeUpstream;
let server: ProxyProcess;
let healthPort: number;
let adminToken: string;

const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const now = () => Math.floor(Date.now() / 1000);

function post(path: string, headers: Record<string, string>, body: unknown = chat): Promise<Response> {
  return fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

async function span(spanId: string | null): Promise<SpanJson | undefined> {
  const response = await fetch(`${server.url}/_local/api/traces?limit=200`, { headers: { authorization: `Bearer ${adminToken}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { spans: SpanJson[] }).spans.find((s) => s.span_id === spanId);
}

function refusals(): Record<string, unknown>[] {
  return server.logs.filter((line) => String(line.msg).startsWith('all auth strategies failed'));
}

beforeAll(async () => {
  [issuer, google, tokeninfo, iap, openai] = await Promise.all([
    startOidcIssuer(),
    startOidcIssuer(),
    startFakeTokeninfo(),
    startFakeIap(),
    startFakeUpstream('openai', { expectApiKey: OPENAI_KEY }),
  ]);
  adminToken = await issuer.idToken(ADMIN, AUD);
  healthPort = await freePort();
  server = await startProxyProcess({
    args: ['--mode', 'server', '--host', '127.0.0.1'],
    env: { OPENAI_API_KEY: OPENAI_KEY, TOLLGATE_HEALTH_PORT: String(healthPort) },
    readyHeaders: { authorization: `Bearer ${adminToken}` },
    configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
storage: { kind: sqlite, path: spans.db }
server:
  auth:
    oidc:
      - issuer: ${issuer.url}
        audiences: [${AUD}]
      - issuer: https://accounts.google.com
        audiences: ["${IAP_CLIENT}"]
        certsUrl: ${google.googleCertsUrl}
    accessTokens:
      tokeninfoUrl: ${tokeninfo.url}
      cacheSeconds: 300
      audiences: [test-cli.apps.googleusercontent.com]
    iap:
      enabled: true
      required: false
      audiences: ["${BACKEND}"]
      allowedServiceAccounts: ["${ROBOT}"]
      publicKeysUrl: ${iap.publicKeysUrl}
    admins: [${ADMIN}]
budgets:
  ledger: { kind: memory }
  policies:
    - { name: per-person, users: ["carol@example.com"], limitUsd: "0.000006" }
`,
  });
});

afterAll(async () => {
  await server?.stop();
  await Promise.all([issuer?.close(), google?.close(), tokeninfo?.close(), iap?.close(), openai?.close()]);
});

describe('a call without a token', () => {
  it('is refused with 401, WWW-Authenticate and a reason, reaches no provider, and logs all auth strategies failed', async () => {
    const before = openai.requests.length;
    const gateway = await post('/v1/chat/completions', {});
    expect(gateway.status).toBe(401);
    expect(gateway.headers.get('www-authenticate')).toBe('Bearer realm="tollgate", error="invalid_token", error_description="missing_token"');
    expect(await gateway.json()).toEqual({
      error: {
        message: 'no credential: send Authorization: Bearer <ID token or access token>',
        type: 'authentication_error',
        param: null,
        code: 'invalid_token',
        reason: 'missing_token',
      },
    });
    const native = await post('/proxy/beta/v1/chat/completions', { 'x-tollgate-user': 'alice@example.com' });
    expect(native.status).toBe(401);
    expect(await native.json()).toMatchObject({ error: { code: 'invalid_token', reason: 'missing_token' } });
    expect(openai.requests.length).toBe(before);

    await waitFor('the refusal log lines', async () => refusals().length >= 2);
    expect(refusals()[0]).toMatchObject({
      level: 40,
      reason: 'missing_token',
      path: '/v1/chat/completions',
      strategies: { iap: expect.stringContaining('not applicable'), oidc: 'not applicable: no Authorization header', accessTokens: 'not applicable: no Authorization header' },
    });
  });

  it('with an expired token names the reason without echoing the token, in the answer or the log', async () => {
    const expired = await issuer.idToken('alice@example.com', AUD, { iat: now() - 7200, exp: now() - 3600 });
    const response = await post('/v1/chat/completions', { authorization: `Bearer ${expired}` });
    expect(response.status).toBe(401);
    const text = await response.text();
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'invalid_token', reason: 'expired' } });
    await waitFor('the log line', async () => refusals().some((line) => line.reason === 'expired'));
    const signature = expired.split('.')[2]!;
    expect(text).not.toContain(signature);
    expect(JSON.stringify(server.logs)).not.toContain(signature);
    expect(JSON.stringify(server.logs)).not.toContain(expired.split('.')[1]!);
  });
});

describe('a forged token', () => {
  it('tells nothing about which issuers and audiences are configured: every forgery gets the same answer', async () => {
    const forger = await startOidcIssuer();
    try {
      const answers = [];
      // Signed by the forger's own key, claiming a configured issuer and audience, a configured issuer and
      // a foreign audience, and an unknown issuer: the caller cannot tell them apart.
      for (const claims of [{ iss: issuer.url }, { iss: issuer.url, aud: 'not-configured' }, { iss: 'https://unknown.example' }]) {
        const token = await forger.idToken('mallory@example.com', AUD, claims);
        const response = await post('/v1/chat/completions', { authorization: `Bearer ${token}` });
        answers.push({ status: response.status, www: response.headers.get('www-authenticate'), body: await response.json() });
      }
      expect(answers[0]).toEqual({
        status: 401,
        www: 'Bearer realm="tollgate", error="invalid_token", error_description="untrusted_token"',
        body: {
          error: {
            message: "the token's issuer is not one this server trusts, or its signature does not verify with the issuer's keys",
            type: 'authentication_error',
            param: null,
            code: 'invalid_token',
            reason: 'untrusted_token',
          },
        },
      });
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      // Operators still see which it was.
      await waitFor('the precise reasons in the log', async () =>
        ['unknown_key', 'unknown_issuer'].every((reason) => refusals().some((line) => JSON.stringify(line).includes(reason))),
      );
    } finally {
      await forger.close();
    }
  });
});

describe('a call with a valid ID token', () => {
  it("goes through, and the span records the token's e-mail whatever x-tollgate-user and the body say", async () => {
    const token = await issuer.idToken('Alice@Example.com', AUD);
    const response = await post('/v1/chat/completions', { authorization: `Bearer ${token}`, 'x-tollgate-user': 'mallory' }, { ...chat, user: 'mallory-in-body' });
    expect(response.status).toBe(200);
    // The provider got the server's own key, never the caller's token (the fake refuses any other bearer).
    expect(openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    const recorded = await span(response.headers.get('x-proxy-span-id'));
    expect(recorded).toMatchObject({ user_id: 'alice@example.com', status: 'ok', route: 'beta' });

    const native = await post('/proxy/beta/v1/chat/completions', { authorization: `Bearer ${token}`, 'x-tollgate-user': 'mallory' });
    expect(native.status).toBe(200);
    expect(await span(native.headers.get('x-proxy-span-id'))).toMatchObject({ user_id: 'alice@example.com' });
  });

  it('an opaque access token from tokeninfo works the same way', async () => {
    const response = await post('/proxy/beta/v1/chat/completions', { authorization: `Bearer ${tokeninfo.issue('dave@example.com')}` });
    expect(response.status).toBe(200);
    expect(await span(response.headers.get('x-proxy-span-id'))).toMatchObject({ user_id: 'dave@example.com' });
  });
});

describe('behind an identity-aware proxy', () => {
  const robotIdToken = async (email = ROBOT) =>
    google.mint({ iss: 'https://accounts.google.com', aud: IAP_CLIENT, sub: 'robot', email, email_verified: true, iat: now(), exp: now() + 3600 });

  it("the IAP header pair: the call is metered to the X-Proxy-Auth user, not to Authorization's", async () => {
    const response = await post('/v1/chat/completions', {
      'x-goog-iap-jwt-assertion': await iap.assertion(ROBOT, BACKEND),
      'proxy-authorization': `Bearer ${await robotIdToken()}`,
      'x-proxy-auth': `Bearer ${tokeninfo.issue('helen@example.com')}`,
      authorization: `Bearer ${await issuer.idToken('bob@example.com', AUD)}`,
    });
    expect(response.status).toBe(200);
    expect(await span(response.headers.get('x-proxy-span-id'))).toMatchObject({ user_id: 'helen@example.com' });
    // None of the credentials reached the provider.
    const sent = openai.requests.at(-1)!.headers;
    expect([sent['proxy-authorization'], sent['x-proxy-auth'], sent['x-goog-iap-jwt-assertion']]).toEqual([undefined, undefined, undefined]);
  });

  it('refuses Proxy-Authorization from a service account that is not allowed', async () => {
    const intruder = 'intruder@proj.iam.gserviceaccount.com';
    const response = await post('/v1/chat/completions', {
      'x-goog-iap-jwt-assertion': await iap.assertion(intruder, BACKEND),
      'proxy-authorization': `Bearer ${await robotIdToken(intruder)}`,
      'x-proxy-auth': `Bearer ${tokeninfo.issue('helen@example.com')}`,
    });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { reason: 'service_account_not_allowed' } });
  });
});

describe('health', () => {
  it('/healthz on the serving port needs a token and says nothing without one; the probe port stays open', async () => {
    const anonymous = await fetch(`${server.url}/healthz`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="tollgate", error="invalid_token"');
    expect(await anonymous.json()).toEqual({ error: { code: 'invalid_token' } });
    const withToken = await fetch(`${server.url}/healthz`, { headers: { authorization: `Bearer ${await issuer.idToken('prober@example.com', AUD)}` } });
    expect(withToken.status).toBe(200);
    expect(await withToken.json()).toEqual({ status: 'ok' });
    const probe = await fetch(`http://127.0.0.1:${healthPort}/healthz`);
    expect(probe.status).toBe(200);
  });
});

describe('metrics', () => {
  const authFailures = async () => {
    const scrape = await fetch(`http://127.0.0.1:${healthPort}/metrics`);
    expect(scrape.status).toBe(200);
    return sampleValue(await scrape.text(), 'tollgate_inbound_auth_failures_total');
  };

  it('the probe port serves /metrics without a token, and every refused request adds one to tollgate_inbound_auth_failures_total', async () => {
    const before = await authFailures();
    // The refusals of the tests above are counted already.
    expect(before).toBeGreaterThanOrEqual(refusals().length);
    expect(refusals().length).toBeGreaterThan(0);
    const logged = refusals().length;
    expect((await post('/v1/chat/completions', {})).status).toBe(401);
    await waitFor('the refusal log line', async () => refusals().length > logged);
    expect(await authFailures()).toBe(before! + 1);
  });

  it('on the serving port, /metrics is for admins like the management API', async () => {
    const asUser = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${await issuer.idToken('bob@example.com', AUD)}` } });
    expect(asUser.status).toBe(403);
    expect(await asUser.json()).toMatchObject({ error: { code: 'admin_required' } });
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })).status).toBe(200);
  });
});

describe('the management API', () => {
  it('answers admins, refuses other users with 403 and anonymous callers with 401', async () => {
    const asAdmin = await fetch(`${server.url}/_local/api/config`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(asAdmin.status).toBe(200);
    expect(((await asAdmin.json()) as { config: { mode: string } }).config.mode).toBe('server');

    const user = await issuer.idToken('bob@example.com', AUD);
    const asUser = await fetch(`${server.url}/_local/api/config`, { headers: { authorization: `Bearer ${user}` } });
    expect(asUser.status).toBe(403);
    expect(await asUser.json()).toEqual({
      error: { code: 'admin_required', message: 'bob@example.com is not in server.auth.admins: the management API is for admins in server mode' },
    });
    const change = await fetch(`${server.url}/_local/api/config`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user}`, 'content-type': 'application/json' },
      body: JSON.stringify({ upstreams: { beta: { baseUrl: 'http://127.0.0.1:9' } } }),
    });
    expect(change.status).toBe(403);
    expect((await fetch(`${server.url}/_local/api/config`)).status).toBe(401);

    const health = await fetch(`${server.url}/_local/api/health`, { headers: { authorization: `Bearer ${adminToken}` } });
    const auth = ((await health.json()) as { auth: { strategies: string[]; refused: number; tokeninfoLookups: number } }).auth;
    expect(auth.strategies).toEqual(['iap', 'oidc', 'accessTokens']);
    expect(auth.refused).toBeGreaterThan(0);
    // The local runtime is the developer's: off in server mode.
    expect(((await (await fetch(`${server.url}/_local/api/health`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as { local: unknown }).local).toEqual({
      enabled: false,
    });
  });

  it('refuses a non-admin on every spelling of a management path the router accepts', async () => {
    const bob = await issuer.idToken('bob@example.com', AUD);
    const port = Number(new URL(server.url).port);
    const spellings = [
      '/%5Flocal/api/config',
      '/%5flocal/api/config',
      '/_local/api/%63onfig',
      '/%5F%6Cocal/api/traces?limit=5',
      '//_local/api/config',
      '/_local//api/config',
      '/_local/api/config/',
      '/%5Flocal/api/budgets',
      '/%5Flocal/',
      '/%5Flocal/ui/app.js',
      '/_LOCAL/api/config',
    ];
    for (const target of spellings) {
      const answer = await rawRequest(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${bob}\r\nConnection: close\r\n\r\n`);
      // Either the router does not know the spelling (404) or it reaches a management route and is refused.
      expect([403, 404], `GET ${target} answered ${answer.status}: ${answer.body.slice(0, 200)}`).toContain(answer.status);
      if (answer.status === 403) expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'admin_required' } });
    }
    // The change the probe made: pointing a route at the caller's own server.
    const body = JSON.stringify({ upstreams: { beta: { baseUrl: 'http://127.0.0.1:9' } } });
    const change = await rawRequest(
      port,
      `POST /%5Flocal/api/config HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${bob}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(change.status).toBe(403);
    const config = (await (await fetch(`${server.url}/_local/api/config`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as {
      config: { upstreams: { beta: { baseUrl: string } } };
    };
    expect(config.config.upstreams.beta.baseUrl).toBe(openai.url);
  });

  it('serves the management UI to admins only, like the API it calls', async () => {
    expect((await fetch(`${server.url}/_local/`, { headers: { authorization: `Bearer ${adminToken}` } })).status).toBe(200);
    const asUser = await fetch(`${server.url}/_local/`, { headers: { authorization: `Bearer ${await issuer.idToken('bob@example.com', AUD)}` } });
    expect(asUser.status).toBe(403);
    expect((await fetch(`${server.url}/_local/ui/app.js`)).status).toBe(401);
  });
});

describe('the official openai SDK', () => {
  it('works with an ID token as its apiKey, and gets an AuthenticationError with a bad one', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: await issuer.idToken('sdk-user@example.com', AUD), maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(completion.data.choices[0]!.message.content).toBeTruthy();
    expect(await span(completion.response.headers.get('x-proxy-span-id'))).toMatchObject({ user_id: 'sdk-user@example.com' });

    const refused = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const error = await refused.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).code).toBe('invalid_token');
  });
});

describe('budgets', () => {
  it('are keyed on the authenticated identity, so what a caller writes as its user cannot dodge a spent budget; only admins grant', async () => {
    const carol = await issuer.idToken('carol@example.com', AUD);
    const asAdmin = { authorization: `Bearer ${adminToken}` };
    // Admitted: it holds its estimated cost (about 100 bytes of request at four a token × 0.15 USD per million,
    // plus max_tokens 1 × 0.60 per million: under 0.000005) against the 0.000006 limit (ADR 1308); it then
    // costs 0.00000855 (25 × 0.15 + 8 × 0.60 per million), which spends the budget.
    const first = await post('/v1/chat/completions', { authorization: `Bearer ${carol}`, 'x-tollgate-user': 'mallory' }, { ...chat, max_tokens: 1 });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    await waitFor('carol’s call to be charged to carol', async () => {
      const record = (await (await fetch(`${server.url}/_local/api/budgets/carol@example.com`, { headers: asAdmin })).json()) as { state: string };
      return record.state === 'exhausted';
    });

    const before = openai.requests.length;
    const refused = await post('/proxy/beta/v1/chat/completions', { authorization: `Bearer ${carol}`, 'x-tollgate-user': 'someone-else' }, { ...chat, user: 'someone-else' });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: { code: 'budget_exceeded', message: expect.stringContaining('user "carol@example.com" has spent') } });
    expect(openai.requests.length).toBe(before);
    // Her spent budget shows in the metrics by policy; her e-mail does not (no metrics.perUser), on either port.
    for (const scrape of [await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } }), await fetch(`http://127.0.0.1:${healthPort}/metrics`)]) {
      const text = await scrape.text();
      expect(sampleValue(text, 'tollgate_budget_users', { policy: 'per-person', state: 'exhausted' })).toBe(1);
      expect(text).not.toContain('carol');
    }

    // Carol cannot grant herself more, nor read the ledger; an admin can grant.
    const grant = (headers: Record<string, string>) =>
      fetch(`${server.url}/_local/api/budgets/carol@example.com/grants`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ amount_usd: 1, reason: 'self-service' }),
      });
    expect((await grant({ authorization: `Bearer ${carol}` })).status).toBe(403);
    expect((await fetch(`${server.url}/_local/api/budgets/carol@example.com`, { headers: { authorization: `Bearer ${carol}` } })).status).toBe(403);
    expect((await post('/v1/chat/completions', { authorization: `Bearer ${carol}` })).status).toBe(429);
    expect((await grant(asAdmin)).status).toBe(201);
    expect((await post('/v1/chat/completions', { authorization: `Bearer ${carol}` })).status).toBe(200);
  });
});

describe('behind IAP as the docs set it up (iap.required by default)', () => {
  let frontDoor: ProxyProcess;
  const googleToken = (email: string) =>
    google.mint({ iss: 'https://accounts.google.com', aud: IAP_CLIENT, sub: email, email, email_verified: true, iat: now(), exp: now() + 3600 });

  beforeAll(async () => {
    const admin = 'platform@example.com';
    frontDoor = await startProxyProcess({
      args: ['--mode', 'server', '--host', '127.0.0.1'],
      env: { OPENAI_API_KEY: OPENAI_KEY },
      readyHeaders: { 'x-goog-iap-jwt-assertion': await iap.assertion(admin, BACKEND) },
      configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
server:
  auth:
    oidc:
      - issuer: https://accounts.google.com
        audiences: ["${IAP_CLIENT}"]
        certsUrl: ${google.googleCertsUrl}
    iap:
      audiences: ["${BACKEND}"]
      allowedServiceAccounts: ["${ROBOT}"]
      publicKeysUrl: ${iap.publicKeysUrl}
    admins: [${admin}]
`,
    });
  });
  afterAll(async () => frontDoor?.stop());

  it("refuses an admin's valid ID token that did not come through IAP, on the config API and on /v1", async () => {
    const adminToken = { authorization: `Bearer ${await googleToken('platform@example.com')}` };
    const config = await fetch(`${frontDoor.url}/_local/api/config`, { headers: adminToken });
    expect(config.status).toBe(401);
    expect(await config.json()).toMatchObject({ error: { code: 'invalid_token', reason: 'iap_assertion_missing' } });
    const before = openai.requests.length;
    const call = await fetch(`${frontDoor.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...adminToken, 'content-type': 'application/json' },
      body: JSON.stringify(chat),
    });
    expect(call.status).toBe(401);
    expect(openai.requests.length).toBe(before);
  });

  it("refuses a user who came through IAP carrying an admin's token, and lets the admin in through IAP", async () => {
    const asJudyWithAdminToken = await fetch(`${frontDoor.url}/_local/api/config`, {
      headers: { 'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND), authorization: `Bearer ${await googleToken('platform@example.com')}` },
    });
    expect(asJudyWithAdminToken.status).toBe(401);
    expect(await asJudyWithAdminToken.json()).toMatchObject({ error: { reason: 'service_account_not_allowed' } });
    const asAdmin = await fetch(`${frontDoor.url}/_local/api/config`, { headers: { 'x-goog-iap-jwt-assertion': await iap.assertion('platform@example.com', BACKEND) } });
    expect(asAdmin.status).toBe(200);
  });
});

describe('start-up', () => {
  it('server mode without a way to identify callers stops with a message naming server.auth', async () => {
    await expect(startProxyProcess({ args: ['--mode', 'server'] })).rejects.toThrow(
      'tollgate proxy: server.auth needs at least one way to identify callers in server mode: oidc (ID tokens), accessTokens (OAuth 2.0 access tokens) or iap',
    );
  });
});
