// OpenAI's image generation request as a provider with its own image API takes it (ADR 0915: Vertex AI's Imagen,
// Bedrock's Nova Canvas and Titan Image Generator): the fields every one of them reads alike, checked before
// anything is sent, and their base64 images written back as OpenAI's `{created, data: [{b64_json}]}`.

import { ImageRequestError } from './image-request-error.ts';
import type { BilledUnits, TokenUsage } from '../usage/usage.ts';

/** OpenAI's generation fields these providers can honour; any other is refused, not silently dropped. */
const TAKEN = new Set(['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'user']);

/** A generation request read for a provider that answers with base64 image bytes. */
export interface ProviderImageRequest {
  prompt: string;
  n: number;
  /** The request's size, `WIDTHxHEIGHT`; undefined when it left the size to the provider. */
  size: string | undefined;
  /** The request's quality as written; undefined when absent. */
  quality: string | undefined;
}

/**
 * Reads what every translated provider needs: a prompt, n within the model's range, b64_json answers (these
 * providers return bytes, never a link), and no field the translation would drop.
 */
export function readProviderImageRequest(request: Record<string, unknown>, model: string, route: string, mostImages: number): ProviderImageRequest {
  for (const field of Object.keys(request)) {
    if (!TAKEN.has(field) && request[field] !== undefined && request[field] !== null) {
      throw new ImageRequestError(`${field} is not supported for model ${model} on route ${route} (it takes ${[...TAKEN].join(', ')})`, field);
    }
  }
  const { prompt, n = 1, size, quality, response_format: format } = request;
  if (typeof prompt !== 'string' || prompt === '') throw new ImageRequestError("Missing required parameter: 'prompt' (a non-empty string)", 'prompt');
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > mostImages) {
    throw new ImageRequestError(`model ${model} makes 1 to ${mostImages} images a request: n must be an integer from 1 to ${mostImages} (got ${JSON.stringify(n)})`, 'n');
  }
  if (format !== undefined && format !== null && format !== 'b64_json') {
    throw new ImageRequestError(
      `response_format ${JSON.stringify(format)} is not supported for model ${model}: its provider returns the image bytes only; use b64_json`,
      'response_format',
    );
  }
  for (const [param, value] of [
    ['size', size],
    ['quality', quality],
  ] as const) {
    if (value !== undefined && value !== null && (typeof value !== 'string' || value === '')) throw new ImageRequestError(`${param} must be a non-empty string`, param);
  }
  return { prompt, n, size: (size ?? undefined) as string | undefined, quality: (quality ?? undefined) as string | undefined };
}

/** What a per-image call's reservation holds: its n images at the size and quality they are priced at, no tokens. */
export function imagesReservation(units: BilledUnits): TokenUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0, units };
}

/** How a provider's answer holds its images: the base64 strings in order. Throws when the answer is not that shape. */
export type ProviderImagesReader = (document: Record<string, unknown>) => string[];

/** OpenAI's image answer for the images a provider returned. */
export function openAiImageAnswer(images: readonly string[], created: number): Record<string, unknown> {
  return { created, data: images.map((b64_json) => ({ b64_json })) };
}

/** An image generation in a provider's own image API (ADR 0915): its body, the units it bills, its answer's reader. */
export interface V1ImagesFacts {
  body: Record<string, unknown>;
  units: BilledUnits;
  reservation: TokenUsage;
  read: ProviderImagesReader;
}
