import { describe, expect, it } from 'vitest';
import { IMAGE_EDIT_LIMIT_BYTES, readImageEdit, readImageGeneration } from './openai-images.ts';
import { ImageRequestError } from '../translate/image-request-error.ts';

const BOUNDARY = 'tollgate-test-boundary';
const CONTENT_TYPE = `multipart/form-data; boundary=${BOUNDARY}`;

/** A multipart body: text fields, then file parts of the given names. */
function form(fields: Record<string, string>, files: Record<string, Buffer> = {}): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  for (const [name, bytes] of Object.entries(files)) {
    parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"; filename="in.png"\r\nContent-Type: image/png\r\n\r\n`), bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(parts);
}

function problem(read: () => unknown): { param: string | null; message: string } {
  try {
    read();
  } catch (error) {
    if (error instanceof ImageRequestError) return { param: error.param, message: error.message };
    throw error;
  }
  throw new Error('the request was taken');
}

describe('an image generation request', () => {
  it("takes the model's defaults for what it leaves out: dall-e-3 1024x1024 standard, dall-e-2 when no model is named", () => {
    expect(readImageGeneration({ model: 'dall-e-3', prompt: 'a cat' }).units).toEqual({ images: 1, imageSize: '1024x1024', imageQuality: 'standard' });
    expect(readImageGeneration({ prompt: 'a cat', n: 4 })).toMatchObject({ model: 'dall-e-2', units: { images: 4, imageSize: '1024x1024', imageQuality: 'standard' } });
  });

  it('holds a GPT image request at its output tokens by quality and size, the most for auto', () => {
    // 'a red fox' is 9 characters: ceil(9 / 4) = 3 input tokens; low 1536x1024 is 400 output tokens an image.
    expect(readImageGeneration({ model: 'gpt-image-1', prompt: 'a red fox', n: 3, quality: 'low', size: '1536x1024' }).reservation).toMatchObject({
      inputTokens: 3,
      outputTokens: 1200,
    });
    expect(readImageGeneration({ model: 'gpt-image-1', prompt: 'a red fox' }).reservation).toMatchObject({ inputTokens: 3, outputTokens: 6240 });
    // a per-image model's tokens cost nothing: its n images are what is held
    expect(readImageGeneration({ model: 'dall-e-2', prompt: 'a red fox', n: 2 }).reservation).toMatchObject({ outputTokens: 0, units: { images: 2 } });
  });

  it('refuses, naming the field: n out of range, an unknown size or quality, no prompt', () => {
    expect(problem(() => readImageGeneration({ model: 'dall-e-3', prompt: 'x', n: 2 }))).toEqual({
      param: 'n',
      message: 'model dall-e-3 makes one image a request: n must be 1 (got 2)',
    });
    expect(problem(() => readImageGeneration({ model: 'gpt-image-1', prompt: 'x', n: 0 }))).toEqual({ param: 'n', message: 'n must be an integer from 1 to 10 (got 0)' });
    expect(problem(() => readImageGeneration({ model: 'dall-e-2', prompt: 'x', size: '1792x1024' })).param).toBe('size');
    expect(problem(() => readImageGeneration({ model: 'dall-e-3', prompt: 'x', quality: 'high' })).param).toBe('quality');
    expect(problem(() => readImageGeneration({ model: 'dall-e-3' })).param).toBe('prompt');
  });

  it('forwards a newer GPT image model as written, and marks a streamed generation unmetered', () => {
    expect(readImageGeneration({ model: 'gpt-image-2', prompt: 'x', size: '1280x720', quality: 'max' }).units).toEqual({ images: 1, imageSize: '1280x720', imageQuality: 'max' });
    expect(readImageGeneration({ model: 'gpt-image-1', prompt: 'x', stream: true }).unmeteredBecause).toMatch(/streamed image generation/);
  });
});

describe('an image edit upload', () => {
  const image = Buffer.from('\x89PNG fake image bytes');

  it('reads its fields and counts its input images', () => {
    const edit = readImageEdit(form({ model: 'gpt-image-1', prompt: 'add a hat', n: '2', quality: 'medium', size: '1024x1536' }, { 'image[]': image }), CONTENT_TYPE);
    // 9 characters → 3 tokens, one input image held at 1600; medium 1024x1536 is 1584 output tokens an image
    expect(edit).toMatchObject({
      model: 'gpt-image-1',
      units: { images: 2, imageSize: '1024x1536', imageQuality: 'medium' },
      reservation: { inputTokens: 1603, outputTokens: 3168 },
    });
  });

  it('refuses an edit without its image part, a model that does not edit, and a body over 50 MiB', () => {
    expect(problem(() => readImageEdit(form({ model: 'gpt-image-1', prompt: 'x' }), CONTENT_TYPE)).param).toBe('image');
    expect(problem(() => readImageEdit(form({ model: 'gpt-image-1', prompt: 'x', n: 'two' }, { image }), CONTENT_TYPE))).toEqual({
      param: 'n',
      message: 'n must be an integer from 1 to 10 (got "two")',
    });
    expect(problem(() => readImageEdit(form({ model: 'dall-e-3', prompt: 'x' }, { image }), CONTENT_TYPE))).toEqual({
      param: 'model',
      message: 'model dall-e-3 does not edit images; use dall-e-2 or a gpt-image model',
    });
    const huge = form({ model: 'dall-e-2', prompt: 'x' }, { image: Buffer.alloc(IMAGE_EDIT_LIMIT_BYTES) });
    expect(problem(() => readImageEdit(huge, CONTENT_TYPE))).toEqual({ param: 'image', message: `the upload is ${huge.length} bytes; the most taken is 52428800 (50 MiB)` });
    expect(problem(() => readImageEdit(form({ prompt: 'x' }, { image }), 'application/json')).message).toMatch(/must be sent as multipart\/form-data/);
  });

  it('takes any stream value but false as a stream, which it cannot meter: a server may read 1 or True as true', () => {
    for (const stream of ['true', 'True', '1', 'on']) {
      expect(readImageEdit(form({ model: 'gpt-image-1', prompt: 'add a hat', stream }, { image }), CONTENT_TYPE).unmeteredBecause).toMatch(/streamed image generation/);
    }
    expect(readImageEdit(form({ model: 'gpt-image-1', prompt: 'add a hat', stream: 'false' }, { image }), CONTENT_TYPE).unmeteredBecause).toBeUndefined();
  });

  it('refuses a field the bill depends on sent twice, naming it: the provider may read the other value', () => {
    // Metered as dall-e-2 at 256x256 (0.016 USD) while a server that keeps the last value makes a gpt-image-1 image.
    const once = form({ model: 'dall-e-2', prompt: 'add a hat', size: '256x256' }, { image });
    const close = Buffer.from(`--${BOUNDARY}--\r\n`);
    for (const [name, value] of [
      ['model', 'gpt-image-1'],
      ['size', '1024x1024'],
    ]) {
      const twice = Buffer.concat([
        once.subarray(0, once.length - close.length),
        Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`),
        close,
      ]);
      expect(problem(() => readImageEdit(twice, CONTENT_TYPE))).toEqual({ param: name, message: `the form has more than one ${name} field: send it once` });
    }
  });
});
