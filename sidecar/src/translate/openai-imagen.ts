// OpenAI's image generation ↔ Vertex AI's Imagen (`:predict` on a Google publisher model, ADR 0915):
// `{"instances": [{"prompt"}], "parameters": {"sampleCount", "aspectRatio"}}` → `{"predictions":
// [{"bytesBase64Encoded", "mimeType"}]}`. Imagen takes aspect ratios, not sizes: a size is taken only where it is
// exactly the size Imagen renders for a ratio, since an image of another size than asked would be a surprise.

import { ImageRequestError } from './image-request-error.ts';
import type { BilledUnits } from '../usage/usage.ts';
import { imagesReservation, readProviderImageRequest, type ProviderImagesReader } from './provider-images.ts';
import type { V1ImagesFacts } from './provider-images.ts';

/** The sizes Imagen renders (its 1K outputs, Vertex AI's model pages), by the aspect ratio that makes each. */
const IMAGEN_SIZES: Readonly<Record<string, string>> = {
  '1024x1024': '1:1',
  '896x1280': '3:4',
  '1280x896': '4:3',
  '768x1408': '9:16',
  '1408x768': '16:9',
};

/** Imagen makes at most 4 images a request (sampleCount 1–4). */
const IMAGEN_MOST_IMAGES = 4;

/**
 * What a native :predict's reservation holds: its body passes through unread, so the most it may make, 4 images
 * at the model's one price (`auto`); the answer's count is what is charged.
 */
export const IMAGEN_NATIVE_RESERVATION = imagesReservation({ images: IMAGEN_MOST_IMAGES, imageSize: 'auto' });

/** Vertex AI's Imagen generation models: imagen-3.0-generate-002, imagen-4.0-(fast-|ultra-)generate-001, …. */
export const isImagenModel = (model: string): boolean => /^imagen-[\d.]+-(fast-|ultra-)?generate-/.test(model);

/** The :predict body for an OpenAI generation request, and the units it bills. Throws ImageRequestError. */
export function imagenRequest(request: Record<string, unknown>, model: string, route: string): V1ImagesFacts {
  const read = readProviderImageRequest(request, model, route, IMAGEN_MOST_IMAGES);
  // OpenAI's `auto` and an absent size are Imagen's default, 1:1.
  const size = read.size === undefined || read.size === 'auto' ? '1024x1024' : read.size;
  // Own keys only: a size such as "constructor" must not find Object.prototype's members (a ratio of nothing, no price).
  const aspectRatio = Object.hasOwn(IMAGEN_SIZES, size) ? IMAGEN_SIZES[size] : undefined;
  if (aspectRatio === undefined) {
    throw new ImageRequestError(`size ${JSON.stringify(size)} is not one model ${model} renders: ${Object.keys(IMAGEN_SIZES).join(', ')} (or auto)`, 'size');
  }
  // Imagen has no quality setting: only OpenAI's defaults mean nothing to change.
  if (read.quality !== undefined && read.quality !== 'auto' && read.quality !== 'standard') {
    throw new ImageRequestError(`quality ${JSON.stringify(read.quality)} is not supported for model ${model}: Imagen has no quality setting (leave it out, or auto)`, 'quality');
  }
  const units: BilledUnits = { images: read.n, imageSize: size };
  return {
    body: { instances: [{ prompt: read.prompt }], parameters: { sampleCount: read.n, aspectRatio } },
    units,
    reservation: imagesReservation(units),
    read: readImagenImages,
  };
}

/** The images of an Imagen answer, in order. */
export const readImagenImages: ProviderImagesReader = (document) => {
  const predictions = document.predictions ?? [];
  if (!Array.isArray(predictions)) throw new Error('the answer has no predictions list');
  return predictions.map((prediction, i) => {
    const bytes = (prediction as { bytesBase64Encoded?: unknown } | null)?.bytesBase64Encoded;
    if (typeof bytes !== 'string') throw new Error(`predictions[${i}] has no bytesBase64Encoded`);
    return bytes;
  });
};
