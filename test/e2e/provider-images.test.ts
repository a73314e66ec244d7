// OpenAI's image generation on the providers with their own image APIs (ADR 0915), as users meet it: the official
// `openai` SDK's images.generate, unmodified, against a real `tollgate proxy` whose alpha route reaches the fake
// Vertex AI (Imagen's :predict, Google bearer auth) and whose gamma-cloudb route the fake Bedrock (Nova Canvas and
// Titan Image Generator v2 through InvokeModel, SigV4 verified). The fakes check the translated body
// (test/fakes/llm-provider-images.ts); each call's span is read back and its images and cost checked against
// numbers worked out by hand below. The native paths are metered the same way.
//
// Built-in prices (per image): imagen-4.0-generate-001 0.04, imagen-4.0-fast-generate-001 0.02,
// imagen-4.0-ultra-generate-001 0.06, whatever the size; amazon.nova-canvas-v1:0 standard 0.04 / premium 0.06 up to
// 1024x1024 in pixels, 0.06 / 0.08 up to 2048x2048; amazon.titan-image-generator-v2:0 standard 0.008 / premium 0.01
// up to 512x512, 0.01 / 0.012 up to 1024x1024.

import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { fakeImageBase64 } from '../fakes/llm-provider-images.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let v1: OpenAI;

const IMAGEN_PATH = `/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models`;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`budgets:
  policies:
    - { name: frugal, users: ["frugal"], limitUsd: 0.1, period: month, enforcement: block }
`),
    env: bed.env,
  });
  v1 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'alice' } });
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

function expectSpan(span: SpanJson, expected: { route: string; provider: string; model: string; images: number; costUsd: number }): void {
  expect(span).toMatchObject({
    name: `image_generation ${expected.model}`,
    route: expected.route,
    provider: expected.provider,
    model: expected.model,
    user_id: 'alice',
    status: 'ok',
    status_code: 200,
    images: expected.images,
    input_tokens: 0,
    output_tokens: 0,
    priced: true,
  });
  expect(span.cost_usd).toBeCloseTo(expected.costUsd, 12);
}

describe("/v1/images/generations on Vertex AI's Imagen", () => {
  it("translates to :predict at the size's aspect ratio, answers OpenAI's data, bills 2 images × 0.04 = 0.08 USD", async () => {
    const { data, response } = await v1.images
      .generate({ model: 'imagen-4.0-generate-001', prompt: 'a lighthouse at dusk', n: 2, size: '1408x768', response_format: 'b64_json' })
      .withResponse();
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`${IMAGEN_PATH}/imagen-4.0-generate-001:predict`);
    expect(seen.headers.authorization).toMatch(/^Bearer /);
    expect(seen.json).toEqual({ instances: [{ prompt: 'a lighthouse at dusk' }], parameters: { sampleCount: 2, aspectRatio: '16:9' } });
    expect(data.data!.map((image) => image.b64_json)).toEqual([fakeImageBase64(0), fakeImageBase64(1)]);
    expect(typeof data.created).toBe('number');
    expectSpan(await spanOf(response), { route: 'alpha', provider: 'google', model: 'imagen-4.0-generate-001', images: 2, costUsd: 0.08 });
  });

  it('refuses a size Imagen does not render, a url answer and n over 4 with 400s naming the field; nothing is sent', async () => {
    await expect(v1.images.generate({ model: 'imagen-4.0-fast-generate-001', prompt: 'p', size: '1792x1024' })).rejects.toMatchObject({
      status: 400,
      param: 'size',
      message: expect.stringContaining('size "1792x1024" is not one model imagen-4.0-fast-generate-001 renders: 1024x1024, 896x1280'),
    });
    await expect(v1.images.generate({ model: 'imagen-4.0-fast-generate-001', prompt: 'p', response_format: 'url' })).rejects.toMatchObject({
      status: 400,
      param: 'response_format',
    });
    await expect(v1.images.generate({ model: 'imagen-4.0-fast-generate-001', prompt: 'p', n: 5 })).rejects.toMatchObject({ status: 400, param: 'n' });
    expect(bed.vertex.requests).toHaveLength(0);
  });

  it("meters Imagen's native :predict on alpha: 3 predictions × 0.02 = 0.06 USD", async () => {
    const res = await fetch(`${proxy.url}/proxy/alpha${IMAGEN_PATH}/imagen-4.0-fast-generate-001:predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'alice' },
      body: JSON.stringify({ instances: [{ prompt: 'three owls' }], parameters: { sampleCount: 3, aspectRatio: '3:4' } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { predictions: unknown[] }).predictions).toHaveLength(3);
    expectSpan(await spanOf(res), { route: 'alpha', provider: 'google', model: 'imagen-4.0-fast-generate-001', images: 3, costUsd: 0.06 });
  });
});

describe("/v1/images/generations on Bedrock's image models", () => {
  it('translates to a signed TEXT_IMAGE InvokeModel on Nova Canvas: 3 premium images within 1024x1024 pixels × 0.06 = 0.18 USD', async () => {
    const { data, response } = await v1.images
      .generate({ model: 'amazon.nova-canvas-v1:0', prompt: 'a red kite over dunes', n: 3, size: '1280x720', quality: 'hd' })
      .withResponse();
    // The fake verified the SigV4 signature (a bad one is a 403 there).
    const seen = bed.bedrock.requests.at(-1)!;
    expect(seen.path).toBe('/model/amazon.nova-canvas-v1%3A0/invoke');
    expect(seen.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    expect(seen.json).toEqual({
      taskType: 'TEXT_IMAGE',
      textToImageParams: { text: 'a red kite over dunes' },
      imageGenerationConfig: { numberOfImages: 3, width: 1280, height: 720, quality: 'premium' },
    });
    expect(data.data!.map((image) => image.b64_json)).toEqual([fakeImageBase64(0), fakeImageBase64(1), fakeImageBase64(2)]);
    expectSpan(await spanOf(response), { route: 'gamma-cloudb', provider: 'anthropic', model: 'amazon.nova-canvas-v1:0', images: 3, costUsd: 0.18 });
  });

  it('bills Titan Image Generator v2 by its size tier: one standard 512x512 image is 0.008 USD', async () => {
    const { response } = await v1.images.generate({ model: 'amazon.titan-image-generator-v2:0', prompt: 'a teapot', size: '512x512' }).withResponse();
    expect((bed.bedrock.requests.at(-1)!.json as { imageGenerationConfig: unknown }).imageGenerationConfig).toEqual({
      numberOfImages: 1,
      width: 512,
      height: 512,
      quality: 'standard',
    });
    expectSpan(await spanOf(response), { route: 'gamma-cloudb', provider: 'anthropic', model: 'amazon.titan-image-generator-v2:0', images: 1, costUsd: 0.008 });
  });

  it('refuses n over 5 and a size Nova Canvas does not take with 400s naming the field; nothing is sent', async () => {
    await expect(v1.images.generate({ model: 'amazon.nova-canvas-v1:0', prompt: 'p', n: 6 })).rejects.toMatchObject({
      status: 400,
      param: 'n',
      message: expect.stringContaining('model amazon.nova-canvas-v1:0 makes 1 to 5 images a request: n must be an integer from 1 to 5 (got 6)'),
    });
    await expect(v1.images.generate({ model: 'amazon.nova-canvas-v1:0', prompt: 'p', size: '1000x1000' })).rejects.toMatchObject({ status: 400, param: 'size' });
    expect(bed.bedrock.requests).toHaveLength(0);
  });

  it("meters Nova Canvas's native InvokeModel at its request's size and quality: 2 premium 2048x2048 images × 0.08 = 0.16 USD", async () => {
    const res = await fetch(`${proxy.url}/proxy/gamma-cloudb/model/amazon.nova-canvas-v1:0/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'alice' },
      body: JSON.stringify({
        taskType: 'TEXT_IMAGE',
        textToImageParams: { text: 'two lighthouses' },
        imageGenerationConfig: { numberOfImages: 2, width: 2048, height: 2048, quality: 'premium' },
      }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { images: unknown[] }).images).toHaveLength(2);
    expectSpan(await spanOf(res), { route: 'gamma-cloudb', provider: 'anthropic', model: 'amazon.nova-canvas-v1:0', images: 2, costUsd: 0.16 });
  });
});

describe('budgets hold a provider image call at its price before it goes out', () => {
  it('refuses 4 Imagen Ultra images (4 × 0.06 = 0.24 USD) against 0.1, sending nothing, and admits one Nova Canvas image (0.04)', async () => {
    const frugal = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'frugal' } });
    await expect(frugal.images.generate({ model: 'imagen-4.0-ultra-generate-001', prompt: 'a castle', n: 4 })).rejects.toMatchObject({
      status: 429,
      code: 'budget_exceeded',
    });
    expect(bed.vertex.requests).toHaveLength(0);
    const { response } = await frugal.images.generate({ model: 'amazon.nova-canvas-v1:0', prompt: 'a castle' }).withResponse();
    expect((await spanOf(response)).cost_usd).toBe(0.04);
  });

  it("holds a native Imagen :predict at the most it may make, 4 images: Ultra's 4 × 0.06 = 0.24 USD is refused against 0.1, sending nothing", async () => {
    const res = await fetch(`${proxy.url}/proxy/alpha${IMAGEN_PATH}/imagen-4.0-ultra-generate-001:predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'frugal' },
      body: JSON.stringify({ instances: [{ prompt: 'one owl' }], parameters: { sampleCount: 1 } }),
    });
    expect(res.status).toBe(429);
    // Google's error shape, as the Gen AI SDK reads it.
    expect(await res.json()).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED' } });
    expect(bed.vertex.requests).toHaveLength(0);
  });
});
