import { describe, expect, it } from 'vitest';
import type { ProxyConfigSpec } from '../../crds/index.ts';
import { render } from './render.ts';

// The alias: the Anthropic API first, then Vertex AI and Bedrock sharing priority 1.
const sonnet = {
  targets: [
    { route: 'gamma-direct', model: 'claude-sonnet-4-5' },
    { route: 'gamma', model: 'claude-sonnet-4-5@20250929', priority: 1 },
    { route: 'gamma-cloudb', model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', priority: 1 },
  ],
};

const mistral = { name: 'mistral', format: 'openai-chat' as const, baseUrl: 'https://api.mistral.ai', credential: { kind: 'api-key' as const } };

function refusal(spec: ProxyConfigSpec): string {
  try {
    render(spec);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('render accepted the spec');
}

describe('render: spec.models', () => {
  it('hands the aliases to the sidecars as written, targets on built-in routes and on spec.routes alike', () => {
    const models = {
      'claude-sonnet': sonnet,
      small: {
        targets: [
          { route: 'mistral', model: 'mistral-small-latest' },
          { route: 'beta', model: 'gpt-4o-mini', priority: 1, weight: 2 },
        ],
      },
    };
    const { patch } = render({ routes: [mistral], models });
    expect(patch.models).toEqual(models);
  });

  it('refuses a target on a route that exists neither built in nor in spec.routes, naming the target', () => {
    const models = { 'claude-sonnet': { targets: [sonnet.targets[0]!, { route: 'gamma-europe', model: 'claude-sonnet-4-5@20250929' }] } };
    expect(refusal({ models })).toBe('models.claude-sonnet.targets[1].route names no route (got "gamma-europe"): a built-in route or one of the config\'s routes');
    // The same name as a route of spec.routes is a route.
    expect(render({ models, routes: [{ ...mistral, name: 'gamma-europe', format: 'anthropic' }] }).patch.models).toEqual(models);
  });

  it('refuses a target on a route /v1 cannot call: gamma-cloud (rawPredict only), or a configured route of that format', () => {
    expect(refusal({ models: { 'claude-sonnet': { targets: [{ route: 'gamma-cloud', model: 'claude-sonnet-4-5@20250929' }] } } })).toBe(
      "models.claude-sonnet.targets[0].route gamma-cloud is served on /proxy only; /v1 cannot send an alias's calls there",
    );
    const raw = { ...mistral, name: 'claude-raw', format: 'anthropic-vertex-raw' as const, credential: { kind: 'google-adc' as const } };
    expect(refusal({ routes: [raw], models: { 'claude-sonnet': { targets: [sonnet.targets[0]!, { route: 'claude-raw', model: 'claude-sonnet-4-5@20250929' }] } } })).toBe(
      "models.claude-sonnet.targets[1].route claude-raw is served on /proxy only; /v1 cannot send an alias's calls there",
    );
  });

  it('refuses a target whose model is another alias', () => {
    const models = { 'claude-sonnet': sonnet, best: { targets: [{ route: 'gamma-direct', model: 'claude-sonnet' }] } };
    expect(refusal({ models })).toBe("models.best.targets[0].model is the alias claude-sonnet: aliases do not chain; name the route's own model id");
  });

  it('refuses what the schema refuses, as the API server would (for clients that skip its validation)', () => {
    expect(refusal({ models: { 'claude-sonnet': { targets: [] } } })).toMatch(/^models\.claude-sonnet\.targets /);
    expect(refusal({ models: { 'claude-sonnet': { targets: [{ ...sonnet.targets[0]!, weight: 0 }] } } })).toMatch(/^models\.claude-sonnet\.targets\[0\]\.weight /);
  });
});
