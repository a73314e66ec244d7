import { describe, expect, it } from 'vitest';
import { defaultRuntimeConfig, ConfigStore } from '../config/config-store.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { GatewayError } from '../translate/openai-error.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { ROUTE_MODULES } from './route-modules.ts';
import { findModel, planGatewayCall } from './v1-plan.ts';

const anthropicModelId = (route: 'gamma-direct' | 'gamma' | 'gamma-cloudb', requested: string, entry: PriceEntry) => ROUTE_MODULES[route].v1!.modelId(requested, entry);

const prices = new ConfigStore().current().prices;
const sonnet = prices.resolve('anthropic', 'claude-sonnet-4')!;
const chat = { messages: [{ role: 'user', content: 'Hi' }] };

function plan(model: string, gateway: Partial<ReturnType<typeof defaultRuntimeConfig>['gateway']>, extra: Record<string, unknown> = {}) {
  const config = defaultRuntimeConfig();
  Object.assign(config.gateway, gateway);
  config.upstreams.alpha = { project: 'p1', location: 'europe-west4' };
  config.upstreams['alpha-compat'] = { project: 'p1', location: 'global' };
  config.upstreams.gamma = { project: 'p1', location: 'us-east5' };
  const found = findModel(prices, model)!;
  return planGatewayCall({ model, ...chat, ...extra }, { ...found, requested: model }, config, {});
}

describe('the model id a route receives', () => {
  it("takes the route's id from the price entry's aliases", () => {
    expect(anthropicModelId('gamma-direct', 'claude-sonnet-4', sonnet)).toBe('claude-sonnet-4-20250514');
    expect(anthropicModelId('gamma', 'claude-sonnet-4', sonnet)).toBe('claude-sonnet-4@20250514');
    expect(anthropicModelId('gamma-cloudb', 'claude-sonnet-4', sonnet)).toBe('anthropic.claude-sonnet-4-20250514-v1:0');
    // An id of another route's form is translated too.
    expect(anthropicModelId('gamma-cloudb', 'claude-sonnet-4@20250514', sonnet)).toBe('anthropic.claude-sonnet-4-20250514-v1:0');
  });

  it("keeps an id the caller sent in the route's own form", () => {
    expect(anthropicModelId('gamma-cloudb', 'us.anthropic.claude-sonnet-4-20250514-v1:0', sonnet)).toBe('us.anthropic.claude-sonnet-4-20250514-v1:0');
    expect(anthropicModelId('gamma-direct', 'claude-sonnet-4-0', sonnet)).toBe('claude-sonnet-4-0');
  });

  it('refuses a model whose entry has no id for the route', () => {
    const custom = { provider: 'anthropic' as const, model: 'claude-custom', input_per_million: 1, output_per_million: 1 };
    expect(() => anthropicModelId('gamma', 'claude-custom', custom)).toThrow(GatewayError);
  });

  it('finds the provider of a model by any of its ids, and nothing for an unknown one', () => {
    expect(findModel(prices, 'gpt-4o-2024-08-06')?.provider).toBe('openai');
    expect(findModel(prices, 'google/gemini-2.5-pro')?.provider).toBe('google');
    expect(findModel(prices, 'anthropic.claude-haiku-4-5-20251001-v1:0')?.entry.model).toBe('claude-haiku-4-5');
    expect(findModel(prices, 'llama-3-70b')).toBeUndefined();
  });

  it('finds an id several providers price on openai first, then anthropic, google, local, then configured providers in their order', () => {
    const entry = (provider: string) => ({ provider, model: 'shared-model', input_per_million: 1, output_per_million: 1 });
    const all = ['local', 'google', 'anthropic', 'openai', 'mistral'];
    const table = (providers: string[]) => new PriceTable(providers.map(entry), { ...DEFAULT_CACHE_SETTINGS });
    expect(findModel(table(all), 'shared-model', ['mistral'])?.provider).toBe('openai');
    expect(findModel(table(['local', 'google', 'anthropic', 'mistral']), 'shared-model', ['mistral'])?.provider).toBe('anthropic');
    expect(findModel(table(['local', 'google', 'mistral']), 'shared-model', ['mistral'])?.provider).toBe('google');
    expect(findModel(table(['local', 'mistral']), 'shared-model', ['mistral'])?.provider).toBe('local');
    expect(findModel(table(['mistral', 'deepseek']), 'shared-model', ['deepseek', 'mistral'])?.provider).toBe('deepseek');
  });
});

describe('the upstream request of each route', () => {
  it('alpha: generateContent or streamGenerateContent?alt=sse in the configured project and location', () => {
    expect(plan('gemini-2.5-pro', { googleRoute: 'alpha' }).path).toBe('/v1/projects/p1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent');
    expect(plan('google/gemini-2.5-pro', { googleRoute: 'alpha' }, { stream: true }).path).toBe(
      '/v1/projects/p1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    );
  });

  it('alpha-compat and beta: pass-through with usage injected into streams', () => {
    const compat = plan('gemini-2.5-flash', { googleRoute: 'alpha-compat' }, { stream: true });
    expect(JSON.parse(compat.body.toString())).toEqual({ model: 'google/gemini-2.5-flash', ...chat, stream: true, stream_options: { include_usage: true } });
    expect(compat).toMatchObject({ translation: 'passthrough', stripInjectedUsage: true, path: '/v1/projects/p1/locations/global/endpoints/openapi/chat/completions' });
    const beta = plan('gpt-4o', {}, { stream: true, stream_options: { include_usage: true } });
    expect(beta).toMatchObject({ route: 'beta', path: '/v1/chat/completions', stripInjectedUsage: false, includeUsage: true });
  });

  it('gamma-cloudb: the path decides streaming; no model or stream in the body', () => {
    const p = plan('claude-sonnet-4', { anthropicRoute: 'gamma-cloudb' }, { stream: true });
    expect(p.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream');
    const body = JSON.parse(p.body.toString()) as Record<string, unknown>;
    expect(body.anthropic_version).toBe('bedrock-2023-05-31');
    expect(body).not.toHaveProperty('model');
    expect(body).not.toHaveProperty('stream');
    expect(p.headers).toMatchObject({ accept: 'application/vnd.amazon.eventstream', 'x-amzn-bedrock-accept': 'application/json' });
  });

  it('gamma: rawPredict with the Vertex id in the path and stream kept in the body', () => {
    const p = plan('claude-sonnet-4-20250514', { anthropicRoute: 'gamma' }, { stream: true });
    expect(p.path).toBe('/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict');
    expect(JSON.parse(p.body.toString())).toMatchObject({ anthropic_version: 'vertex-2023-10-16', stream: true });
  });

  it('a Vertex route without a project is an upstream_misconfigured error naming the setting', () => {
    const config = defaultRuntimeConfig();
    const found = findModel(prices, 'gemini-2.5-flash')!;
    expect(() => planGatewayCall({ model: 'gemini-2.5-flash', ...chat }, { ...found, requested: 'gemini-2.5-flash' }, config, {})).toThrow(
      /upstreams\.alpha\.project or GOOGLE_CLOUD_PROJECT/,
    );
  });
});

describe("Bedrock's models other than Claude (ADR 0914)", () => {
  it('go to gamma-cloudb through Converse whichever route serves Claude; Claude stays on its route', () => {
    const nova = plan('amazon.nova-pro-v1:0', {});
    expect(nova).toMatchObject({ route: 'gamma-cloudb', model: 'amazon.nova-pro-v1:0', path: '/model/amazon.nova-pro-v1%3A0/converse', translation: 'converse' });
    expect(JSON.parse(nova.body.toString())).toEqual({ messages: [{ role: 'user', content: [{ text: 'Hi' }] }] });
    expect(plan('claude-sonnet-4', {})).toMatchObject({ route: 'gamma-direct', path: '/v1/messages' });
    expect(plan('nova-lite', { anthropicRoute: 'gamma' }, { stream: true })).toMatchObject({
      route: 'gamma-cloudb',
      model: 'amazon.nova-lite-v1:0',
      path: '/model/amazon.nova-lite-v1%3A0/converse-stream',
      headers: { accept: 'application/vnd.amazon.eventstream' },
    });
  });

  it('keep an inference profile the caller sent; Claude on gamma-cloudb still goes through InvokeModel', () => {
    expect(plan('us.amazon.nova-micro-v1:0', {}).path).toBe('/model/us.amazon.nova-micro-v1%3A0/converse');
    expect(plan('claude-sonnet-4', { anthropicRoute: 'gamma-cloudb' }).path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke');
  });

  it('are refused on a Claude route named for them (an alias target), and have no native Messages surface', () => {
    const config = defaultRuntimeConfig();
    const found = findModel(prices, 'amazon.nova-pro-v1:0')!;
    const target = { ...found, requested: 'amazon.nova-pro-v1:0', route: 'gamma-direct' };
    expect(() => planGatewayCall({ model: 'amazon.nova-pro-v1:0', ...chat }, target, config, {})).toThrow(/is not served by route gamma-direct/);
    const call = { request: { ...chat }, requested: 'amazon.nova-pro-v1:0', entry: found.entry, upstream: undefined, env: {} };
    expect(ROUTE_MODULES['gamma-cloudb'].v1!.messages!(call, 'messages')).toBeUndefined();
  });
});
