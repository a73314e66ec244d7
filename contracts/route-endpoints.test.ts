// A route's `endpoints` (ADR 0008) as the config file, the config API and the operator's snapshot give them:
// what is taken, and every refusal naming its field.

import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from './config-schema.ts';
import { patchForRevision } from './config-revisions.ts';
import { endpointCredentialDefinition } from './route-endpoints.ts';

/** The config API's parse: its sections, and credentials only as declared (ADR 1007). */
const fromApi = (input: unknown) => parseRuntimeConfigPatch(input, ['upstreams', 'routes'], { declaredCredentials: () => undefined });

const mistral = { name: 'mistral', format: 'openai-chat', baseUrl: 'https://api.mistral.ai', credential: { kind: 'api-key', env: 'MISTRAL_API_KEY' } };

describe('endpoints of a built-in route (upstreams.<route>.endpoints)', () => {
  it('takes names, weights, base URLs, key sources and a strategy, trimming a base URL’s trailing slash', () => {
    const patch = parseRuntimeConfigPatch({
      upstreams: {
        beta: {
          strategy: 'least-outstanding',
          endpoints: [
            { name: 'first', weight: 3, credential: { file: '/keys/first' } },
            { name: 'second', weight: 0.5, baseUrl: 'https://eu.api.openai.com/', credential: { env: 'OPENAI_KEY_2' } },
          ],
        },
        gamma: {
          project: 'p',
          endpoints: [
            { name: 'east', location: 'us-east5' },
            { name: 'central', location: 'us-central1', project: 'q' },
          ],
        },
        'gamma-cloudb': { endpoints: [{ name: 'use1', region: 'us-east-1', credential: { accessKeyIdFile: '/k/id', secretAccessKeyFile: '/k/secret' } }] },
      },
    });
    expect(patch.upstreams).toEqual({
      beta: {
        strategy: 'least-outstanding',
        endpoints: [
          { name: 'first', weight: 3, credential: { file: '/keys/first' } },
          { name: 'second', weight: 0.5, baseUrl: 'https://eu.api.openai.com', credential: { env: 'OPENAI_KEY_2' } },
        ],
      },
      gamma: {
        project: 'p',
        endpoints: [
          { name: 'east', location: 'us-east5' },
          { name: 'central', location: 'us-central1', project: 'q' },
        ],
      },
      'gamma-cloudb': { endpoints: [{ name: 'use1', region: 'us-east-1', credential: { accessKeyIdFile: '/k/id', secretAccessKeyFile: '/k/secret' } }] },
    });
  });

  it.each([
    ['a weight of 0', { beta: { endpoints: [{ name: 'a', weight: 0 }] } }, 'upstreams.beta.endpoints[0].weight must be a number greater than 0 and at most 1000 (got 0)'],
    ['a negative weight', { beta: { endpoints: [{ name: 'a', weight: -2 }] } }, 'upstreams.beta.endpoints[0].weight must be a number greater than 0 and at most 1000 (got -2)'],
    ['a weight as text', { beta: { endpoints: [{ name: 'a', weight: '3' }] } }, 'upstreams.beta.endpoints[0].weight must be a number greater than 0 and at most 1000 (got "3")'],
    [
      'a name twice',
      { beta: { endpoints: [{ name: 'a' }, { name: 'b' }, { name: 'a' }] } },
      'upstreams.beta.endpoints[2].name repeats endpoint a (already at upstreams.beta.endpoints[0])',
    ],
    ['a name that is not a DNS label', { beta: { endpoints: [{ name: 'Key_1' }] } }, /^upstreams\.beta\.endpoints\[0\]\.name must be an endpoint name/],
    ['no name', { beta: { endpoints: [{ weight: 1 }] } }, /^upstreams\.beta\.endpoints\[0\]\.name must be an endpoint name/],
    [
      'an unknown field',
      { beta: { endpoints: [{ name: 'a', priority: 1 }] } },
      /^upstreams\.beta\.endpoints\[0\]\.priority is not a known field \(expected one of: name, weight, baseUrl, credential\)/,
    ],
    ['a location on a route that has none', { beta: { endpoints: [{ name: 'a', location: 'us-east5' }] } }, /^upstreams\.beta\.endpoints\[0\]\.location is not a known field/],
    ['a region on Vertex AI', { gamma: { endpoints: [{ name: 'a', region: 'us-east-1' }] } }, /^upstreams\.gamma\.endpoints\[0\]\.region is not a known field/],
    ['an empty list', { beta: { endpoints: [] } }, /^upstreams\.beta\.endpoints must be a list of 1 to 16 endpoints/],
    ['17 endpoints', { beta: { endpoints: Array.from({ length: 17 }, (_, i) => ({ name: `e${i}` })) } }, /^upstreams\.beta\.endpoints must be a list of 1 to 16 endpoints/],
    [
      'a base URL with a password',
      { beta: { endpoints: [{ name: 'a', baseUrl: 'https://u:p@api.openai.com' }] } },
      /^upstreams\.beta\.endpoints\[0\]\.baseUrl must be an http\(s\) URL/,
    ],
    ['a bad location', { gamma: { endpoints: [{ name: 'a', location: 'US East' }] } }, /^upstreams\.gamma\.endpoints\[0\]\.location must be a location/],
    ['an unknown strategy', { beta: { strategy: 'random', endpoints: [{ name: 'a' }] } }, 'upstreams.beta.strategy must be one of weighted, least-outstanding (got "random")'],
    [
      'a credential field of another kind (a Google key file on an API-key route: `file` is fine, `accessKeyIdFile` is not)',
      { beta: { endpoints: [{ name: 'a', credential: { accessKeyIdFile: '/k' } }] } },
      /^upstreams\.beta\.endpoints\[0\]\.credential\.accessKeyIdFile is not where a key of the route's credential kind api-key is \(expected one of: env, file\)/,
    ],
    [
      'another header on an API-key route',
      { beta: { endpoints: [{ name: 'a', credential: { header: 'x-api-key', file: '/k' } }] } },
      /^upstreams\.beta\.endpoints\[0\]\.credential\.header is not where a key of the route's credential kind api-key is/,
    ],
    ['another kind', { beta: { endpoints: [{ name: 'a', credential: { kind: 'google-adc' } }] } }, /^upstreams\.beta\.endpoints\[0\]\.credential\.kind is not where a key/],
    [
      'an API-key variable on Vertex AI',
      { gamma: { endpoints: [{ name: 'a', credential: { env: 'KEY' } }] } },
      /^upstreams\.gamma\.endpoints\[0\]\.credential\.env is not where a key of the route's credential kind google-adc is \(expected one of: file\)/,
    ],
    [
      'a key on the local route, which takes none',
      { local: { endpoints: [{ name: 'a', credential: { file: '/k' } }] } },
      /^upstreams\.local\.endpoints\[0\]\.credential cannot be set: the route's credential is of kind none/,
    ],
    [
      'half an AWS key pair',
      { 'gamma-cloudb': { endpoints: [{ name: 'a', credential: { accessKeyIdFile: '/k/id' } }] } },
      'upstreams.gamma-cloudb.endpoints[0].credential.secretAccessKeyFile and accessKeyIdFile must be set together',
    ],
    [
      'an empty credential',
      { beta: { endpoints: [{ name: 'a', credential: {} }] } },
      /^upstreams\.beta\.endpoints\[0\]\.credential must name where the endpoint's key is: one of env, file/,
    ],
  ])('refuses %s, naming the field', (_what, upstreams, message) => {
    expect(() => parseRuntimeConfigPatch({ upstreams })).toThrow(message);
  });
});

describe('endpoints of a configured route (routes[].endpoints)', () => {
  it('takes them beside the route’s own settings', () => {
    const patch = parseRuntimeConfigPatch({
      routes: [
        {
          ...mistral,
          endpoints: [
            { name: 'a', credential: { env: 'MISTRAL_KEY_A' } },
            { name: 'b', weight: 2 },
          ],
        },
      ],
    });
    expect(patch.routes?.[0]?.endpoints).toEqual([
      { name: 'a', credential: { env: 'MISTRAL_KEY_A' } },
      { name: 'b', weight: 2 },
    ]);
  });

  it('refuses a key source of another kind than the route’s, and settings its format does not take', () => {
    expect(() => parseRuntimeConfigPatch({ routes: [{ ...mistral, endpoints: [{ name: 'a', credential: { secretAccessKeyFile: '/k' } }] }] })).toThrow(
      /^routes\[0\]\.endpoints\[0\]\.credential\.secretAccessKeyFile is not where a key of the route's credential kind api-key is/,
    );
    expect(() => parseRuntimeConfigPatch({ routes: [{ ...mistral, endpoints: [{ name: 'a', project: 'p' }] }] })).toThrow(
      /^routes\[0\]\.endpoints\[0\]\.project is not a known field/,
    );
    expect(() => parseRuntimeConfigPatch({ routes: [{ ...mistral, endpoints: [{ name: 'a' }, { name: 'a' }] }] })).toThrow(
      'routes[0].endpoints[1].name repeats endpoint a (already at routes[0].endpoints[0])',
    );
  });
});

describe('through the config API, which has no authentication (ADR 1007)', () => {
  it('takes endpoints that use their route’s credential', () => {
    expect(fromApi({ upstreams: { beta: { endpoints: [{ name: 'a' }, { name: 'b', weight: 2 }] } } }).upstreams).toEqual({
      beta: { endpoints: [{ name: 'a' }, { name: 'b', weight: 2 }] },
    });
  });

  it('refuses an endpoint that names where a key is, on a built-in route or a configured one', () => {
    expect(() => fromApi({ upstreams: { beta: { endpoints: [{ name: 'a', credential: { env: 'STRIPE_API_KEY' } }] } } })).toThrow(
      /^upstreams\.beta\.endpoints\[0\]\.credential cannot be set through this API, which has no authentication/,
    );
    const declared = { ...mistral, credential: { kind: 'none' } };
    expect(() => fromApi({ routes: [{ ...declared, endpoints: [{ name: 'a', credential: { file: '/etc/shadow' } }] }] })).toThrow(
      /^routes\[0\]\.endpoints\[0\]\.credential cannot be set through this API/,
    );
  });
});

describe("an endpoint's credential definition", () => {
  it('is the route’s with only its key sources replaced', () => {
    const route = { kind: 'api-key', header: 'x-api-key', prefix: '', env: 'ANTHROPIC_API_KEY', file: '/keys/route', headers: { 'anthropic-version': '2023-06-01' } } as const;
    expect(endpointCredentialDefinition(route, { env: 'ANTHROPIC_KEY_2' })).toEqual({
      kind: 'api-key',
      header: 'x-api-key',
      prefix: '',
      env: 'ANTHROPIC_KEY_2',
      headers: { 'anthropic-version': '2023-06-01' },
    });
    expect(endpointCredentialDefinition(route, undefined)).toBe(route);
  });
});

describe('a sidecar of a config revision before endpoints (ADR 0723)', () => {
  it('gets each route without its endpoints and strategy, its own settings kept, and is told what was withheld', () => {
    const patch = parseRuntimeConfigPatch({
      upstreams: { beta: { baseUrl: 'https://api.openai.com', strategy: 'least-outstanding', endpoints: [{ name: 'a' }, { name: 'b' }] }, alpha: { location: 'us-east5' } },
      routes: [{ ...mistral, endpoints: [{ name: 'a' }] }],
    });
    const { patch: older, withheld } = patchForRevision(patch, 2);
    expect(older.upstreams).toEqual({ beta: { baseUrl: 'https://api.openai.com' }, alpha: { location: 'us-east5' } });
    expect(older.routes).toEqual([{ ...mistral, credential: { kind: 'api-key', header: 'authorization', prefix: 'Bearer ', env: 'MISTRAL_API_KEY' } }]);
    expect(withheld).toEqual(['upstreams.beta.endpoints', 'routes (mistral).endpoints']);
    expect(parseRuntimeConfigPatch(older)).toEqual(older);
  });
});
