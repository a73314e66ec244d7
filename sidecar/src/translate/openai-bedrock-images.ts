// OpenAI's image generation ↔ Bedrock's Amazon image models through InvokeModel (ADR 0915): Nova Canvas and
// Titan Image Generator v2 take `{"taskType": "TEXT_IMAGE", "textToImageParams": {"text"}, "imageGenerationConfig":
// {"numberOfImages", "width", "height", "quality": "standard"|"premium"}}` and answer `{"images": [base64, …]}`.
// Bedrock bills them per image by quality and by a size tier, not by the exact size: each image is priced at the
// tier its pixels fall in, which is the size its units name.

import { isRecord } from '../../../contracts/json-record.ts';
import { ImageRequestError } from './image-request-error.ts';
import type { BilledUnits } from '../usage/usage.ts';
import { imagesReservation, readProviderImageRequest, type ProviderImagesReader } from './provider-images.ts';
import type { V1ImagesFacts } from './provider-images.ts';

interface BedrockImageModel {
  /** Whether it renders a width and height (each model's rules). */
  takes(width: number, height: number): boolean;
  /** The sizes it takes, as the refusal names them. */
  described: string;
  /** The price tiers, smallest first: an image is billed at the first whose pixels it does not exceed. */
  tiers: readonly string[];
}

const pixels = (size: string): number => {
  const [w, h] = size.split('x').map(Number);
  return w! * h!;
};

/** Nova Canvas: each side 320–4096 and a multiple of 16, at most 4:1 either way, at most 4,194,304 pixels (2048²). */
const NOVA_CANVAS: BedrockImageModel = {
  takes: (w, h) => [w, h].every((side) => side >= 320 && side <= 4096 && side % 16 === 0) && Math.max(w / h, h / w) <= 4 && w * h <= 4_194_304,
  described: 'width and height each 320–4096 pixels and a multiple of 16, at most 4:1 either way, at most 2048x2048 in pixels',
  tiers: ['1024x1024', '2048x2048'],
};

/** Titan Image Generator v2's sizes (its model parameters page). */
const TITAN_SIZES = [
  '1024x1024',
  '768x768',
  '512x512',
  '768x1152',
  '384x576',
  '1152x768',
  '576x384',
  '768x1280',
  '384x640',
  '1280x768',
  '640x384',
  '896x1152',
  '448x576',
  '1152x896',
  '576x448',
  '768x1408',
  '384x704',
  '1408x768',
  '704x384',
  '640x1408',
  '320x704',
  '1408x640',
  '704x320',
  '1152x640',
  '1173x640',
];
const TITAN_IMAGE: BedrockImageModel = {
  takes: (w, h) => TITAN_SIZES.includes(`${w}x${h}`),
  described: TITAN_SIZES.join(', '),
  tiers: ['512x512', '1024x1024'],
};

const MODELS: Readonly<Record<string, BedrockImageModel>> = {
  'amazon.nova-canvas-v1:0': NOVA_CANVAS,
  'amazon.titan-image-generator-v2:0': TITAN_IMAGE,
};

/** Both take 1 to 5 images a request. */
const MOST_IMAGES = 5;

/** The Bedrock image model an id names (with or without a geography prefix), or undefined. */
function modelOf(model: string): BedrockImageModel | undefined {
  const id = model.replace(/^[a-z]{2,6}\.(?=amazon\.)/, '');
  // Own keys only: the id is the caller's (a native path's), and "constructor" must not find Object.prototype's.
  return Object.hasOwn(MODELS, id) ? MODELS[id] : undefined;
}

/** The price tier of an image: the first tier it fits in; the largest for anything bigger. */
function tierOf(model: BedrockImageModel, width: number, height: number): string {
  return model.tiers.find((tier) => width * height <= pixels(tier)) ?? model.tiers.at(-1)!;
}

/** OpenAI's quality words, as Bedrock's: standard, or premium (OpenAI's hd). */
function qualityOf(quality: string | undefined, model: string): 'standard' | 'premium' {
  if (quality === undefined || quality === 'auto' || quality === 'standard') return 'standard';
  if (quality === 'hd' || quality === 'premium') return 'premium';
  throw new ImageRequestError(`quality ${JSON.stringify(quality)} is not one model ${model} takes: standard, hd (premium) or auto`, 'quality');
}

/** The InvokeModel body for an OpenAI generation request, and the units it bills. Throws ImageRequestError. */
export function bedrockImageRequest(request: Record<string, unknown>, model: string, route: string): V1ImagesFacts {
  const facts = modelOf(model);
  if (facts === undefined) throw new ImageRequestError(`model ${model} does not generate images on route ${route}`, 'model');
  const read = readProviderImageRequest(request, model, route, MOST_IMAGES);
  const size = read.size === undefined || read.size === 'auto' ? '1024x1024' : read.size;
  const match = /^(\d{1,5})x(\d{1,5})$/.exec(size);
  const [width, height] = match === null ? [0, 0] : [Number(match[1]), Number(match[2])];
  if (!facts.takes(width, height)) throw new ImageRequestError(`size ${JSON.stringify(size)} is not one model ${model} takes: ${facts.described}`, 'size');
  const quality = qualityOf(read.quality, model);
  const units: BilledUnits = { images: read.n, imageSize: tierOf(facts, width, height), imageQuality: quality };
  return {
    body: { taskType: 'TEXT_IMAGE', textToImageParams: { text: read.prompt }, imageGenerationConfig: { numberOfImages: read.n, width, height, quality } },
    units,
    reservation: imagesReservation(units),
    read: readBedrockImages,
  };
}

/**
 * A native InvokeModel body's billed units, for the image models (any task type bills its images): n images
 * at the tier of the configured size and quality, the model's defaults where absent (1024x1024, standard).
 * Undefined for another model, or a body that is not JSON (Bedrock refuses it, unbilled).
 */
export function bedrockImageUnits(model: string, body: Buffer | null): BilledUnits | undefined {
  const facts = modelOf(model);
  if (facts === undefined) return undefined;
  let document: unknown;
  try {
    document = JSON.parse(body?.toString('utf8') ?? '');
  } catch {
    return undefined;
  }
  const config = isRecord(document) && isRecord(document.imageGenerationConfig) ? document.imageGenerationConfig : {};
  const whole = (value: unknown, otherwise: number): number => (typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : otherwise);
  return {
    images: whole(config.numberOfImages, 1),
    imageSize: tierOf(facts, whole(config.width, 1024), whole(config.height, 1024)),
    imageQuality: config.quality === 'premium' ? 'premium' : 'standard',
  };
}

/** The images of a Bedrock image answer, in order. */
export const readBedrockImages: ProviderImagesReader = (document) => {
  const images = document.images ?? [];
  if (!Array.isArray(images) || !images.every((image) => typeof image === 'string')) throw new Error('the answer has no images list of base64 strings');
  return images;
};
