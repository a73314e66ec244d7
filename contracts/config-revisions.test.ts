import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from './config-schema.ts';
import { CONFIG_REVISION, patchForRevision, REVISION_1_PROVIDERS } from './config-revisions.ts';
import { PROVIDERS } from './routes.ts';

const patch = parseRuntimeConfigPatch({
  upstreams: { beta: { baseUrl: 'http://fake-openai:8080' } },
  routes: [{ name: 'mistral', format: 'openai-chat', baseUrl: 'https://api.mistral.ai', credential: { kind: 'api-key' } }],
  pricing: {
    models: [
      { provider: 'openai', model: 'gpt-4o-mini', input_per_million: 2.5, output_per_million: 10 },
      { provider: 'mistral', model: 'mistral-small', input_per_million: 0.2, output_per_million: 0.6 },
    ],
  },
  models: { 'claude-sonnet': { targets: [{ route: 'gamma-direct', model: 'claude-sonnet-4-5' }] } },
});

describe('the patch a sidecar of an older config revision gets', () => {
  it('a revision 1 sidecar gets everything but the configured routes, their providers’ prices and the model aliases, and is told what was withheld', () => {
    const { patch: older, withheld } = patchForRevision(patch, 1);
    expect(older).toEqual({
      upstreams: { beta: { baseUrl: 'http://fake-openai:8080' } },
      pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 2.5, output_per_million: 10 }] },
    });
    expect(withheld).toEqual(['models (claude-sonnet)', 'routes (mistral)', 'pricing.models of provider mistral']);
    // What it still gets is a valid patch (a price change reaches it).
    expect(parseRuntimeConfigPatch(older)).toEqual(older);
  });

  it('a revision 2 sidecar gets the configured routes but not the model aliases, and is told so', () => {
    const { patch: older, withheld } = patchForRevision(patch, 2);
    expect(older).toEqual({ upstreams: patch.upstreams, routes: patch.routes, pricing: patch.pricing });
    expect(withheld).toEqual(['models (claude-sonnet)']);
    expect(parseRuntimeConfigPatch(older)).toEqual(older);
  });

  it('a sidecar of this revision, or a later one, gets the patch as it is', () => {
    expect(patchForRevision(patch, CONFIG_REVISION)).toEqual({ patch, withheld: [] });
    expect(patchForRevision(patch, CONFIG_REVISION + 1)).toEqual({ patch, withheld: [] });
  });

  it('withholds nothing from a patch that uses nothing new', () => {
    const plain = parseRuntimeConfigPatch({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 0 }] } });
    expect(patchForRevision(plain, 1)).toEqual({ patch: plain, withheld: [] });
  });

  it('knows every built-in provider at revision 1; a new one needs a config revision that withholds its prices', () => {
    expect([...PROVIDERS].filter((p) => !REVISION_1_PROVIDERS.includes(p))).toEqual([]);
  });
});
