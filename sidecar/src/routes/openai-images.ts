// OpenAI's image API as the proxy meters it (ADR 0910), on /v1 and on the native OpenAI-format routes alike: a
// generation is JSON, an edit a multipart upload forwarded as the bytes it came in. Only what the bill depends
// on is read: the model, n, size and quality (and that an edit has its image). What a request must be to be
// metered is decided here once; each door words the refusal in its own error shape.

import { ProxyError } from '../errors.ts';
import { formBoundary, formField, formParts, mayBeTrue, MultipartProblem, RepeatedFormField, type FormPart } from '../formats/multipart-form.ts';
import type { BilledUnits, TokenUsage } from '../usage/usage.ts';
import { forwardedAsIs, parseRouteJson } from './native-request.ts';
import { openAiRequestUser } from './request-user.ts';
import type { NativeCall, UpstreamRequestPlan } from './route-module.ts';
import { ImageRequestError } from '../translate/image-request-error.ts';

export type ImageOperation = 'image_generation' | 'image_edit';

/** Where an upstream that speaks OpenAI's image API serves each operation. */
export const OPENAI_IMAGE_PATHS: Readonly<Record<ImageOperation, string>> = {
  image_generation: '/v1/images/generations',
  image_edit: '/v1/images/edits',
};

const IMAGE_PATH = /\/images\/(generations|edits)$/;

export function imageOperationOf(method: string, rest: string): ImageOperation | undefined {
  if (method !== 'POST') return undefined;
  const match = IMAGE_PATH.exec(rest);
  if (match === null) return undefined;
  return match[1] === 'generations' ? 'image_generation' : 'image_edit';
}

/** The native paths whose body is an upload (a route's `formUpload`). */
export function isImageUpload(method: string, rest: string): boolean {
  return imageOperationOf(method, rest) === 'image_edit';
}

/**
 * The largest edit taken: OpenAI takes input images under 50 MB each; one image and the form's other fields
 * fit. The body is read within server.bodyLimitBytes first (32 MiB by default), so this bound matters where an
 * operator raised that limit (docs/openai-gateway.md).
 */
export const IMAGE_EDIT_LIMIT_BYTES = 50 * 1024 * 1024;

/** The model OpenAI's image API uses when the request names none. */
export const DEFAULT_IMAGE_MODEL = 'dall-e-2';

/** What OpenAI's image models take, as its API reference states it. */
interface ImageModel {
  sizes: readonly string[];
  qualities: readonly string[];
  maxImages: number;
  defaultSize: string;
  defaultQuality: string;
  edits: boolean;
}

const DALL_E_2: ImageModel = {
  sizes: ['256x256', '512x512', '1024x1024'],
  qualities: ['standard'],
  maxImages: 10,
  defaultSize: '1024x1024',
  defaultQuality: 'standard',
  edits: true,
};
const DALL_E_3: ImageModel = {
  sizes: ['1024x1024', '1792x1024', '1024x1792'],
  qualities: ['standard', 'hd'],
  maxImages: 1,
  defaultSize: '1024x1024',
  defaultQuality: 'standard',
  edits: false,
};
const GPT_IMAGE: ImageModel = {
  sizes: ['1024x1024', '1536x1024', '1024x1536', 'auto'],
  qualities: ['low', 'medium', 'high', 'auto'],
  maxImages: 10,
  defaultSize: 'auto',
  defaultQuality: 'auto',
  edits: true,
};

/** Any other model (a configured route's): n within OpenAI's range, size and quality as written. */
const MAX_IMAGES = 10;

// Newer GPT image models take other sizes and qualities: they are forwarded as written, and billed by tokens.
const MODELS: Readonly<Record<string, ImageModel>> = { 'dall-e-2': DALL_E_2, 'dall-e-3': DALL_E_3, 'gpt-image-1': GPT_IMAGE, 'gpt-image-1-mini': GPT_IMAGE };

const isGptImage = (model: string) => model.toLowerCase().startsWith('gpt-image-');

/**
 * Output tokens of one GPT image by quality and size (OpenAI's image generation guide): what a reservation
 * holds per image asked for. `auto` holds the most the model may choose: high quality, the largest size.
 */
const GPT_IMAGE_OUTPUT_TOKENS: Readonly<Record<string, Readonly<Record<string, number>>>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};
const MOST_OUTPUT_TOKENS_PER_IMAGE = 6240;

/** Input tokens held for each input image of an edit (a 1024×1024 image is 765 at high detail; held at about twice that). */
const RESERVED_TOKENS_PER_INPUT_IMAGE = 1600;

/** What an image request is, for planning, metering and its budget reservation. */
export interface ImageRequest {
  model: string;
  /** Where the model's form field lies in an edit's body (the /v1 gateway replaces a `<route>/<model>` id there). */
  modelPart?: FormPart;
  /** What the bill depends on that only the request says: size and quality (the answer says how many images). */
  units: BilledUnits;
  /** The most the call may use, what its reservation holds: n images, input from the prompt and images, output by quality and size. */
  reservation: TokenUsage;
  /** Why the answer cannot be metered (a streamed generation), when it cannot. */
  unmeteredBecause?: string;
}

interface ImageFields {
  model: string;
  n: unknown;
  size: unknown;
  quality: unknown;
  prompt: unknown;
  stream: unknown;
  inputImages: number;
}

/** Reads a generation's JSON body. */
export function readImageGeneration(request: Record<string, unknown>): ImageRequest {
  const { model, n, size, quality, prompt, stream } = request;
  if (model !== undefined && (typeof model !== 'string' || model === '')) throw new ImageRequestError('model must be a non-empty string', 'model');
  return checked({ model: model ?? DEFAULT_IMAGE_MODEL, n, size, quality, prompt, stream, inputImages: 0 }, 'image_generation');
}

/**
 * Reads an edit's multipart form: its fields, and that it carries an image to edit. `model`: the id the model
 * has on the route (the /v1 gateway's), which the request is checked against instead of the form's.
 */
export function readImageEdit(body: Buffer | null, contentType: string | undefined, model?: string): ImageRequest {
  const boundary = formBoundary(contentType);
  if (boundary === null) {
    const got = contentType === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(contentType)}`;
    throw new ImageRequestError(`an image edit must be sent as multipart/form-data with a boundary (got ${got})`, null);
  }
  if (body === null || body.length === 0) throw new ImageRequestError('the request has no body: send the image to edit as the form field `image`', 'image');
  if (body.length > IMAGE_EDIT_LIMIT_BYTES) {
    throw new ImageRequestError(`the upload is ${body.length} bytes; the most taken is ${IMAGE_EDIT_LIMIT_BYTES} (50 MiB)`, 'image');
  }
  let parts: FormPart[];
  try {
    parts = formParts(body, boundary);
  } catch (error) {
    if (error instanceof MultipartProblem) throw new ImageRequestError(`the multipart body could not be read: ${error.message}`, null);
    throw error;
  }
  // gpt-image-* take several images as `image[]`; dall-e-2 one as `image`.
  const images = parts.filter((part) => (part.name === 'image' || part.name === 'image[]') && part.filename !== null);
  if (images.length === 0) throw new ImageRequestError("Missing required parameter: 'image' (a form part named image, with a filename)", 'image');
  const field = (name: string): string | undefined => {
    try {
      return formField(body, parts, name);
    } catch (error) {
      throw error instanceof RepeatedFormField ? new ImageRequestError(error.message, error.field) : error;
    }
  };
  const modelPart = parts.find((part) => part.name === 'model' && part.filename === null);
  const named = field('model');
  if (named === '') throw new ImageRequestError('model must be a non-empty string', 'model');
  const n = field('n');
  const fields = {
    model: model ?? named ?? DEFAULT_IMAGE_MODEL,
    n: n === undefined || !/^\d{1,6}$/.test(n) ? n : Number(n),
    size: field('size'),
    quality: field('quality'),
    prompt: field('prompt'),
    stream: mayBeTrue(field('stream')),
    inputImages: images.length,
  };
  const request = checked(fields, 'image_edit');
  if (modelPart !== undefined) request.modelPart = modelPart;
  return request;
}

function checked(fields: ImageFields, operation: ImageOperation): ImageRequest {
  const { model } = fields;
  const facts = MODELS[model.toLowerCase()];
  if (operation === 'image_edit' && facts?.edits === false) throw new ImageRequestError(`model ${model} does not edit images; use dall-e-2 or a gpt-image model`, 'model');
  if (typeof fields.prompt !== 'string' || fields.prompt === '') throw new ImageRequestError("Missing required parameter: 'prompt' (a non-empty string)", 'prompt');
  const most = facts?.maxImages ?? MAX_IMAGES;
  const n = fields.n ?? 1;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > most) {
    throw new ImageRequestError(
      most === 1 ? `model ${model} makes one image a request: n must be 1 (got ${JSON.stringify(n)})` : `n must be an integer from 1 to ${most} (got ${JSON.stringify(n)})`,
      'n',
    );
  }
  const size = option(fields.size, facts?.sizes, 'size', model) ?? facts?.defaultSize;
  const quality = option(fields.quality, facts?.qualities, 'quality', model) ?? facts?.defaultQuality;
  // n images until the answer says how many it made: what a reservation holds, and what a 2xx answer that
  // could not be read is billed.
  const units: BilledUnits = { images: n };
  if (size !== undefined) units.imageSize = size;
  if (quality !== undefined) units.imageQuality = quality;
  const request: ImageRequest = { model, units, reservation: reservation(fields.prompt, fields.inputImages, n, units, isGptImage(model)) };
  if (fields.stream === true) request.unmeteredBecause = 'a streamed image generation (stream: true) is not metered; ask for the whole answer';
  return request;
}

/** A size or quality the model takes, or undefined when the request leaves it to the default. */
function option(value: unknown, allowed: readonly string[] | undefined, param: 'size' | 'quality', model: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') throw new ImageRequestError(`${param} must be a non-empty string`, param);
  if (allowed !== undefined && !allowed.includes(value)) {
    throw new ImageRequestError(`${param} ${JSON.stringify(value)} is not one model ${model} takes: ${allowed.join(', ')}`, param);
  }
  return value;
}

/**
 * What the reservation holds: n images of the request's size and quality (a per-image model's price), and for a
 * GPT image model its tokens, the prompt's and the input images' in, each image's by quality and size out.
 */
function reservation(prompt: string, inputImages: number, n: number, units: BilledUnits, gpt: boolean): TokenUsage {
  const imageTokens = inputImages * RESERVED_TOKENS_PER_INPUT_IMAGE;
  const inputTokens = Math.ceil(prompt.length / 4) + imageTokens;
  const perImage = GPT_IMAGE_OUTPUT_TOKENS[units.imageQuality ?? 'high']?.[units.imageSize ?? ''] ?? MOST_OUTPUT_TOKENS_PER_IMAGE;
  const outputTokens = gpt ? n * perImage : 0;
  const held: BilledUnits = imageTokens > 0 ? { ...units, imageInputTokens: imageTokens } : { ...units };
  return { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: inputTokens + outputTokens, units: held };
}

/**
 * A native image call on an OpenAI-format route: forwarded as it came, its model and operation read, its
 * request-side units carried to the meter, and refused (ProxyError invalid_request) when the image API would
 * not take it. A streamed generation is marked unmetered, so only a route that allows unmetered calls forwards it.
 */
export function planImagesNative(call: NativeCall, operation: ImageOperation, route: string): UpstreamRequestPlan {
  const path = call.rest + call.query;
  try {
    if (operation === 'image_generation') {
      if (call.body === null || call.body.length === 0) throw new ImageRequestError('the request has no body: send the image request as JSON', null);
      const json = parseRouteJson(call.body, route);
      return withImageFacts(forwardedAsIs(path, call.body, '', operation, openAiRequestUser(json)), readImageGeneration(json));
    }
    return withImageFacts(forwardedAsIs(path, call.body, '', operation), readImageEdit(call.body, call.contentType));
  } catch (error) {
    if (error instanceof ImageRequestError) throw new ProxyError('invalid_request', `${error.param === null ? '' : `${error.param}: `}${error.message}`);
    throw error;
  }
}

function withImageFacts(plan: UpstreamRequestPlan, request: ImageRequest): UpstreamRequestPlan {
  plan.model = request.model;
  plan.units = request.units;
  plan.reservation = request.reservation;
  if (request.unmeteredBecause !== undefined) plan.unmeteredBecause = request.unmeteredBecause;
  return plan;
}
