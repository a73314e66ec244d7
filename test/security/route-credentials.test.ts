// What a caller of the unauthenticated config API can make the proxy's credentials do. A route added there used
// to take any credential: `aws-sigv4` with any signing service and region made the proxy sign IAM, STS and S3
// calls with its own AWS identity, and an `api-key` route named `stripe` sent STRIPE_API_KEY (the variable was
// derived from the name) to a host the caller chose. Repeated POSTs also merged routes without bound. A route
// added through the API now takes `{kind: none}` or `{use: <route>}`, a credential someone trusted declared;
// the AWS identity signs only Bedrock model invocations; a sidecar's routes and base URLs are its ProxyConfig's.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildEngine, type Engine } from '../../sidecar/src/app.ts';
import { ClusterBudgets } from '../../sidecar/src/budgets/cluster-budgets.ts';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { parseRuntimeConfigPatch } from '../../contracts/config-schema.ts';
import { OPENAI_KEY, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

const STRIPE_KEY = 'sk_live_proxy_environment_stripe';
const AWS_KEY_ID = 'AKIDPROXYOWNIDENTITY';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed({
    configYaml: `
routes:
  - { name: declared, format: openai-chat, baseUrl: "http://127.0.0.1:9/declared", credential: { kind: api-key, env: DECLARED_KEY } }
`,
    env: { STRIPE_API_KEY: STRIPE_KEY, DECLARED_KEY: 'sk-declared-by-the-file', AWS_ACCESS_KEY_ID: AWS_KEY_ID, AWS_SECRET_ACCESS_KEY: 'proxy-own-secret', AWS_REGION: 'us-east-1' },
  });
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.upstream.calls.length = 0;
});

async function config(): Promise<unknown> {
  return (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
}

/** A POST the API refuses: 400 invalid_config whose message starts with `field`, and the config as it was. */
async function refused(body: unknown, field: string, reason: RegExp): Promise<void> {
  const before = await config();
  const res = await postJson(bed, '/_local/api/config', body);
  const answer = (await res.json()) as { error: { code: string; message: string } };
  expect(res.status, answer.error.message).toBe(400);
  expect(answer.error.code).toBe('invalid_config');
  expect(answer.error.message.startsWith(`${field} `), answer.error.message).toBe(true);
  expect(answer.error.message).toMatch(reason);
  expect(await config()).toEqual(before);
}

const upstreamBase = () => `${bed.upstream.url}/base`;

describe('a route added through the config API cannot bring its own credential', () => {
  it.each([
    ['an AWS signing scope for IAM', { kind: 'aws-sigv4', service: 'iam', region: 'us-east-1' }, 'routes[0].credential.kind'],
    ['an AWS signing scope for STS', { kind: 'aws-sigv4', service: 'sts' }, 'routes[0].credential.kind'],
    ['an api-key whose variable would be derived from the name', { kind: 'api-key' }, 'routes[0].credential.kind'],
    ['an api-key header of its own', { kind: 'api-key', header: 'x-stripe-key' }, 'routes[0].credential.kind'],
    ['a Google token with its own scopes', { kind: 'google-adc', scopes: ['https://www.googleapis.com/auth/devstorage.full_control'] }, 'routes[0].credential.kind'],
    ['a named variable', { kind: 'api-key', env: 'STRIPE_API_KEY' }, 'routes[0].credential.kind'],
    ['a key file', { use: 'beta', file: '/etc/shadow' }, 'routes[0].credential.file'],
  ])('%s is refused naming the field, and nothing changes', async (_what, credential, field) => {
    await refused({ routes: [{ name: 'stripe', format: 'openai-chat', baseUrl: upstreamBase(), credential }] }, field, /cannot be set: a route added through the config API/);
    const call = await postJson(bed, '/proxy/stripe/v1/charges', { amount: 1 });
    expect(call.status).toBe(404);
    expect(bed.upstream.calls).toHaveLength(0);
  });

  it('a use that names no declared route is refused: neither an unknown one nor one added through the API itself', async () => {
    await refused(
      { routes: [{ name: 'x', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'nowhere' } }] },
      'routes[0].credential.use',
      /names no route declared outside this API/,
    );
    const added = await postJson(bed, '/_local/api/config', { routes: [{ name: 'added', format: 'openai-chat', baseUrl: upstreamBase(), credential: { kind: 'none' } }] });
    expect(added.status).toBe(200);
    await refused(
      { routes: [{ name: 'y', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'added' } }] },
      'routes[0].credential.use',
      /names no route declared outside this API/,
    );
  });

  it("an endpoint of a route (ADR 0008) cannot name where a key is either: it uses its route's credential", async () => {
    await refused(
      { upstreams: { beta: { endpoints: [{ name: 'a' }, { name: 'stripe', credential: { env: 'STRIPE_API_KEY' } }] } } },
      'upstreams.beta.endpoints[1].credential',
      /cannot be set through this API, which has no authentication: an endpoint added here uses its route's credential/,
    );
    await refused(
      { routes: [{ name: 'split', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'beta' }, endpoints: [{ name: 'a', credential: { file: '/etc/shadow' } }] }] },
      'routes[0].endpoints[0].credential',
      /cannot be set through this API/,
    );
    expect(bed.upstream.calls).toHaveLength(0);
  });

  it("a route that uses a declared credential sends that credential, and the environment's other keys stay home", async () => {
    const res = await postJson(bed, '/_local/api/config', {
      routes: [
        { name: 'stripe', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'beta' } },
        { name: 'reuse', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'declared' } },
      ],
    });
    expect(res.status).toBe(200);
    expect((await postJson(bed, '/proxy/stripe/v1/chat/completions', { model: 'gpt-4o-mini', messages: [] })).status).toBe(200);
    expect((await postJson(bed, '/proxy/reuse/v1/chat/completions', { model: 'gpt-4o-mini', messages: [] })).status).toBe(200);
    const [viaBeta, viaDeclared] = bed.upstream.calls;
    expect(viaBeta!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(viaDeclared!.headers.authorization).toBe('Bearer sk-declared-by-the-file');
    for (const call of bed.upstream.calls) expect(JSON.stringify(call.headers)).not.toContain(STRIPE_KEY);
  });
});

describe("the proxy's AWS identity signs only Bedrock model invocations", () => {
  it('an AWS credential on a route of another format is refused, by use as by kind', async () => {
    await refused(
      { routes: [{ name: 'iam', format: 'openai-chat', baseUrl: upstreamBase(), credential: { use: 'gamma-cloudb' } }] },
      'routes[0].credential.kind',
      /aws-sigv4 signs only Bedrock's runtime API: it takes format bedrock \(got format openai-chat\)/,
    );
  });

  it.each([
    ['STS GetCallerIdentity', 'POST', '/?Action=GetCallerIdentity&Version=2011-06-15'],
    ['IAM CreateAccessKey', 'POST', '/?Action=CreateAccessKey&UserName=admin&Version=2010-05-08'],
    ['S3 GetObject', 'GET', '/bucket/secret.txt'],
    ["Bedrock's control plane", 'GET', '/foundation-models'],
    ['a model invocation by GET', 'GET', '/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke'],
    ['a token count by GET', 'GET', '/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens'],
    ['a path under a token count', 'POST', '/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens/x'],
    ['an asynchronous invocation', 'POST', '/async-invoke'],
  ])('%s through a bedrock route pointed anywhere is refused before anything is signed or sent', async (_what, method, path) => {
    const res = await postJson(bed, '/_local/api/config', {
      upstreams: { 'gamma-cloudb': { baseUrl: upstreamBase() } },
      routes: [{ name: 'aws-anything', format: 'bedrock', baseUrl: upstreamBase(), credential: { use: 'gamma-cloudb' } }],
    });
    expect(res.status).toBe(200);
    for (const route of ['aws-anything', 'gamma-cloudb']) {
      const call = await fetch(`${bed.proxy.url}/proxy/${route}${path}`, { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}) });
      const answer = (await call.json()) as { error: { code: string; message: string } };
      expect(call.status, answer.error.message).toBe(403);
      expect(answer.error.code).toBe('unmetered_endpoint');
    }
    expect(bed.upstream.calls).toHaveLength(0);
  });
});

describe('routes added through the API are bounded in all, not per body', () => {
  it('posts that add routes one body at a time stop at 64 configured routes, naming the count', async () => {
    const { config: current } = (await config()) as { config: { routes: unknown[] } };
    const room = 64 - current.routes.length;
    const route = (i: number) => ({ name: `bulk-${i}`, format: 'openai-chat', baseUrl: upstreamBase(), credential: { kind: 'none' } });
    const first = await postJson(bed, '/_local/api/config', { routes: Array.from({ length: room }, (_, i) => route(i)) });
    expect(first.status).toBe(200);
    await refused({ routes: [route(room)] }, 'routes', /would make 65 configured routes with those already set; at most 64 in all/);
    // Replacing a route already there adds none, so it still fits.
    const replaced = await postJson(bed, '/_local/api/config', { routes: [{ ...route(0), baseUrl: `${upstreamBase()}/v2` }] });
    expect(replaced.status).toBe(200);
  });
});

describe('model aliases added through the API are bounded in all, not per body', () => {
  it('posts of 200 aliases each stop at 256 aliases, naming the count, and change nothing', async () => {
    const body = (from: number) => ({
      models: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`alias-${from + i}`, { targets: [{ route: 'beta', model: 'gpt-4o-mini' }] }])),
    });
    expect((await postJson(bed, '/_local/api/config', body(0))).status).toBe(200);
    await refused(body(200), 'models', /would make 400 model aliases with those already set; at most 256 in all/);
  });
});

describe("a sidecar's routes and upstream base URLs come from its ProxyConfig", () => {
  let engine: Engine;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-sidecar-config-'));
    const logger = pino({ level: 'silent' });
    const store = new ConfigStore(parseRuntimeConfigPatch({ storage: { kind: 'memory' }, local: { enabled: false } }));
    engine = await buildEngine({ store, logger, env: {}, budgets: new ClusterBudgets({ stateDir: dir, logger }) });
  });

  afterAll(async () => {
    await engine?.shutdown(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['an upstream base URL', { upstreams: { beta: { baseUrl: 'http://127.0.0.1:9/app-listener' } } }, 'upstreams.beta.baseUrl'],
    ['a route, even one without a credential', { routes: [{ name: 'out', format: 'openai-chat', baseUrl: 'http://127.0.0.1:9', credential: { kind: 'none' } }] }, 'routes'],
    ['a model alias', { models: { mine: { targets: [{ route: 'beta', model: 'gpt-4o' }] } } }, 'models'],
  ])('the app beside it cannot set %s', async (_what, body, field) => {
    const before = await engine.app.inject({ method: 'GET', url: '/_local/api/config', headers: { host: '127.0.0.1' } });
    const res = await engine.app.inject({ method: 'POST', url: '/_local/api/config', headers: { host: '127.0.0.1', 'content-type': 'application/json' }, payload: body });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: { code: 'invalid_config', message: expect.stringMatching(new RegExp(`^${field.replaceAll('.', '\\.')} cannot be set in a sidecar`)) },
    });
    const after = await engine.app.inject({ method: 'GET', url: '/_local/api/config', headers: { host: '127.0.0.1' } });
    expect(after.json()).toEqual(before.json());
  });

  it("the app beside it cannot point an endpoint of a route elsewhere (ADR 0008), though it may split a route's calls", async () => {
    const post = (payload: unknown) =>
      engine.app.inject({ method: 'POST', url: '/_local/api/config', headers: { host: '127.0.0.1', 'content-type': 'application/json' }, payload: payload as object });
    const before = await engine.app.inject({ method: 'GET', url: '/_local/api/config', headers: { host: '127.0.0.1' } });
    const res = await post({ upstreams: { beta: { endpoints: [{ name: 'a' }, { name: 'app', baseUrl: 'http://127.0.0.1:9/app-listener' }] } } });
    expect(res.statusCode).toBe(400);
    expect(res.json<{ error: { code: string; message: string } }>().error.message).toMatch(/^upstreams\.beta\.endpoints\[1\]\.baseUrl cannot be set in a sidecar/);
    const after = await engine.app.inject({ method: 'GET', url: '/_local/api/config', headers: { host: '127.0.0.1' } });
    expect(after.json()).toEqual(before.json());
    const regions = [
      { name: 'east', location: 'us-east5' },
      { name: 'central', location: 'us-central1' },
    ];
    expect((await post({ upstreams: { alpha: { endpoints: regions } } })).statusCode).toBe(200);
  });

  it('prices can still be tried out there', async () => {
    const res = await engine.app.inject({
      method: 'POST',
      url: '/_local/api/config',
      headers: { host: '127.0.0.1', 'content-type': 'application/json' },
      payload: { pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 2 }] } },
    });
    expect(res.statusCode).toBe(200);
  });
});
