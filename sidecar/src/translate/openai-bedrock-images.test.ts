import { describe, expect, it } from 'vitest';
import { ImageRequestError } from './image-request-error.ts';
import { bedrockImageRequest, bedrockImageUnits, readBedrockImages } from './openai-bedrock-images.ts';

const nova = 'amazon.nova-canvas-v1:0';
const titan = 'amazon.titan-image-generator-v2:0';

function refusal(request: Record<string, unknown>, model = nova): { param: string | null; message: string } {
  try {
    bedrockImageRequest(request, model, 'gamma-cloudb');
  } catch (error) {
    if (error instanceof ImageRequestError) return { param: error.param, message: error.message };
    throw error;
  }
  throw new Error('the request was taken');
}

describe("OpenAI's image generation as Bedrock's InvokeModel", () => {
  it('asks Nova Canvas for a TEXT_IMAGE of the size and quality asked for (hd is premium), billed at the size tier', () => {
    const facts = bedrockImageRequest({ model: nova, prompt: 'a red kite', n: 2, size: '1280x720', quality: 'hd' }, nova, 'gamma-cloudb');
    expect(facts.body).toEqual({
      taskType: 'TEXT_IMAGE',
      textToImageParams: { text: 'a red kite' },
      imageGenerationConfig: { numberOfImages: 2, width: 1280, height: 720, quality: 'premium' },
    });
    // 1280 × 720 = 921,600 pixels: within 1024 × 1024 = 1,048,576, the smaller tier.
    expect(facts.units).toEqual({ images: 2, imageSize: '1024x1024', imageQuality: 'premium' });
    // 1536 × 1536 = 2,359,296 pixels: over 1,048,576, so the 2048x2048 tier.
    expect(bedrockImageRequest({ prompt: 'p', size: '1536x1536' }, nova, 'gamma-cloudb').units).toEqual({ images: 1, imageSize: '2048x2048', imageQuality: 'standard' });
  });

  it('takes no size as 1024x1024 standard, one image', () => {
    expect(bedrockImageRequest({ prompt: 'p' }, titan, 'gamma-cloudb').body).toEqual({
      taskType: 'TEXT_IMAGE',
      textToImageParams: { text: 'p' },
      imageGenerationConfig: { numberOfImages: 1, width: 1024, height: 1024, quality: 'standard' },
    });
    expect(bedrockImageRequest({ prompt: 'p', size: '512x512' }, titan, 'gamma-cloudb').units).toEqual({ images: 1, imageSize: '512x512', imageQuality: 'standard' });
  });

  it("refuses a size the model does not take, naming it and the model's rule", () => {
    expect(refusal({ prompt: 'p', size: '1000x1000' })).toMatchObject({
      param: 'size',
      message: expect.stringContaining('size "1000x1000" is not one model amazon.nova-canvas-v1:0 takes: width and height each 320–4096'),
    });
    // 4096 × 1024 is 4:1 but 4,194,304 pixels is the most: 4096 × 1040 is over it.
    expect(refusal({ prompt: 'p', size: '4096x1040' }).param).toBe('size');
    expect(refusal({ prompt: 'p', size: '1792x1024' }, titan)).toMatchObject({ param: 'size', message: expect.stringContaining('1024x1024, 768x768, 512x512') });
  });

  it('refuses more than 5 images, a url, a quality Bedrock has no word for, and a model that is not an image model', () => {
    expect(refusal({ prompt: 'p', n: 6 })).toEqual({ param: 'n', message: `model ${nova} makes 1 to 5 images a request: n must be an integer from 1 to 5 (got 6)` });
    expect(refusal({ prompt: 'p', response_format: 'url' }).param).toBe('response_format');
    expect(refusal({ prompt: 'p', quality: 'low' }).param).toBe('quality');
    expect(refusal({ prompt: 'p' }, 'amazon.nova-pro-v1:0')).toEqual({ param: 'model', message: 'model amazon.nova-pro-v1:0 does not generate images on route gamma-cloudb' });
  });

  it("reads a native InvokeModel body's units: its images, its size tier and quality, the defaults where absent", () => {
    const body = (config: Record<string, unknown>) => Buffer.from(JSON.stringify({ taskType: 'TEXT_IMAGE', textToImageParams: { text: 'p' }, imageGenerationConfig: config }));
    expect(bedrockImageUnits(nova, body({ numberOfImages: 3, width: 2048, height: 2048, quality: 'premium' }))).toEqual({
      images: 3,
      imageSize: '2048x2048',
      imageQuality: 'premium',
    });
    expect(bedrockImageUnits(`us.${nova}`, body({}))).toEqual({ images: 1, imageSize: '1024x1024', imageQuality: 'standard' });
    expect(bedrockImageUnits('anthropic.claude-sonnet-4-5-20250929-v1:0', body({}))).toBeUndefined();
  });

  it("takes a model id named after an Object member (a caller's /model/constructor/invoke) as no image model, without throwing", () => {
    const body = Buffer.from(JSON.stringify({ imageGenerationConfig: { numberOfImages: 2 } }));
    for (const id of ['constructor', '__proto__', 'toString']) {
      expect(bedrockImageUnits(id, body)).toBeUndefined();
      expect(() => bedrockImageRequest({ prompt: 'p' }, id, 'gamma-cloudb')).toThrow(`model ${id} does not generate images on route gamma-cloudb`);
    }
  });

  it("writes Bedrock's images back in order", () => {
    expect(readBedrockImages({ images: ['QUFB', 'QkJC'], error: null })).toEqual(['QUFB', 'QkJC']);
    expect(() => readBedrockImages({ images: [1] })).toThrow('base64 strings');
  });
});
