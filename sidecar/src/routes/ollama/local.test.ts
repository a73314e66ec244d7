import { describe, expect, it } from 'vitest';
import { defaultRuntimeConfig } from '../../config/config-store.ts';
import { GatewayError } from '../../translate/openai-error.ts';
import { planUpstreamRequest } from '../native-plan.ts';
import { routeBaseUrl } from '../upstream-base-url.ts';
import { embeddingsRoute, planGatewayCall } from '../v1-plan.ts';

const localEntry = { provider: 'local' as const, model: 'llama3.2', input_per_million: 0, output_per_million: 0 };
const json = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('route local', () => {
  it('reaches local.runtime.baseUrl, unless upstreams.local.baseUrl names another address', () => {
    const config = defaultRuntimeConfig();
    expect(routeBaseUrl('local', config)).toBe('http://127.0.0.1:11434');
    config.local.runtime.baseUrl = 'http://127.0.0.1:11500';
    expect(routeBaseUrl('local', config)).toBe('http://127.0.0.1:11500');
    config.upstreams.local = { baseUrl: 'http://gpu-box:11434' };
    expect(routeBaseUrl('local', config)).toBe('http://gpu-box:11434');
  });

  it('plans its OpenAI-compatible paths like the OpenAI API: the model from the body, stream usage asked for', () => {
    const plan = planUpstreamRequest('local', {
      method: 'POST',
      rest: '/v1/chat/completions',
      query: '',
      body: json({ model: 'llama3.2', stream: true, user: 'dev', messages: [] }),
      upstream: undefined,
    });
    expect(plan).toMatchObject({ path: '/v1/chat/completions', model: 'llama3.2', stripInjectedUsage: true, bodyUserId: 'dev' });
    expect(JSON.parse(plan.body!.toString('utf8')).stream_options).toEqual({ include_usage: true });
  });

  it('forwards its native /api paths as they are (NDJSON streams, which take no stream_options)', () => {
    const body = json({ model: 'llama3.2', stream: true, messages: [] });
    expect(planUpstreamRequest('local', { method: 'POST', rest: '/api/chat', query: '', body, upstream: undefined })).toEqual({
      path: '/api/chat',
      body,
      model: 'llama3.2',
      operation: 'chat',
      stripInjectedUsage: false,
      bodyUserId: null,
    });
    expect(planUpstreamRequest('local', { method: 'GET', rest: '/api/tags', query: '', body: null, upstream: undefined }).model).toBe('unknown');
  });

  it('passes embeddings and completions through on /v1; completions of other providers are refused there', () => {
    const config = defaultRuntimeConfig();
    const entry = { ...localEntry, model: 'nomic-embed-text' };
    const { module, plan } = embeddingsRoute({ entry, provider: 'local', requested: 'nomic-embed-text' }, config);
    expect(module.name).toBe('local');
    const embeddings = plan({ request: { model: 'nomic-embed-text', input: 'hi' }, requested: 'nomic-embed-text', entry, upstream: undefined, env: {} });
    expect(embeddings).toMatchObject({ path: '/v1/embeddings', response: null, stripInjectedUsage: false });
    // Passed through: the runtime answers in OpenAI's format itself.
    expect(embeddings.embeddings).toBeUndefined();
    expect(JSON.parse(embeddings.body.toString('utf8'))).toEqual({ model: 'nomic-embed-text', input: 'hi' });
    const completions = planGatewayCall(
      { model: 'llama3.2', prompt: 'def', stream: true },
      { entry: localEntry, provider: 'local', requested: 'llama3.2' },
      config,
      {},
      'completions',
    );
    expect(completions).toMatchObject({ path: '/v1/completions', stream: true, stripInjectedUsage: true });

    const gpt = { provider: 'openai' as const, model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 1 };
    expect(() => planGatewayCall({ model: 'gpt-4o-mini', prompt: 'hi' }, { entry: gpt, provider: 'openai', requested: 'gpt-4o-mini' }, config, {}, 'completions')).toThrow(
      GatewayError,
    );
  });
});
