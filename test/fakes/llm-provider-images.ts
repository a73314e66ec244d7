// Fake image generation in the providers' own APIs (ADR 0915), checking what it receives as the real services do:
//   Vertex AI Imagen  POST …/publishers/google/models/imagen-…:predict {instances: [{prompt}], parameters:
//                     {sampleCount 1–4, aspectRatio 1:1|3:4|4:3|9:16|16:9}} → {predictions: [{mimeType,
//                     bytesBase64Encoded}]}, one per sample
//   Bedrock           POST /model/amazon.nova-canvas-v1:0/invoke (and Titan Image Generator v2) {taskType: TEXT_IMAGE,
//                     textToImageParams: {text}, imageGenerationConfig: {numberOfImages 1–5, width, height, quality
//                     standard|premium}} → {images: [base64, …], error: null}; SigV4 is checked by llm-bedrock.ts first
// Each image is a small PNG-looking byte string whose bytes say which sample it is, so a caller can tell them apart.

import { sendBedrockError, sendBehaviourError, sendGoogleError } from './llm-errors.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The fake's image number `i`: the PNG signature and a few bytes naming it. */
export function fakeImageBase64(i: number): string {
  return Buffer.concat([PNG_SIGNATURE, Buffer.from(`fake image ${i}`)]).toString('base64');
}

const ASPECT_RATIOS = ['1:1', '3:4', '4:3', '9:16', '16:9'];

export const isImagenModel = (model: string): boolean => /^imagen-[\d.]+-(fast-|ultra-)?generate-/.test(model);

const unknownKey = (object: Record<string, unknown>, known: readonly string[]) => Object.keys(object).find((key) => !known.includes(key));

function imagenProblem(body: Record<string, unknown>): string | undefined {
  const unknown = unknownKey(body, ['instances', 'parameters']);
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`;
  const instances = body.instances;
  if (!Array.isArray(instances) || instances.length !== 1) return 'Image generation takes exactly one instance.';
  const instance = jsonObject(instances[0]);
  if (instance === null || typeof instance.prompt !== 'string' || instance.prompt === '') return 'instances[0].prompt must be a non-empty string.';
  if (unknownKey(instance, ['prompt']) !== undefined) return `instances[0]: unknown field "${unknownKey(instance, ['prompt'])}".`;
  const parameters = jsonObject(body.parameters) ?? {};
  const extra = unknownKey(parameters, ['sampleCount', 'aspectRatio', 'negativePrompt', 'personGeneration', 'safetySetting', 'addWatermark', 'seed']);
  if (extra !== undefined) return `parameters: unknown field "${extra}".`;
  const count = parameters.sampleCount ?? 1;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 4) return 'parameters.sampleCount must be an integer from 1 to 4.';
  if (parameters.aspectRatio !== undefined && !ASPECT_RATIOS.includes(parameters.aspectRatio as string))
    return `parameters.aspectRatio must be one of ${ASPECT_RATIOS.join(', ')}.`;
  return undefined;
}

export function vertexImagen(x: FakeExchange, model: string): void {
  const body = jsonObject(x.json);
  if (body === null) return sendGoogleError(x.res, 400, 'Invalid JSON payload received.');
  const problem = imagenProblem(body);
  if (problem !== undefined) return sendGoogleError(x.res, 400, `${model}: ${problem}`);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'google');
  const count = (jsonObject(body.parameters)?.sampleCount as number | undefined) ?? 1;
  const predictions = Array.from({ length: count }, (_, i) => ({ mimeType: 'image/png', bytesBase64Encoded: fakeImageBase64(i) }));
  const bytes = Buffer.from(JSON.stringify({ predictions }));
  x.res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8', 'content-length': bytes.length });
  x.res.end(bytes);
}

const BEDROCK_IMAGE_MODELS = new Set(['amazon.nova-canvas-v1:0', 'amazon.titan-image-generator-v2:0']);

export const isBedrockImageModel = (model: string): boolean => BEDROCK_IMAGE_MODELS.has(model);

function bedrockImageProblem(body: Record<string, unknown>): string | undefined {
  if (body.taskType !== 'TEXT_IMAGE') return 'taskType: this fake generates TEXT_IMAGE only.';
  const unknown = unknownKey(body, ['taskType', 'textToImageParams', 'imageGenerationConfig']);
  if (unknown !== undefined) return `extraneous key [${unknown}] is not permitted`;
  const text = jsonObject(body.textToImageParams)?.text;
  if (typeof text !== 'string' || text === '') return 'textToImageParams.text must be a non-empty string.';
  const config = jsonObject(body.imageGenerationConfig) ?? {};
  const extra = unknownKey(config, ['numberOfImages', 'width', 'height', 'quality', 'cfgScale', 'seed']);
  if (extra !== undefined) return `extraneous key [${extra}] is not permitted`;
  const n = config.numberOfImages ?? 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 5) return 'numberOfImages must be an integer from 1 to 5.';
  for (const side of ['width', 'height'] as const) {
    const value = config[side] ?? 1024;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 320 || value > 4096 || value % 16 !== 0) return `${side} must be a multiple of 16 from 320 to 4096.`;
  }
  if (config.quality !== undefined && config.quality !== 'standard' && config.quality !== 'premium') return 'quality must be standard or premium.';
  return undefined;
}

export function bedrockImages(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendBedrockError(x.res, 400, 'Malformed input request, please reformat your input and try again.');
  const problem = bedrockImageProblem(body);
  if (problem !== undefined) return sendBedrockError(x.res, 400, `Malformed input request: ${problem}`, 'ValidationException');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'bedrock');
  const n = (jsonObject(body.imageGenerationConfig)?.numberOfImages as number | undefined) ?? 1;
  const bytes = Buffer.from(JSON.stringify({ images: Array.from({ length: n }, (_, i) => fakeImageBase64(i)), error: null }));
  x.res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length, 'x-amzn-requestid': crypto.randomUUID() });
  x.res.end(bytes);
}
