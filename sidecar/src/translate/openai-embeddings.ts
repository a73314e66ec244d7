// OpenAI's embeddings API, the side every /v1/embeddings caller speaks: the request read into what a provider
// that does not speak it needs (its texts, dimensions, encoding), and the provider's vectors written back as
// OpenAI's answer. The providers' own shapes are in openai-vertex-embeddings.ts and openai-bedrock-embeddings.ts
// (ADR 0903). Pure: tested without I/O.

import { isRecord } from '../../../contracts/json-record.ts';
import { GatewayError, invalidParameter, unsupportedParameter } from './openai-error.ts';

/** An embeddings request as a translated route reads it. */
export interface EmbeddingsRequest {
  /** The texts, in the caller's order (a single string is one text). */
  texts: string[];
  /** The vectors' length the caller asked for, if any. */
  dimensions: number | undefined;
  encoding: EmbeddingEncoding;
}

export type EmbeddingEncoding = 'float' | 'base64';

/** A provider's answer, read: one vector per text in the request's order, and the prompt tokens it reports. */
export interface Embeddings {
  vectors: number[][];
  promptTokens: number;
}

/** Reads a provider's embeddings answer (its JSON body and response headers). */
export type EmbeddingsReader = (document: Record<string, unknown>, headers: Record<string, string | string[] | undefined>) => Embeddings;

/** A translated route's embeddings call: how its answer reads, and how the caller wants the vectors written. */
export interface EmbeddingsTranslation {
  read: EmbeddingsReader;
  encoding: EmbeddingEncoding;
}

/** A model the route has no embeddings for: 400 naming `model`, with the models it has. */
export function notAnEmbeddingModel(model: string, route: string, models: string): GatewayError {
  return new GatewayError(400, `model ${model} is not served on /v1/embeddings by route ${route}: it embeds with ${models}`, {
    param: 'model',
    code: 'model_not_available',
  });
}

/** The parameters of OpenAI's embeddings request; `user` names the span's user and goes no further. */
const PARAMETERS = new Set(['model', 'input', 'dimensions', 'encoding_format', 'user']);

/**
 * The request as a route that translates it reads it. Refuses, naming the parameter, what no provider but
 * OpenAI takes (token ids as input) and what OpenAI itself would refuse (an unknown parameter, an empty input).
 */
export function readEmbeddingsRequest(request: Record<string, unknown>, model: string): EmbeddingsRequest {
  for (const [name, value] of Object.entries(request)) {
    if (value === undefined || value === null || PARAMETERS.has(name)) continue;
    throw new GatewayError(400, `Unrecognized request argument supplied: ${name}`, { param: name, code: 'unknown_parameter' });
  }
  if (request.user !== undefined && request.user !== null && typeof request.user !== 'string') throw invalidParameter('user', 'user must be a string');
  return { texts: inputTexts(request.input, model), dimensions: dimensionsOf(request.dimensions), encoding: encodingOf(request.encoding_format) };
}

function inputTexts(input: unknown, model: string): string[] {
  if (input === undefined || input === null) throw new GatewayError(400, "Missing required parameter: 'input'.", { param: 'input', code: 'missing_required_parameter' });
  const texts = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(texts) || texts.length === 0) throw invalidParameter('input', 'input must be a string or a non-empty array of strings');
  texts.forEach((text: unknown, i) => {
    if (typeof text === 'number' || (Array.isArray(text) && text.every((t) => typeof t === 'number'))) {
      throw unsupportedParameter('input', `input as token ids is not supported for model ${model}: only OpenAI's models read OpenAI's token ids; send the text`);
    }
    if (typeof text !== 'string') throw invalidParameter(`input[${i}]`, `input[${i}] must be a string`);
    if (text === '') throw invalidParameter(`input[${i}]`, `input[${i}] must not be empty`);
  });
  return texts as string[];
}

function dimensionsOf(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw invalidParameter('dimensions', 'dimensions must be a positive integer');
  return value;
}

function encodingOf(value: unknown): EmbeddingEncoding {
  if (value === undefined || value === null || value === 'float') return 'float';
  if (value === 'base64') return 'base64';
  throw invalidParameter('encoding_format', "encoding_format must be 'float' or 'base64'");
}

/** A bound of the provider's on the number of texts in one request: beyond it, 400 naming `input` (ADR 0903). */
export function checkTextCount(texts: readonly string[], most: number, model: string): void {
  if (texts.length <= most) return;
  const what = most === 1 ? 'one text per request' : `at most ${most} texts per request`;
  throw unsupportedParameter('input', `model ${model} takes ${what}; this input has ${texts.length}: send them in separate requests`);
}

/** Dimensions a model cannot give: 400 naming `dimensions`. `lengths` are those it can; the first is its default. */
export function checkDimensions(dimensions: number | undefined, lengths: readonly number[], model: string): void {
  if (dimensions === undefined || lengths.includes(dimensions)) return;
  const which = lengths.length === 1 ? `only ${lengths[0]}` : `one of ${lengths.join(', ')}`;
  throw unsupportedParameter('dimensions', `dimensions ${dimensions} is not supported for model ${model}: it gives ${which}`);
}

/** A vector from a provider's answer: an array of finite numbers, else the answer is not one to pass on. */
export function vectorOf(value: unknown, where: string): number[] {
  if (!Array.isArray(value) || !value.every((n) => typeof n === 'number' && Number.isFinite(n))) throw new Error(`${where} is not an array of numbers`);
  return value as number[];
}

/** OpenAI's base64 encoding of a vector: its float32 values, little-endian, as bytes. */
export function float32Base64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

/** The answer an OpenAI SDK reads: `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`. */
export function openAiEmbeddingList(embeddings: Embeddings, model: string, encoding: EmbeddingEncoding): Record<string, unknown> {
  return {
    object: 'list',
    data: embeddings.vectors.map((vector, index) => ({ object: 'embedding', index, embedding: encoding === 'base64' ? float32Base64(vector) : vector })),
    model,
    usage: { prompt_tokens: embeddings.promptTokens, total_tokens: embeddings.promptTokens },
  };
}

/** The JSON object a reader is given holds what it needs, or the answer cannot be translated. */
export function recordOf(value: unknown, where: string): Record<string, unknown> {
  if (!isRecord(value)) throw new Error(`${where} is not an object`);
  return value;
}
