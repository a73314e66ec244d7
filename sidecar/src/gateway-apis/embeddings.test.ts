import { describe, expect, it } from 'vitest';
import { ConfigStore, defaultRuntimeConfig } from '../config/config-store.ts';
import { findModel } from '../routes/v1-plan.ts';
import { GatewayError } from '../translate/openai-error.ts';
import { embeddingsApi } from './embeddings.ts';
import type { ApiAnswer, ApiPlan, CallerAnswer } from './gateway-api.ts';
import type { ResponseShaping } from '../translate/chat-responses.ts';

const prices = new ConfigStore().current().prices;

function config(gateway: Partial<ReturnType<typeof defaultRuntimeConfig>['gateway']> = {}) {
  const runtime = defaultRuntimeConfig();
  Object.assign(runtime.gateway, gateway);
  runtime.upstreams.alpha = { project: 'p1', location: 'europe-west4' };
  return runtime;
}

function plan(request: Record<string, unknown>, runtime = config()): ApiPlan {
  const model = request.model as string;
  const found = findModel(prices, model);
  if (found === undefined) throw new Error(`no price entry for ${model}`);
  return embeddingsApi.plan({ request, target: { ...found, requested: model }, config: runtime, env: {}, headers: {}, user: null, storedObjects: true });
}

const sent = (planned: ApiPlan): unknown => JSON.parse(planned.body.toString('utf8'));

/** A translated plan's answer (a pass-through one fails the test). */
function translated(answer: ApiAnswer): CallerAnswer {
  if (answer.passedThrough === true) throw new Error(`${answer.what} passes through where the test expects a translation`);
  return answer;
}
const shaping = (model: string, headers: Record<string, string> = {}) => ({ model, headers }) as unknown as ResponseShaping;

describe('/v1/embeddings planned on each provider', () => {
  it("passes OpenAI's request through to OpenAI as it came, base64 and all", () => {
    const planned = plan({ model: 'text-embedding-3-small', input: ['a', 'b'], encoding_format: 'base64', dimensions: 512 });
    expect(planned).toMatchObject({ route: 'beta', provider: 'openai', path: '/v1/embeddings', model: 'text-embedding-3-small', translation: 'passthrough', stream: false });
    expect(sent(planned)).toEqual({ model: 'text-embedding-3-small', input: ['a', 'b'], encoding_format: 'base64', dimensions: 512 });
  });

  it("sends Gemini's embedding models to alpha's :predict, whichever route serves Gemini's chat", () => {
    const planned = plan({ model: 'text-embedding-005', input: ['a', 'b'], dimensions: 256 }, config({ googleRoute: 'alpha-compat' }));
    expect(planned).toMatchObject({
      route: 'alpha',
      provider: 'google',
      model: 'text-embedding-005',
      path: '/v1/projects/p1/locations/europe-west4/publishers/google/models/text-embedding-005:predict',
      translation: 'embeddings',
    });
    expect(sent(planned)).toEqual({ instances: [{ content: 'a' }, { content: 'b' }], parameters: { autoTruncate: false, outputDimensionality: 256 } });
    // The answer is written as OpenAI's list, in the encoding asked for (float when none was).
    const answer = translated(planned.answer).json({ predictions: [{ embeddings: { values: [0.5], statistics: { token_count: 2 } } }] }, null, shaping('text-embedding-005'));
    expect(answer).toEqual({
      object: 'list',
      data: [{ object: 'embedding', index: 0, embedding: [0.5] }],
      model: 'text-embedding-005',
      usage: { prompt_tokens: 2, total_tokens: 2 },
    });
  });

  it("sends Bedrock's embedding models to gamma-cloudb's InvokeModel, whichever route serves Claude", () => {
    const titan = plan({ model: 'amazon.titan-embed-text-v2:0', input: 'hello', dimensions: 256, encoding_format: 'base64' }, config({ anthropicRoute: 'gamma-direct' }));
    expect(titan).toMatchObject({ route: 'gamma-cloudb', provider: 'anthropic', model: 'amazon.titan-embed-text-v2:0', path: '/model/amazon.titan-embed-text-v2%3A0/invoke' });
    expect(sent(titan)).toEqual({ inputText: 'hello', normalize: true, dimensions: 256 });
    // 1.0 as float32, little-endian: 00 00 80 3f.
    expect(translated(titan.answer).json({ embedding: [1], inputTextTokenCount: 2 }, null, shaping('amazon.titan-embed-text-v2:0'))).toMatchObject({
      data: [{ object: 'embedding', index: 0, embedding: 'AACAPw==' }],
      usage: { prompt_tokens: 2, total_tokens: 2 },
    });
    const cohere = plan({ model: 'cohere.embed-english-v3', input: ['a', 'b'] });
    expect(cohere).toMatchObject({ route: 'gamma-cloudb', path: '/model/cohere.embed-english-v3/invoke' });
    expect(sent(cohere)).toEqual({ texts: ['a', 'b'], input_type: 'search_document' });
    expect(translated(cohere.answer).json({ embeddings: [[0.5], [0.25]] }, null, shaping('cohere.embed-english-v3', { 'x-amzn-bedrock-input-token-count': '4' }))).toMatchObject({
      usage: { prompt_tokens: 4, total_tokens: 4 },
    });
  });

  it('refuses, naming the model, a chat model on a route that has embedding models', () => {
    for (const model of ['gemini-2.5-flash', 'claude-sonnet-4']) {
      let refused: unknown;
      try {
        plan({ model, input: 'hi' });
      } catch (error) {
        refused = error;
      }
      expect(refused, model).toBeInstanceOf(GatewayError);
      expect((refused as GatewayError).param).toBe('model');
      expect((refused as GatewayError).message).toContain(`model ${model} is not served on /v1/embeddings`);
    }
  });

  it("refuses what the provider cannot honour before anything is sent, in OpenAI's terms", () => {
    expect(() => plan({ model: 'amazon.titan-embed-text-v2:0', input: ['a', 'b'] })).toThrow('takes one text per request');
    expect(() => plan({ model: 'gemini-embedding-001', input: ['a', 'b'] })).toThrow('takes one text per request');
    expect(() => plan({ model: 'cohere.embed-english-v3', input: 'a', dimensions: 256 })).toThrow('dimensions 256 is not supported for model cohere.embed-english-v3');
  });
});
