import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import { applyPatch, defaultRuntimeConfig } from '../config/config-store.ts';
import { routeCatalog } from '../routes/route-catalog.ts';
import { vertexPathAt } from '../routes/vertex-ai.ts';
import { EndpointPool } from './endpoint-pool.ts';

const logger = pino({ level: 'silent' });
const breaker = { consecutiveFailures: 1, failureRatio: 1, minimumRequests: 100, windowMs: 10_000, openMs: 60_000 };

function configOf(input: unknown) {
  return applyPatch(defaultRuntimeConfig(), parseRuntimeConfigPatch(input));
}

let pool: EndpointPool;
afterEach(() => pool?.close());

describe('EndpointPool: where each endpoint is', () => {
  it('fills a Vertex AI endpoint’s own location into the default host, and keeps the path’s place for the calls', () => {
    pool = new EndpointPool({ breaker, logger, env: {} });
    const config = configOf({
      upstreams: { gamma: { project: 'p', endpoints: [{ name: 'east', location: 'us-east5' }, { name: 'central' }, { name: 'world', location: 'global', project: 'q' }] } },
    });
    const resolved = pool.resolve(config, routeCatalog(config).get('gamma')!);
    expect(resolved.declared).toBe(true);
    expect(resolved.endpoints.map(({ name, origin, vertex }) => ({ name, origin, vertex }))).toEqual([
      { name: 'east', origin: 'https://us-east5-aiplatform.googleapis.com', vertex: { project: undefined, location: 'us-east5' } },
      // no location of its own: the route's default, and the path the plan made is left as it is
      { name: 'central', origin: 'https://us-central1-aiplatform.googleapis.com', vertex: undefined },
      { name: 'world', origin: 'https://aiplatform.googleapis.com', vertex: { project: 'q', location: 'global' } },
    ]);
    // Resolved once per config and route.
    expect(pool.resolve(config, routeCatalog(config).get('gamma')!)).toBe(resolved);
  });

  it('gives a Bedrock endpoint in its own region its own host and its own signer; an OpenAI endpoint without a key of its own uses the route’s', async () => {
    pool = new EndpointPool({ breaker, logger, env: { OPENAI_KEY_2: 'sk-second' } });
    const config = configOf({
      upstreams: {
        'gamma-cloudb': { region: 'us-east-1', endpoints: [{ name: 'use1' }, { name: 'euw1', region: 'eu-west-1' }] },
        beta: { endpoints: [{ name: 'shared' }, { name: 'own', baseUrl: 'https://gw.example/openai/', credential: { env: 'OPENAI_KEY_2' } }] },
      },
    });
    const bedrock = pool.resolve(config, routeCatalog(config).get('gamma-cloudb')!).endpoints;
    expect(bedrock.map((endpoint) => endpoint.origin)).toEqual(['https://bedrock-runtime.us-east-1.amazonaws.com', 'https://bedrock-runtime.eu-west-1.amazonaws.com']);
    expect(bedrock.map((endpoint) => endpoint.credential === undefined)).toEqual([true, false]);
    const beta = pool.resolve(config, routeCatalog(config).get('beta')!).endpoints;
    expect(beta.map(({ origin, prefix }) => `${origin}${prefix}`)).toEqual(['https://api.openai.com', 'https://gw.example/openai']);
    expect(beta.map((endpoint) => endpoint.credential === undefined)).toEqual([true, false]);
    // The route's header and prefix, the endpoint's key.
    const req = { method: 'POST', url: new URL('https://gw.example/openai/v1/chat/completions'), headers: {} as Record<string, string>, body: null };
    await beta[1]!.credential!.apply(req);
    expect(req.headers).toEqual({ authorization: 'Bearer sk-second' });
  });

  it('gives a route without endpoints one implicit endpoint, its breaker the route’s', () => {
    pool = new EndpointPool({ breaker, logger, env: {} });
    const config = configOf({});
    const resolved = pool.resolve(config, routeCatalog(config).get('beta')!);
    expect(resolved.declared).toBe(false);
    expect(resolved.endpoints).toHaveLength(1);
    expect(resolved.endpoints[0]).toMatchObject({ name: undefined, origin: 'https://api.openai.com', prefix: '' });
  });
});

describe('EndpointPool: state across configs', () => {
  it('keeps an endpoint’s breaker when the config changes its weight, drops it when the endpoint goes', () => {
    pool = new EndpointPool({ breaker, logger, env: {} });
    const first = configOf({ upstreams: { beta: { endpoints: [{ name: 'a' }, { name: 'b' }] } } });
    pool.sync(first);
    const a = pool.resolve(first, routeCatalog(first).get('beta')!).endpoints[0]!;
    a.load.breaker.tryAcquire();
    a.load.breaker.onFailure();
    expect(pool.endpointHealth(0)?.beta).toMatchObject({ a: { breaker: 'open' }, b: { breaker: 'closed' } });
    expect(pool.breakerStates().beta).toBe('closed');

    const reweighted = configOf({ upstreams: { beta: { endpoints: [{ name: 'a', weight: 5 }, { name: 'b' }] } } });
    pool.sync(reweighted);
    const again = pool.resolve(reweighted, routeCatalog(reweighted).get('beta')!).endpoints[0]!;
    expect(again.weight).toBe(5);
    expect(again.load).toBe(a.load);
    expect(pool.endpointHealth(0)?.beta?.a).toMatchObject({ breaker: 'open', weight: 5 });

    const without = configOf({ upstreams: { beta: { endpoints: [{ name: 'b' }] } } });
    pool.sync(without);
    expect(Object.keys(pool.endpointHealth(0)?.beta ?? {})).toEqual(['b']);
    pool.sync(configOf({}));
    expect(pool.endpointHealth(0)).toBeUndefined();
    expect(pool.breakerStates().beta).toBe('closed');
  });

  it('says a route with endpoints is open, and refuses calls, only when every endpoint is open or cooling down', () => {
    pool = new EndpointPool({ breaker, logger, env: {} });
    const config = configOf({ upstreams: { beta: { endpoints: [{ name: 'a' }, { name: 'b' }] } } });
    pool.sync(config);
    const [a, b] = pool.resolve(config, routeCatalog(config).get('beta')!).endpoints;
    a!.load.breaker.tryAcquire();
    a!.load.breaker.onFailure();
    expect(pool.refusing('beta', 1_000)).toBe(false);
    b!.load.coolingUntil = 2_000;
    expect(pool.refusing('beta', 1_000)).toBe(true);
    expect(pool.refusing('beta', 2_000)).toBe(false);
    expect(pool.breakerStates().beta).toBe('closed');
    b!.load.breaker.tryAcquire();
    b!.load.breaker.onFailure();
    expect(pool.breakerStates().beta).toBe('open');
    expect(pool.endpointBreakers()).toEqual({ beta: { a: 'open', b: 'open' } });
  });
});

describe('vertexPathAt', () => {
  it('puts an endpoint’s project and location in a Vertex AI path, leaving the rest (query included) as it was', () => {
    const path = '/v1/projects/mine/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse';
    expect(vertexPathAt(path, undefined, 'us-east5')).toBe('/v1/projects/mine/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(vertexPathAt(path, 'other', undefined)).toBe('/v1/projects/other/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(vertexPathAt('/v1beta1/projects/a/locations/b/endpoints/openapi/chat/completions', 'c', 'global')).toBe(
      '/v1beta1/projects/c/locations/global/endpoints/openapi/chat/completions',
    );
    expect(vertexPathAt('/v1/publishers/google/models', 'c', 'global')).toBe('/v1/publishers/google/models');
  });
});
