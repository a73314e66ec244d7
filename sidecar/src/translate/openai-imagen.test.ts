import { describe, expect, it } from 'vitest';
import { ImageRequestError } from './image-request-error.ts';
import { imagenRequest, isImagenModel, readImagenImages } from './openai-imagen.ts';
import { openAiImageAnswer } from './provider-images.ts';

const model = 'imagen-4.0-generate-001';

function refusal(request: Record<string, unknown>): { param: string | null; message: string } {
  try {
    imagenRequest(request, model, 'alpha');
  } catch (error) {
    if (error instanceof ImageRequestError) return { param: error.param, message: error.message };
    throw error;
  }
  throw new Error('the request was taken');
}

describe("OpenAI's image generation as Imagen's :predict", () => {
  it('asks for n samples at the aspect ratio that renders the size asked for, billed as n images of that size', () => {
    const facts = imagenRequest({ model, prompt: 'a lighthouse at dusk', n: 3, size: '1408x768', response_format: 'b64_json' }, model, 'alpha');
    expect(facts.body).toEqual({ instances: [{ prompt: 'a lighthouse at dusk' }], parameters: { sampleCount: 3, aspectRatio: '16:9' } });
    expect(facts.units).toEqual({ images: 3, imageSize: '1408x768' });
    expect(facts.reservation).toMatchObject({ inputTokens: 0, outputTokens: 0, units: { images: 3, imageSize: '1408x768' } });
  });

  it('takes no size (or auto) as 1:1, 1024x1024, and one image when n is absent', () => {
    expect(imagenRequest({ prompt: 'p' }, model, 'alpha').body).toEqual({ instances: [{ prompt: 'p' }], parameters: { sampleCount: 1, aspectRatio: '1:1' } });
    expect(imagenRequest({ prompt: 'p', size: 'auto', quality: 'auto' }, model, 'alpha').units).toEqual({ images: 1, imageSize: '1024x1024' });
  });

  it('refuses a size Imagen does not render exactly, naming it and the sizes it renders', () => {
    const { param, message } = refusal({ prompt: 'p', size: '1792x1024' });
    expect(param).toBe('size');
    expect(message).toBe(`size "1792x1024" is not one model ${model} renders: 1024x1024, 896x1280, 1280x896, 768x1408, 1408x768 (or auto)`);
    expect(refusal({ prompt: 'p', size: '1536x1024' }).param).toBe('size');
  });

  it("refuses a size named after an object's own properties: it would go out with no ratio (Imagen's default) and be billed at no price", () => {
    for (const size of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(refusal({ prompt: 'p', size, n: 4 })).toEqual({
        param: 'size',
        message: `size ${JSON.stringify(size)} is not one model ${model} renders: 1024x1024, 896x1280, 1280x896, 768x1408, 1408x768 (or auto)`,
      });
    }
  });

  it('refuses what Imagen cannot give: a url, more than 4 images, a quality, a field it would drop, no prompt', () => {
    expect(refusal({ prompt: 'p', response_format: 'url' })).toMatchObject({ param: 'response_format', message: expect.stringContaining('use b64_json') });
    expect(refusal({ prompt: 'p', n: 5 })).toEqual({ param: 'n', message: `model ${model} makes 1 to 4 images a request: n must be an integer from 1 to 4 (got 5)` });
    expect(refusal({ prompt: 'p', n: 0 }).param).toBe('n');
    expect(refusal({ prompt: 'p', quality: 'hd' }).param).toBe('quality');
    expect(refusal({ prompt: 'p', style: 'vivid' })).toMatchObject({
      param: 'style',
      message: expect.stringContaining(`style is not supported for model ${model} on route alpha`),
    });
    expect(refusal({ n: 1 }).param).toBe('prompt');
  });

  it("writes Imagen's predictions back as OpenAI's data, in order", () => {
    const document = {
      predictions: [
        { mimeType: 'image/png', bytesBase64Encoded: 'QUFB' },
        { bytesBase64Encoded: 'QkJC', mimeType: 'image/png' },
      ],
    };
    expect(openAiImageAnswer(readImagenImages(document), 1700000000)).toEqual({ created: 1700000000, data: [{ b64_json: 'QUFB' }, { b64_json: 'QkJC' }] });
    expect(readImagenImages({})).toEqual([]);
    expect(() => readImagenImages({ predictions: [{ raiFilteredReason: 'blocked' }] })).toThrow('predictions[0] has no bytesBase64Encoded');
  });

  it("knows Imagen's generation models, not its editing model or Gemini", () => {
    expect(['imagen-4.0-generate-001', 'imagen-4.0-fast-generate-001', 'imagen-4.0-ultra-generate-001', 'imagen-3.0-generate-002'].every(isImagenModel)).toBe(true);
    expect(isImagenModel('imagen-3.0-capability-001')).toBe(false);
    expect(isImagenModel('gemini-2.5-flash-image')).toBe(false);
  });
});
