// OpenAI's image API as its users meet it (ADR 0910): the official `openai` SDK's images.generate and
// images.edit, unmodified, against a real `tollgate proxy` whose beta route (and a configured OpenAI-compatible
// route, `pixels`) reaches the fake OpenAI (test/fakes/llm-images.ts, which reads an edit's upload with undici's
// own multipart parser and checks model, size, quality, n and the image part), on /v1 and on the native route.
// Each call's span is read back and its images and cost checked against numbers worked out by hand below.
//
// Built-in prices: dall-e-3 standard 1024x1024 0.04, 1024x1792 / 1792x1024 0.08, hd 1024x1024 0.08, hd
// 1024x1792 / 1792x1024 0.12; dall-e-2 256x256 0.016, 512x512 0.018, 1024x1024 0.02 (per image); gpt-image-1
// text in 5, image in 10, out 40; gpt-image-1-mini 2 / 2.5 / 8 (per million tokens). The fake's GPT image usage:
// text tokens = the prompt's words, 200 image tokens per input image, output per image by quality and size
// (low 1024x1024 272, low 1536x1024 400, medium 1024x1536 1584, high 1024x1536 6240).

import OpenAI, { APIError, toFile } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let v1: OpenAI;
let native: OpenAI;

/** A small PNG-looking file: the proxy never decodes it, the fake only checks it is a file part. */
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(2048, 7)]);
const png = () => toFile(PNG, 'input.png', { type: 'image/png' });

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`routes:
  - name: pixels
    format: openai-chat
    baseUrl: "${bed.openai.url}"
    credential: { kind: api-key, env: PIXELS_API_KEY }
pricing:
  models:
    - provider: pixels
      model: dall-e-2
      input_per_million: 0
      output_per_million: 0
      image_prices:
        - { size: 1024x1024, usd: 0.05 }
budgets:
  policies:
    - { name: frugal, users: ["frugal"], limitUsd: 0.1, period: month, enforcement: block }
`),
    env: { ...bed.env, PIXELS_API_KEY: OPENAI_KEY },
  });
  const headers = { 'x-tollgate-user': 'alice' };
  v1 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });
  native = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

async function spanOf(response: Response, from: ProxyProcess = proxy): Promise<SpanJson> {
  const spanId = response.headers.get('x-proxy-span-id');
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(from.url, { spanId });
}

function expectSpan(
  span: SpanJson,
  expected: { operation: string; route: string; model: string; images: number; inputTokens: number; outputTokens: number; costUsd: number },
): void {
  expect(span).toMatchObject({
    name: `${expected.operation} ${expected.model}`,
    route: expected.route,
    model: expected.model,
    user_id: 'alice',
    status: 'ok',
    status_code: 200,
    images: expected.images,
    input_tokens: expected.inputTokens,
    output_tokens: expected.outputTokens,
    audio_seconds: 0,
    characters: 0,
    priced: true,
  });
  expect(span.cost_usd).toBeCloseTo(expected.costUsd, 12);
}

/** The last request the fake OpenAI received. */
const last = () => bed.openai.requests.at(-1)!;

describe('/v1/images with the official openai SDK', () => {
  it('bills a dall-e-3 image by its size and quality: one hd 1024x1792 image is 0.12 USD', async () => {
    const { data, response } = await v1.images.generate({ model: 'dall-e-3', prompt: 'a lighthouse at dusk', size: '1024x1792', quality: 'hd' }).withResponse();
    expect(data.data).toHaveLength(1);
    expect(data.data![0]!.revised_prompt).toBe('A picture of a lighthouse at dusk');
    expect(last().path).toBe('/v1/images/generations');
    expect(last().json).toEqual({ model: 'dall-e-3', prompt: 'a lighthouse at dusk', size: '1024x1792', quality: 'hd' });
    expect(last().headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expectSpan(await spanOf(response), { operation: 'image_generation', route: 'beta', model: 'dall-e-3', images: 1, inputTokens: 0, outputTokens: 0, costUsd: 0.12 });
  });

  it('counts base64 dall-e-2 images in the answer: three 512x512 images are 3 × 0.018 = 0.054 USD', async () => {
    const { data, response } = await v1.images.generate({ model: 'dall-e-2', prompt: 'three cats', n: 3, size: '512x512', response_format: 'b64_json' }).withResponse();
    expect(data.data!.map((image) => Buffer.from(image.b64_json!, 'base64').length)).toEqual([65536, 65536, 65536]);
    expectSpan(await spanOf(response), { operation: 'image_generation', route: 'beta', model: 'dall-e-2', images: 3, inputTokens: 0, outputTokens: 0, costUsd: 0.054 });
  });

  it('bills a gpt-image-1 generation by its usage: 5 text tokens × 5 + 2 × 272 output tokens × 40 per million = 0.021785 USD', async () => {
    const { data, response } = await v1.images.generate({ model: 'gpt-image-1', prompt: 'a red fox in snow', n: 2, quality: 'low', size: '1024x1024' }).withResponse();
    expect(data.usage).toMatchObject({ input_tokens: 5, output_tokens: 544 });
    // 5 words: 5 × 5 + 544 × 40 = 25 + 21760 = 21785 µ$
    expectSpan(await spanOf(response), { operation: 'image_generation', route: 'beta', model: 'gpt-image-1', images: 2, inputTokens: 5, outputTokens: 544, costUsd: 0.021785 });
  });

  it('edits with gpt-image-1: the upload is forwarded as sent, its image input tokens billed at the image rate', async () => {
    const { data, response } = await v1.images.edit({ model: 'gpt-image-1', image: await png(), prompt: 'add a hat', quality: 'medium', size: '1024x1536' }).withResponse();
    expect(data.size).toBe('1024x1536');
    expect(last().path).toBe('/v1/images/edits');
    // The proxy sent the caller's multipart bytes: the file is there, byte for byte.
    expect(last().body.includes(PNG)).toBe(true);
    // 3 text tokens × 5 + 200 image tokens × 10 + 1584 output tokens × 40 = 15 + 2000 + 63360 = 65375 µ$
    expectSpan(await spanOf(response), { operation: 'image_edit', route: 'beta', model: 'gpt-image-1', images: 1, inputTokens: 203, outputTokens: 1584, costUsd: 0.065375 });
  });

  it('edits with dall-e-2: two 256x256 images are 2 × 0.016 = 0.032 USD', async () => {
    const { response } = await v1.images.edit({ model: 'dall-e-2', image: await png(), prompt: 'paint it blue', n: 2, size: '256x256' }).withResponse();
    expectSpan(await spanOf(response), { operation: 'image_edit', route: 'beta', model: 'dall-e-2', images: 2, inputTokens: 0, outputTokens: 0, costUsd: 0.032 });
  });

  it("serves a configured OpenAI-compatible route's model at its configured price: 2 × 0.05 = 0.1 USD", async () => {
    const { response } = await v1.images.generate({ model: 'pixels/dall-e-2', prompt: 'two dogs', n: 2 }).withResponse();
    expect(last().json).toEqual({ model: 'dall-e-2', prompt: 'two dogs', n: 2 });
    expectSpan(await spanOf(response), { operation: 'image_generation', route: 'pixels', model: 'dall-e-2', images: 2, inputTokens: 0, outputTokens: 0, costUsd: 0.1 });
  });
});

describe('the native route /proxy/beta/v1/images', () => {
  it('meters a generation: one standard 1792x1024 dall-e-3 image is 0.08 USD', async () => {
    const { response } = await native.images.generate({ model: 'dall-e-3', prompt: 'a wide valley', size: '1792x1024' }).withResponse();
    expectSpan(await spanOf(response), { operation: 'image_generation', route: 'beta', model: 'dall-e-3', images: 1, inputTokens: 0, outputTokens: 0, costUsd: 0.08 });
  });

  it('meters an edit: gpt-image-1-mini, 3 × 2 + 200 × 2.5 + 400 × 8 = 3706 µ$', async () => {
    const { response } = await native.images.edit({ model: 'gpt-image-1-mini', image: await png(), prompt: 'make it blue', quality: 'low', size: '1536x1024' }).withResponse();
    expectSpan(await spanOf(response), { operation: 'image_edit', route: 'beta', model: 'gpt-image-1-mini', images: 1, inputTokens: 203, outputTokens: 400, costUsd: 0.003706 });
  });
});

describe('bad image requests are refused before anything is sent', () => {
  async function refused(call: Promise<unknown>, status: number, param: string | null, message: RegExp): Promise<void> {
    const error = await call.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(status);
    expect((error as APIError).message).toMatch(message);
    if (param !== null) expect((error as APIError).param).toBe(param);
    expect(bed.openai.requests).toHaveLength(0);
  }

  it('on /v1: n out of range, a size the model does not take, an edit by a model that does not edit', async () => {
    await refused(v1.images.generate({ model: 'dall-e-3', prompt: 'two suns', n: 2 }), 400, 'n', /dall-e-3 makes one image a request: n must be 1 \(got 2\)/);
    await refused(v1.images.generate({ model: 'dall-e-2', prompt: 'a moon', n: 11 }), 400, 'n', /n must be an integer from 1 to 10 \(got 11\)/);
    await refused(
      v1.images.generate({ model: 'dall-e-3', prompt: 'a moon', size: '512x512' }),
      400,
      'size',
      /size "512x512" is not one model dall-e-3 takes: 1024x1024, 1792x1024, 1024x1792/,
    );
    await refused(v1.images.edit({ model: 'dall-e-3', image: await png(), prompt: 'a hat' }), 400, 'model', /model dall-e-3 does not edit images/);
  });

  it('on /v1: an edit without its image part', async () => {
    const form = new FormData();
    form.set('model', 'gpt-image-1');
    form.set('prompt', 'add a hat');
    const res = await fetch(`${proxy.url}/v1/images/edits`, { method: 'POST', body: form });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'image', message: expect.stringMatching(/Missing required parameter: 'image'/) } });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it("on the native route, in the route's OpenAI error shape", async () => {
    await refused(native.images.generate({ model: 'dall-e-3', prompt: 'two suns', n: 2 }), 400, null, /n: model dall-e-3 makes one image a request/);
    await refused(native.images.generate({ model: 'gpt-image-1', prompt: 'a moon', quality: 'hd' }), 400, null, /quality: quality "hd" is not one model gpt-image-1 takes/);
  });
});

describe('budgets hold an image call at its price before it goes out', () => {
  const frugal = () => new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'frugal' } });

  it('refuses what the budget cannot afford (0.12 and 0.2496 USD against 0.1) and admits what it can (0.04)', async () => {
    const client = frugal();
    await expect(client.images.generate({ model: 'dall-e-3', prompt: 'a castle', size: '1024x1792', quality: 'hd' })).rejects.toMatchObject({
      status: 429,
      code: 'budget_exceeded',
    });
    // gpt-image-1, quality and size auto: held at high quality's largest image, 6240 tokens × 40 per million = 0.2496 USD
    await expect(client.images.generate({ model: 'gpt-image-1', prompt: 'a castle' })).rejects.toMatchObject({ status: 429, code: 'budget_exceeded' });
    expect(bed.openai.requests).toHaveLength(0);
    const { response } = await client.images.generate({ model: 'dall-e-3', prompt: 'a castle' }).withResponse();
    expect((await spanOf(response)).cost_usd).toBe(0.04);
  });
});

describe('image prices set through the config API', () => {
  // Changes the proxy's prices: its own proxy, so the other tests keep the built-in ones.
  let own: ProxyProcess;
  beforeAll(async () => {
    own = await startProxyProcess({ configYaml: bed.configYaml(''), env: bed.env });
  });
  afterAll(async () => {
    await own?.stop();
  });

  const post = (body: unknown) => fetch(`${own.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const dalle2 = (imagePrices: unknown) => ({
    pricing: { models: [{ provider: 'openai', model: 'dall-e-2', input_per_million: 0, output_per_million: 0, image_prices: imagePrices }] },
  });

  it('refuses a bad image price naming the field and changes nothing; a good one prices the next call', async () => {
    const client = new OpenAI({ baseURL: `${own.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'alice' } });
    const refused = await post(
      dalle2([
        { size: '512x512', usd: 0.5 },
        { size: 'huge', usd: 1 },
      ]),
    );
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: { code: 'invalid_config', message: 'pricing.models[0].image_prices[1].size must be WIDTHxHEIGHT in pixels (e.g. 1024x1024) or auto' },
    });
    // Nothing applied: the built-in 0.018 still prices a 512x512 image.
    const before = await client.images.generate({ model: 'dall-e-2', prompt: 'a fox', size: '512x512' }).withResponse();
    expect((await spanOf(before.response, own)).cost_usd).toBe(0.018);
    expect((await post(dalle2([{ size: '512x512', usd: 0.5 }]))).status).toBe(200);
    // 2 × 0.5
    const after = await client.images.generate({ model: 'dall-e-2', prompt: 'a fox', size: '512x512', n: 2 }).withResponse();
    expect((await spanOf(after.response, own)).cost_usd).toBe(1);
  });
});
