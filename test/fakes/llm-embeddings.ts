// Fake embeddings, in each provider's own shapes, checking what they receive as the provider would:
//   OpenAI   POST /v1/embeddings {model, input, dimensions?, encoding_format?, user?} → {object: "list", data, model, usage}
//            (base64: the float32 values little-endian, as OpenAI encodes them)
//   Vertex   POST …/publishers/google/models/<m>:predict {instances: [{content}], parameters: {autoTruncate,
//            outputDimensionality}} → {predictions: [{embeddings: {statistics: {token_count, truncated}, values}}],
//            metadata: {billableCharacterCount}}, pretty-printed as Google's APIs write it
//            …/models/gemini-embedding-<v>:embedContent {content: {parts: [{text}]}, embedContentConfig?} →
//            {embedding: {values}, usageMetadata: {promptTokenCount, totalTokenCount}, truncated}
//   Bedrock  POST /model/amazon.titan-embed-text-v2:0/invoke {inputText, dimensions, normalize} → {embedding,
//            inputTextTokenCount}; cohere.embed-*-v3 {texts, input_type} → {embeddings, id, response_type, texts},
//            its count only in X-Amzn-Bedrock-Input-Token-Count
// Every fake counts one token per word of each text (whitespace-separated; a token-id input counts its ids), so
// tests can work costs out by hand. Vectors are made from the text, the same text giving the same vector.

import { randomBytes } from 'node:crypto';
import { sendBedrockError, sendBehaviourError, sendGoogleError, sendOpenAiError } from './llm-errors.ts';
import { writeJson } from './llm-reply-writer.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

/** The fakes' token count of one text: its words. */
export function fakeTokenCount(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}

/** A unit-length vector of `length` values made from the text. */
function vectorOf(text: string, length: number): number[] {
  let seed = 7;
  for (const char of text) seed = (seed * 31 + char.codePointAt(0)!) % 1_000_003;
  const raw = Array.from({ length }, (_, i) => ((seed * (i + 3)) % 997) / 997 - 0.5);
  const norm = Math.sqrt(raw.reduce((sum, v) => sum + v * v, 0)) || 1;
  return raw.map((v) => v / norm);
}

function float32Base64(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

const unknownKey = (body: Record<string, unknown>, known: readonly string[]): string | undefined => Object.keys(body).find((key) => !known.includes(key));

// ---------------------------------------------------------------------------------------------------------------
// OpenAI

const OPENAI_DIMENSIONS: Record<string, { length: number; shortens: boolean }> = {
  'text-embedding-3-small': { length: 1536, shortens: true },
  'text-embedding-3-large': { length: 3072, shortens: true },
  'text-embedding-ada-002': { length: 1536, shortens: false },
};

function openAiInputs(input: unknown): (string | number[])[] | undefined {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  if (input.every((item) => typeof item === 'number')) return [input];
  if (input.every((item) => typeof item === 'string' || (Array.isArray(item) && item.every((t) => typeof t === 'number')))) return input;
  return undefined;
}

export function openAiEmbeddings(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendOpenAiError(x.res, 400, 'We could not parse the JSON body of your request.');
  const unknown = unknownKey(body, ['model', 'input', 'dimensions', 'encoding_format', 'user']);
  if (unknown !== undefined) return sendOpenAiError(x.res, 400, `Unrecognized request argument supplied: ${unknown}`, { param: unknown });
  const model = typeof body.model === 'string' ? OPENAI_DIMENSIONS[body.model] : undefined;
  if (model === undefined) return sendOpenAiError(x.res, 404, `The model \`${String(body.model)}\` does not exist or you do not have access to it.`);
  const inputs = openAiInputs(body.input);
  if (inputs === undefined || inputs.some((item) => item === '')) return sendOpenAiError(x.res, 400, "'$.input' is invalid. Please check the API reference.", { param: 'input' });
  if (body.encoding_format !== undefined && body.encoding_format !== 'float' && body.encoding_format !== 'base64') {
    return sendOpenAiError(x.res, 400, `${JSON.stringify(body.encoding_format)} is not one of ['float', 'base64'] - 'encoding_format'`, { param: 'encoding_format' });
  }
  if (body.dimensions !== undefined && !model.shortens) return sendOpenAiError(x.res, 400, 'This model does not support specifying dimensions.', { param: 'dimensions' });
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  const length = typeof body.dimensions === 'number' ? body.dimensions : model.length;
  let tokens = 0;
  const data = inputs.map((item, index) => {
    tokens += typeof item === 'string' ? fakeTokenCount(item) : item.length;
    const vector = vectorOf(typeof item === 'string' ? item : item.join(' '), length);
    return { object: 'embedding', index, embedding: body.encoding_format === 'base64' ? float32Base64(vector) : vector };
  });
  writeJson(
    x.res,
    200,
    { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } },
    { 'x-request-id': `req_${randomBytes(16).toString('hex')}` },
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Vertex AI

/** Vertex AI's text embedding models: texts per :predict and the longest vector. */
function vertexEmbedder(model: string): { most: number; length: number } | undefined {
  if (/^gemini-embedding-001$/.test(model)) return { most: 1, length: 3072 };
  if (/^(text-embedding-00[45]|text-multilingual-embedding-002)$/.test(model)) return { most: 250, length: 768 };
  return undefined;
}

function vertexProblem(body: Record<string, unknown>, model: string, embedder: { most: number; length: number }): string | undefined {
  const unknown = unknownKey(body, ['instances', 'parameters']);
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`;
  const instances = body.instances;
  if (!Array.isArray(instances) || instances.length === 0) return 'The instances field is required and must not be empty.';
  if (instances.length > embedder.most) {
    return `Unable to submit request because the model ${model} supports at most ${embedder.most} instance${embedder.most === 1 ? '' : 's'} per request; it has ${instances.length}.`;
  }
  for (const [i, instance] of instances.entries()) {
    const item = jsonObject(instance);
    if (item === null || typeof item.content !== 'string' || item.content === '') return `instances[${i}].content must be a non-empty string.`;
    const extra = unknownKey(item, ['content', 'task_type', 'title']);
    if (extra !== undefined) return `instances[${i}]: unknown field "${extra}".`;
  }
  const parameters = body.parameters === undefined ? {} : jsonObject(body.parameters);
  if (parameters === null) return 'parameters must be an object.';
  const extra = unknownKey(parameters, ['autoTruncate', 'outputDimensionality']);
  if (extra !== undefined) return `parameters: unknown field "${extra}".`;
  if (parameters.autoTruncate !== undefined && typeof parameters.autoTruncate !== 'boolean') return 'parameters.autoTruncate must be a boolean.';
  const dimensions = parameters.outputDimensionality;
  if (dimensions !== undefined && (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 1 || dimensions > embedder.length)) {
    return `parameters.outputDimensionality must be an integer from 1 to ${embedder.length}.`;
  }
  return undefined;
}

export function vertexEmbeddings(x: FakeExchange, model: string): void {
  const embedder = vertexEmbedder(model);
  if (embedder === undefined) return sendGoogleError(x.res, 400, `Model ${model} does not support the predict method for embeddings.`);
  const body = jsonObject(x.json);
  if (body === null) return sendGoogleError(x.res, 400, 'Invalid JSON payload received.');
  const problem = vertexProblem(body, model, embedder);
  if (problem !== undefined) return sendGoogleError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'google');
  const length = (jsonObject(body.parameters)?.outputDimensionality as number | undefined) ?? embedder.length;
  const contents = (body.instances as { content: string }[]).map((instance) => instance.content);
  const predictions = contents.map((content) => ({ embeddings: { statistics: { truncated: false, token_count: fakeTokenCount(content) }, values: vectorOf(content, length) } }));
  const answer = { predictions, metadata: { billableCharacterCount: contents.reduce((sum, content) => sum + content.replace(/\s/g, '').length, 0) } };
  const bytes = Buffer.from(JSON.stringify(answer, null, 2));
  x.res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8', 'content-length': bytes.length });
  x.res.end(bytes);
}

/** The fields of :embedContent's embedContentConfig, as the Google Gen AI SDK sends them. */
const EMBED_CONTENT_CONFIG = ['taskType', 'title', 'outputDimensionality', 'autoTruncate'];

function embedContentProblem(body: Record<string, unknown>): string | undefined {
  const unknown = unknownKey(body, ['content', 'embedContentConfig']);
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`;
  const parts = jsonObject(body.content)?.parts;
  if (!Array.isArray(parts) || parts.length === 0) return 'content.parts is required and must not be empty.';
  if (parts.some((part) => typeof jsonObject(part)?.text !== 'string')) return 'content.parts: only text parts are embedded here.';
  const config = body.embedContentConfig === undefined ? {} : jsonObject(body.embedContentConfig);
  if (config === null) return 'embedContentConfig must be an object.';
  const extra = unknownKey(config, EMBED_CONTENT_CONFIG);
  if (extra !== undefined) return `embedContentConfig: unknown field "${extra}".`;
  const dimensions = config.outputDimensionality;
  if (dimensions !== undefined && (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 1 || dimensions > 3072)) {
    return 'embedContentConfig.outputDimensionality must be an integer from 1 to 3072.';
  }
  return undefined;
}

/** The newer Gemini embedding models' :embedContent: one content a request, its usage in usageMetadata. */
export function vertexEmbedContent(x: FakeExchange, model: string): void {
  if (!/^gemini-embedding-/.test(model)) return sendGoogleError(x.res, 400, `Model ${model} does not support the embedContent method.`);
  const body = jsonObject(x.json);
  if (body === null) return sendGoogleError(x.res, 400, 'Invalid JSON payload received.');
  const problem = embedContentProblem(body);
  if (problem !== undefined) return sendGoogleError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'google');
  const text = (jsonObject(body.content)!.parts as { text: string }[]).map((part) => part.text).join(' ');
  const length = (jsonObject(body.embedContentConfig)?.outputDimensionality as number | undefined) ?? 3072;
  const tokens = fakeTokenCount(text);
  writeJson(x.res, 200, { embedding: { values: vectorOf(text, length) }, usageMetadata: { promptTokenCount: tokens, totalTokenCount: tokens }, truncated: false });
}

// ---------------------------------------------------------------------------------------------------------------
// Bedrock

const TITAN_V2 = /^amazon\.titan-embed-text-v2:0$/;
const TITAN_V1 = /^amazon\.titan-embed-text-v1$/;
const COHERE_V3 = /^cohere\.embed-(english|multilingual)-v3$/;

/** Bedrock's embedding models this fake serves. */
export function isBedrockEmbeddingModel(modelId: string): boolean {
  return TITAN_V2.test(modelId) || TITAN_V1.test(modelId) || COHERE_V3.test(modelId);
}

const malformed = (detail: string) => `Malformed input request: ${detail}, please reformat your input and try again.`;

function titanProblem(body: Record<string, unknown>, v2: boolean): string | undefined {
  const extra = unknownKey(body, v2 ? ['inputText', 'dimensions', 'normalize', 'embeddingTypes'] : ['inputText']);
  if (extra !== undefined) return malformed(`#: extraneous key [${extra}] is not permitted`);
  if (typeof body.inputText !== 'string' || body.inputText === '') return malformed('#/inputText: expected minLength: 1');
  if (body.dimensions !== undefined && ![256, 512, 1024].includes(body.dimensions as number))
    return malformed(`#/dimensions: ${JSON.stringify(body.dimensions)} is not a valid enum value`);
  if (body.normalize !== undefined && typeof body.normalize !== 'boolean') return malformed('#/normalize: expected type: Boolean');
  return undefined;
}

function cohereProblem(body: Record<string, unknown>): string | undefined {
  const extra = unknownKey(body, ['texts', 'images', 'input_type', 'truncate', 'embedding_types']);
  if (extra !== undefined) return malformed(`#: extraneous key [${extra}] is not permitted`);
  const texts = body.texts;
  if (!Array.isArray(texts) || texts.length === 0 || texts.length > 96) return malformed('#/texts: expected between 1 and 96 items');
  if (texts.some((text) => typeof text !== 'string' || text.length > 2048)) return malformed('#/texts: each text must be a string of at most 2048 characters');
  if (!['search_document', 'search_query', 'classification', 'clustering'].includes(body.input_type as string)) return malformed('#: required key [input_type] not found');
  return undefined;
}

export function bedrockEmbeddings(x: FakeExchange, modelId: string): void {
  const body = jsonObject(x.json);
  if (body === null) return sendBedrockError(x.res, 400, malformed('the body is not a JSON object'));
  const cohere = COHERE_V3.test(modelId);
  const problem = cohere ? cohereProblem(body) : titanProblem(body, TITAN_V2.test(modelId));
  if (problem !== undefined) return sendBedrockError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'bedrock');
  const texts = cohere ? (body.texts as string[]) : [body.inputText as string];
  const tokens = texts.reduce((sum, text) => sum + fakeTokenCount(text), 0);
  const headers = { 'x-amzn-requestid': crypto.randomUUID(), 'x-amzn-bedrock-input-token-count': String(tokens), 'x-amzn-bedrock-invocation-latency': '38' };
  if (cohere) {
    writeJson(x.res, 200, { id: crypto.randomUUID(), response_type: 'embeddings_floats', texts, embeddings: texts.map((text) => vectorOf(text, 1024)) }, headers);
    return;
  }
  const length = typeof body.dimensions === 'number' ? body.dimensions : TITAN_V2.test(modelId) ? 1024 : 1536;
  writeJson(x.res, 200, { embedding: vectorOf(texts[0]!, length), inputTextTokenCount: tokens }, headers);
}
