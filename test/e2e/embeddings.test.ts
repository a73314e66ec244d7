// /v1/embeddings as its users meet it: the official `openai` SDK's `embeddings.create`, unmodified (it asks for
// base64 unless told otherwise), against a real `tollgate proxy` whose routes reach each provider's fake: OpenAI
// (passed through), Gemini's embedding models on Vertex AI (:predict), Bedrock's Titan and Cohere models
// (InvokeModel, SigV4 checked by the fake) and a configured OpenAI-compatible route. Each fake checks what it
// receives in its own shape and counts one token per word (test/fakes/llm-embeddings.ts); each call's span is
// read back and its tokens and cost checked against costs worked out by hand.

import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY, PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let openai: OpenAI;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`routes:
  - name: mistral
    format: openai-chat
    baseUrl: "${bed.openai.url}"
    credential: { kind: api-key, env: MISTRAL_API_KEY }
pricing:
  models:
    - { provider: mistral, model: text-embedding-3-small, input_per_million: 0.05, output_per_million: 0 }
`),
    env: { ...bed.env, MISTRAL_API_KEY: OPENAI_KEY },
  });
  openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

async function spanOf(response: Response): Promise<SpanJson> {
  const spanId = response.headers.get('x-proxy-span-id');
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId });
}

function expectSpan(span: SpanJson, expected: { route: string; provider: string; model: string; inputTokens: number; costUsd: number }): void {
  expect(span).toMatchObject({
    name: `embeddings ${expected.model}`,
    route: expected.route,
    provider: expected.provider,
    model: expected.model,
    user_id: 'alice',
    status: 'ok',
    status_code: 200,
    input_tokens: expected.inputTokens,
    output_tokens: 0,
    total_tokens: expected.inputTokens,
    priced: true,
  });
  expect(span.cost_usd).toBeCloseTo(expected.costUsd, 12);
}

/** The last request a fake received, parsed. */
const lastJson = (fake: UpstreamBed['vertex']) => fake.requests.at(-1)!.json as Record<string, unknown>;

/** float32 rounding: what a base64 answer decodes to. */
const float32 = (vector: number[]) => vector.map((value) => Math.fround(value));

describe('/v1/embeddings with the official openai SDK', () => {
  it("passes OpenAI's models through to OpenAI, base64 as the SDK asks", async () => {
    const { data, response } = await openai.embeddings
      .create({ model: 'text-embedding-3-small', input: ['The quick brown fox', 'jumps over the lazy dog'], user: 'alice' })
      .withResponse();
    // The SDK asked for base64 and decoded it; the request reached OpenAI as sent.
    expect(bed.openai.requests.at(-1)!.path).toBe('/v1/embeddings');
    expect(lastJson(bed.openai)).toEqual({ model: 'text-embedding-3-small', input: ['The quick brown fox', 'jumps over the lazy dog'], user: 'alice', encoding_format: 'base64' });
    expect(bed.openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(data.data.map((item) => [item.index, item.embedding.length])).toEqual([
      [0, 1536],
      [1, 1536],
    ]);
    // 4 + 5 words = 9 tokens at 0.02 per million: 9 × 0.02 / 1e6 = 0.00000018.
    expect(data.usage).toEqual({ prompt_tokens: 9, total_tokens: 9 });
    expectSpan(await spanOf(response), { route: 'beta', provider: 'openai', model: 'text-embedding-3-small', inputTokens: 9, costUsd: 0.00000018 });
  });

  it("translates Gemini's embedding model to Vertex AI's :predict, and back", async () => {
    const { data, response } = await openai.embeddings
      .create({ model: 'gemini-embedding-001', input: 'Embed this short sentence, please.', dimensions: 768, user: 'alice' })
      .withResponse();
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-embedding-001:predict`);
    expect(seen.headers.authorization).toMatch(/^Bearer /);
    expect(seen.json).toEqual({ instances: [{ content: 'Embed this short sentence, please.' }], parameters: { autoTruncate: false, outputDimensionality: 768 } });
    expect(data.model).toBe('gemini-embedding-001');
    expect(data.data).toHaveLength(1);
    expect(data.data[0]!.embedding).toHaveLength(768);
    // 5 words = 5 tokens at 0.15 per million: 5 × 0.15 / 1e6 = 0.00000075.
    expect(data.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    expectSpan(await spanOf(response), { route: 'alpha', provider: 'google', model: 'gemini-embedding-001', inputTokens: 5, costUsd: 0.00000075 });
  });

  it('answers floats or base64 alike: the SDK decodes the base64 to the float32 of the floats', async () => {
    const input = ['first text here', 'the second one', 'and a third, longer than the others'];
    const floats = await openai.embeddings.create({ model: 'text-embedding-005', input, encoding_format: 'float', user: 'alice' });
    const { data: decoded, response } = await openai.embeddings.create({ model: 'text-embedding-005', input, user: 'alice' }).withResponse();
    expect(bed.vertex.requests.map((r) => (r.json as { instances: unknown[] }).instances.length)).toEqual([3, 3]);
    expect(decoded.data.map((item) => item.index)).toEqual([0, 1, 2]);
    for (const [i, item] of decoded.data.entries()) {
      expect(item.embedding).toHaveLength(768);
      expect(item.embedding).toEqual(float32(floats.data[i]!.embedding));
    }
    // 3 + 3 + 7 = 13 tokens at 0.10 per million (the per-character price at four characters a token): 0.0000013.
    expect(decoded.usage.prompt_tokens).toBe(13);
    expectSpan(await spanOf(response), { route: 'alpha', provider: 'google', model: 'text-embedding-005', inputTokens: 13, costUsd: 0.0000013 });
  });

  it('translates Titan Text Embeddings V2 to a signed InvokeModel, and back', async () => {
    const { data, response } = await openai.embeddings
      .create({ model: 'amazon.titan-embed-text-v2:0', input: 'The quick brown fox jumps', dimensions: 256, user: 'alice' })
      .withResponse();
    // The fake verified the SigV4 signature (a bad one is a 403 there).
    const seen = bed.bedrock.requests.at(-1)!;
    expect(seen.path).toBe('/model/amazon.titan-embed-text-v2%3A0/invoke');
    expect(seen.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    expect(seen.json).toEqual({ inputText: 'The quick brown fox jumps', normalize: true, dimensions: 256 });
    expect(data.data[0]!.embedding).toHaveLength(256);
    // 5 tokens at 0.02 per million: 5 × 0.02 / 1e6 = 0.0000001.
    expect(data.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    expectSpan(await spanOf(response), { route: 'gamma-cloudb', provider: 'anthropic', model: 'amazon.titan-embed-text-v2:0', inputTokens: 5, costUsd: 0.0000001 });
  });

  it('translates Cohere Embed v3 on Bedrock, its count read from the token-count header', async () => {
    const { data, response } = await openai.embeddings
      .create({ model: 'cohere.embed-multilingual-v3', input: ['bonjour le monde', 'hallo Welt'], encoding_format: 'float', user: 'alice' })
      .withResponse();
    expect(lastJson(bed.bedrock)).toEqual({ texts: ['bonjour le monde', 'hallo Welt'], input_type: 'search_document' });
    expect(data.data.map((item) => item.embedding.length)).toEqual([1024, 1024]);
    // 3 + 2 = 5 tokens at 0.10 per million: 0.0000005.
    expect(data.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    expectSpan(await spanOf(response), { route: 'gamma-cloudb', provider: 'anthropic', model: 'cohere.embed-multilingual-v3', inputTokens: 5, costUsd: 0.0000005 });
  });

  it('passes a configured OpenAI-compatible route through, priced by its own entry', async () => {
    const { data, response } = await openai.embeddings.create({ model: 'mistral/text-embedding-3-small', input: 'one two three four', user: 'alice' }).withResponse();
    expect(lastJson(bed.openai)).toMatchObject({ model: 'text-embedding-3-small', input: 'one two three four' });
    expect(data.usage.prompt_tokens).toBe(4);
    // 4 tokens at the configured 0.05 per million: 0.0000002.
    expectSpan(await spanOf(response), { route: 'mistral', provider: 'mistral', model: 'text-embedding-3-small', inputTokens: 4, costUsd: 0.0000002 });
  });

  it('refuses with a 400 naming the parameter what a provider cannot honour, and sends nothing', async () => {
    const refusals: [OpenAI.EmbeddingCreateParams, string, string, string][] = [
      [{ model: 'amazon.titan-embed-text-v2:0', input: ['one', 'two'] }, 'input', 'takes one text per request', 'gamma-cloudb'],
      [{ model: 'cohere.embed-english-v3', input: 'one', dimensions: 512 }, 'dimensions', 'dimensions 512 is not supported for model cohere.embed-english-v3', 'gamma-cloudb'],
      [{ model: 'gemini-embedding-001', input: [[101, 102]] }, 'input', 'token ids', 'alpha'],
      [{ model: 'claude-sonnet-4', input: 'one' }, 'model', 'is not served on /v1/embeddings', 'gamma-cloudb'],
    ];
    for (const [params, param, words, route] of refusals) {
      const refused = await openai.embeddings
        .create({ ...params, user: 'alice' })
        .withResponse()
        .catch((error: unknown) => error);
      expect(refused, params.model).toBeInstanceOf(APIError);
      const error = refused as APIError;
      expect(error.status).toBe(400);
      expect(error.param).toBe(param);
      expect(error.message).toContain(words);
      const span = await findSpan(proxy.url, { spanId: error.headers?.get('x-proxy-span-id') ?? null });
      expect(span).toMatchObject({ name: `embeddings ${params.model}`, status: 'rejected', route, model: params.model, cost_usd: 0 });
    }
    expect(bed.bedrock.requests).toHaveLength(0);
    expect(bed.vertex.requests).toHaveLength(0);
  });

  it("passes a provider's own refusal on with its status, in OpenAI's shape", async () => {
    bed.vertex.behave({ status: 429 });
    const refused = await openai.embeddings.create({ model: 'text-embedding-005', input: 'x y' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).message).toContain('upstream alpha answered 429');
  });
});
