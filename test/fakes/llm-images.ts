// Fake OpenAI image API, checking what it receives as OpenAI does:
//   POST /v1/images/generations  JSON {model? (dall-e-2 when absent), prompt, n?, size?, quality?,
//        response_format? (url | b64_json; GPT image models answer b64_json only), user?, background?,
//        output_format?, moderation?, style? (dall-e-3)}
//   POST /v1/images/edits        multipart/form-data: image (a file; `image[]` for several, GPT image models),
//        prompt, model?, n?, size?, quality?, mask?, response_format?, user?
// Models, sizes, qualities and n are checked as OpenAI's API reference states them: dall-e-2 (256x256, 512x512,
// 1024x1024; n 1–10; edits), dall-e-3 (1024x1024, 1792x1024, 1024x1792; standard | hd; n 1; no edits),
// gpt-image-1 and gpt-image-1-mini (1024x1024, 1536x1024, 1024x1536, auto; low | medium | high | auto; n 1–10).
// Answers: {created, data: [{url | b64_json, revised_prompt (dall-e-3)}]}; GPT image models add background,
// output_format, quality, size (auto answered as 1024x1024 at high) and usage, so tests can work costs out by
// hand: text input tokens = the prompt's words, image input tokens = 200 per input image, output tokens per
// image as OpenAI's guide gives them (low 272 / 408 / 400, medium 1056 / 1584 / 1568, high 4160 / 6240 / 6208 for
// 1024x1024 / 1024x1536 / 1536x1024). A b64_json image is `FAKE_IMAGE_BYTES` bytes (a PNG signature, then zeros).

import { sendBehaviourError, sendOpenAiError } from './llm-errors.ts';
import { writeJson } from './llm-reply-writer.ts';
import { jsonObject, requestHeader } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

interface Model {
  sizes: string[];
  qualities: string[];
  maxN: number;
  edits: boolean;
  gpt: boolean;
}

const MODELS: Record<string, Model> = {
  'dall-e-2': { sizes: ['256x256', '512x512', '1024x1024'], qualities: ['standard'], maxN: 10, edits: true, gpt: false },
  'dall-e-3': { sizes: ['1024x1024', '1792x1024', '1024x1792'], qualities: ['standard', 'hd'], maxN: 1, edits: false, gpt: false },
  'gpt-image-1': { sizes: ['1024x1024', '1536x1024', '1024x1536', 'auto'], qualities: ['low', 'medium', 'high', 'auto'], maxN: 10, edits: true, gpt: true },
  'gpt-image-1-mini': { sizes: ['1024x1024', '1536x1024', '1024x1536', 'auto'], qualities: ['low', 'medium', 'high', 'auto'], maxN: 10, edits: true, gpt: true },
};

const OUTPUT_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};

export const FAKE_IMAGE_BYTES = 64 * 1024;
export const FAKE_IMAGE_TOKENS_PER_INPUT_IMAGE = 200;

/** The request's fields, from JSON or a form, as strings and numbers. */
interface ImageFields {
  model: unknown;
  prompt: unknown;
  n: unknown;
  size: unknown;
  quality: unknown;
  responseFormat: unknown;
  inputImages: number;
}

/** A request's value as OpenAI's messages quote it. */
const shown = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

const words = (text: string) => text.split(/\s+/).filter((word) => word !== '').length;

export function openAiImageGeneration(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendOpenAiError(x.res, 400, 'We could not parse the JSON body of your request.');
  answer(x, { model: body.model, prompt: body.prompt, n: body.n, size: body.size, quality: body.quality, responseFormat: body.response_format, inputImages: 0 }, false);
}

export async function openAiImageEdit(x: FakeExchange): Promise<void> {
  const contentType = requestHeader(x.req, 'content-type') ?? '';
  if (!contentType.startsWith('multipart/form-data')) return sendOpenAiError(x.res, 400, 'Invalid Content-Type header: the request must be multipart/form-data.');
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(x.body), { headers: { 'content-type': contentType } }).formData();
  } catch {
    return sendOpenAiError(x.res, 400, 'The multipart body could not be parsed.');
  }
  const images = [...form.getAll('image'), ...form.getAll('image[]')].filter((value) => typeof value !== 'string');
  if (images.length === 0) return sendOpenAiError(x.res, 400, "Missing required parameter: 'image'.", { param: 'image', code: null });
  const text = (name: string) => {
    const value = form.get(name);
    return typeof value === 'string' ? value : undefined;
  };
  const n = text('n');
  const fields = {
    model: text('model'),
    prompt: text('prompt'),
    n: n === undefined ? undefined : Number(n),
    size: text('size'),
    quality: text('quality'),
    responseFormat: text('response_format'),
  };
  answer(x, { ...fields, inputImages: images.length }, true);
}

function answer(x: FakeExchange, fields: ImageFields, edit: boolean): void {
  const reject = (message: string, param: string | null = null) => sendOpenAiError(x.res, 400, message, { param, code: null });
  const modelId = fields.model ?? 'dall-e-2';
  const model = typeof modelId === 'string' ? MODELS[modelId] : undefined;
  if (model === undefined) return reject(`Invalid model ${shown(modelId)}. The model must be one of ${Object.keys(MODELS).join(', ')}.`, 'model');
  if (edit && !model.edits) return reject(`Invalid model ${shown(modelId)}: image edits take dall-e-2 or a gpt-image model.`, 'model');
  if (typeof fields.prompt !== 'string' || fields.prompt === '') return reject("Missing required parameter: 'prompt'.", 'prompt');
  const n = fields.n ?? 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > model.maxN) return reject(`Invalid 'n': must be between 1 and ${model.maxN}.`, 'n');
  const size = fields.size ?? (model.gpt ? 'auto' : '1024x1024');
  if (typeof size !== 'string' || !model.sizes.includes(size)) return reject(`Invalid value: '${shown(size)}'. Supported values are: ${model.sizes.join(', ')}.`, 'size');
  const quality = fields.quality ?? (model.gpt ? 'auto' : 'standard');
  if (typeof quality !== 'string' || !model.qualities.includes(quality)) return reject(`Invalid quality '${shown(quality)}' for ${shown(modelId)}.`, 'quality');
  const format = fields.responseFormat ?? (model.gpt ? 'b64_json' : 'url');
  if (format !== 'url' && format !== 'b64_json') return reject(`Invalid response_format '${shown(format)}'.`, 'response_format');
  if (model.gpt && fields.responseFormat !== undefined) return reject(`response_format is not supported for ${shown(modelId)}: it always answers b64_json.`, 'response_format');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  const image = () => (format === 'url' ? { url: `https://images.example/${Math.random().toString(36).slice(2)}.png` } : { b64_json: fakePng().toString('base64') });
  const data = Array.from({ length: n }, () => (modelId === 'dall-e-3' ? { ...image(), revised_prompt: `A picture of ${fields.prompt as string}` } : image()));
  const body: Record<string, unknown> = { created: Math.floor(Date.now() / 1000), data };
  if (model.gpt) Object.assign(body, gptAnswer(fields.prompt, fields.inputImages, n, size, quality));
  writeJson(x.res, 200, body, { 'x-request-id': 'req_fakeimages' });
}

function gptAnswer(prompt: string, inputImages: number, n: number, size: string, quality: string): Record<string, unknown> {
  const answeredSize = size === 'auto' ? '1024x1024' : size;
  const answeredQuality = quality === 'auto' ? 'high' : quality;
  const textTokens = words(prompt);
  const imageTokens = inputImages * FAKE_IMAGE_TOKENS_PER_INPUT_IMAGE;
  const output = n * OUTPUT_TOKENS[answeredQuality]![answeredSize]!;
  return {
    background: 'opaque',
    output_format: 'png',
    quality: answeredQuality,
    size: answeredSize,
    usage: {
      input_tokens: textTokens + imageTokens,
      input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
      output_tokens: output,
      total_tokens: textTokens + imageTokens + output,
    },
  };
}

function fakePng(): Buffer {
  const png = Buffer.alloc(FAKE_IMAGE_BYTES);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
  return png;
}
