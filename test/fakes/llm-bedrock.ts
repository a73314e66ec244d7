// Fake Bedrock runtime for Claude: InvokeModel (JSON + token-count headers), InvokeModelWithResponseStream (AWS
// event stream), and for any model Converse (JSON, camelCase usage, no token-count headers) and ConverseStream
// (event stream whose last member, metadata, holds the usage; llm-converse.ts), behind a SigV4 check. InvokeModel also serves the Titan and Cohere
// embedding models (llm-embeddings.ts) and the Nova Canvas and Titan image models (llm-provider-images.ts). CountTokens counts an InvokeModel body (base64) or a Converse request.

import { EventStreamCodec } from '@smithy/eventstream-codec';
import type { MessageHeaders } from '@smithy/eventstream-codec';
import type { OutgoingHttpHeaders } from 'node:http';
import { anthropicReply, anthropicStreamEvents, messagesProblem, wantsThinking } from './llm-anthropic.ts';
import type { AnthropicEvent } from './llm-anthropic.ts';
import { sendBedrockError, sendBehaviourError } from './llm-errors.ts';
import { mapLazy } from './llm-reply-content.ts';
import { writeJsonWithText, writeStream } from './llm-reply-writer.ts';
import { jsonObject } from './llm-request.ts';
import { verifySigV4 } from './llm-sigv4.ts';
import { bedrockEmbeddings, isBedrockEmbeddingModel } from './llm-embeddings.ts';
import { converseProblem, handleConverse } from './llm-converse.ts';
import { bedrockImages, isBedrockImageModel } from './llm-provider-images.ts';
import type { FakeExchange } from './llm-upstream.ts';

const invokePath = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream|converse|converse-stream|count-tokens)$/;
// Bedrock's original version, and the dated version the current Anthropic SDKs copy into the body.
const bedrockVersions = new Set(['bedrock-2023-05-31', '2026-10-21']);
const fakeLatencyMs = 412;
const fakeFirstByteMs = 187;

export const eventStreamCodec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => Buffer.from(text, 'utf8'),
);

export async function handleBedrock(x: FakeExchange): Promise<void> {
  const aws = x.opts.aws;
  if (aws === undefined) throw new Error('the bedrock fake needs opts.aws to verify SigV4 signatures');
  const verdict = verifySigV4({ method: x.req.method ?? 'GET', path: x.path, query: x.rawQuery, headers: x.req.headers, body: x.body }, aws, 'bedrock');
  if (!verdict.ok) return sendBedrockError(x.res, 403, verdict.message, verdict.errorType);

  const match = x.req.method === 'POST' ? invokePath.exec(x.path) : null;
  if (!match) return sendBedrockError(x.res, 404, `Unknown operation ${x.req.method} ${x.path}`, 'UnknownOperationException');
  const modelId = decodeURIComponent(match[1] ?? '');
  if (match[2] === 'count-tokens') return countTokens(x, modelId);
  if (match[2] === 'converse' || match[2] === 'converse-stream') return handleConverse(x, modelId, match[2] === 'converse-stream');
  if (match[2] === 'invoke' && isBedrockEmbeddingModel(modelId)) return bedrockEmbeddings(x, modelId);
  if (match[2] === 'invoke' && isBedrockImageModel(modelId)) return bedrockImages(x);
  const problem = bodyProblem(jsonObject(x.json));
  if (problem !== undefined) return sendBedrockError(x.res, 400, problem);
  if (!modelId.startsWith('arn:') && !modelId.includes('anthropic.')) {
    return sendBedrockError(x.res, 400, 'The provided model identifier is invalid.');
  }
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'bedrock');

  const reply = anthropicReply(x.behaviour, responseModel(modelId), wantsThinking(jsonObject(x.json)));
  const u = reply.usage;
  const headers: OutgoingHttpHeaders = { 'x-amzn-requestid': crypto.randomUUID() };
  if (match[2] === 'invoke') {
    return writeJsonWithText(
      x.res,
      {
        ...headers,
        'x-amzn-bedrock-input-token-count': String(u.input),
        'x-amzn-bedrock-output-token-count': String(u.output + u.reasoning),
        'x-amzn-bedrock-invocation-latency': String(fakeLatencyMs),
        ...(u.cacheRead ? { 'x-amzn-bedrock-cache-read-input-token-count': String(u.cacheRead) } : {}),
        ...(u.cacheWrite + u.cacheWrite1h ? { 'x-amzn-bedrock-cache-write-input-token-count': String(u.cacheWrite + u.cacheWrite1h) } : {}),
      },
      reply.content,
      reply.message,
    );
  }

  const events = anthropicStreamEvents(reply, { ping: false });
  // Bedrock adds its own metrics to the final message_stop.
  const tail = events.tail.map((event) =>
    event.type !== 'message_stop'
      ? event
      : {
          ...event,
          'amazon-bedrock-invocationMetrics': {
            inputTokenCount: u.input,
            outputTokenCount: u.output + u.reasoning,
            invocationLatency: fakeLatencyMs,
            firstByteLatency: fakeFirstByteMs,
            ...(u.cacheRead ? { cacheReadInputTokenCount: u.cacheRead } : {}),
            ...(u.cacheWrite + u.cacheWrite1h ? { cacheWriteInputTokenCount: u.cacheWrite + u.cacheWrite1h } : {}),
          },
        },
  );
  return writeStream(
    x.res,
    {
      headers: { ...headers, 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-bedrock-content-type': 'application/json' },
      head: events.head.map(chunkFrame),
      body: mapLazy(events.body, chunkFrame),
      bodyCount: events.bodyCount,
      tail: tail.map(chunkFrame),
      garbage: corruptCrc(chunkFrame({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'corrupted' } })),
      errorEvent: exceptionFrame('modelStreamErrorException', 'The model encountered an error while streaming.'),
    },
    x.behaviour,
  );
}

/**
 * CountTokens: `{input: {invokeModel: {body: <base64 of an InvokeModel body>}}}` or `{input: {converse: {messages, …}}}`,
 * exactly one of them, for a foundation model (an inference profile is refused, as Bedrock refuses it). Counts as
 * Anthropic's count_tokens does: input, cache reads and writes.
 */
function countTokens(x: FakeExchange, modelId: string): void {
  const validation = (message: string) => sendBedrockError(x.res, 400, message, 'ValidationException');
  if (!modelId.startsWith('anthropic.')) return validation("The provided model doesn't support counting tokens.");
  const input = jsonObject(jsonObject(x.json)?.input);
  const members = input === null ? [] : Object.keys(input);
  if (input === null || members.length !== 1) return validation('input must have exactly one member: invokeModel or converse');
  const problem = input.converse !== undefined ? converseProblem(jsonObject(input.converse)) : invokeBodyProblem(jsonObject(input.invokeModel));
  if (problem !== undefined) return validation(problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'bedrock');
  const u = anthropicReply(x.behaviour, responseModel(modelId)).usage;
  x.res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': crypto.randomUUID() });
  x.res.end(JSON.stringify({ inputTokens: u.input + u.cacheRead + u.cacheWrite + u.cacheWrite1h }));
}

/** `invokeModel.body`: base64 (strictly) of a Claude InvokeModel body. */
function invokeBodyProblem(invokeModel: Record<string, unknown> | null): string | undefined {
  if (invokeModel === null) return 'input must have exactly one member: invokeModel or converse';
  const body = invokeModel.body;
  if (typeof body !== 'string' || body.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(body)) return 'input.invokeModel.body must be base64-encoded';
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(body, 'base64').toString('utf8'));
  } catch {
    return 'input.invokeModel.body is not a JSON document';
  }
  return bodyProblem(jsonObject(decoded));
}

/** One ConverseStream member: the event type in the frame's header, the member itself as the payload. */
export function converseFrame(type: string, payload: unknown): Buffer {
  return frame({ ':event-type': type, ':content-type': 'application/json', ':message-type': 'event' }, payload);
}

/** What Bedrock rejects in a Claude body: the version, keys the path decides, the Messages checks. */
function bodyProblem(body: Record<string, unknown> | null): string | undefined {
  const malformed = (detail: string) => `Malformed input request: ${detail}, please reformat your input and try again.`;
  if (body === null) return malformed('the body is not a JSON object');
  if (body.anthropic_version === undefined) return malformed('#: required key [anthropic_version] not found');
  if (typeof body.anthropic_version !== 'string' || !bedrockVersions.has(body.anthropic_version))
    return `Invalid API version: ${typeof body.anthropic_version === 'string' ? body.anthropic_version : JSON.stringify(body.anthropic_version)}`;
  const extraneous = ['model', 'stream'].find((k) => body[k] !== undefined);
  if (extraneous !== undefined) return malformed(`#: extraneous key [${extraneous}] is not permitted`);
  const problem = messagesProblem(body);
  return problem === undefined ? undefined : malformed(problem);
}

const padding = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
let paddingTurn = 0;

/** One `chunk` event: the Anthropic event base64-encoded in `bytes`, with padding `p` hiding its length. */
export function chunkFrame(event: AnthropicEvent): Buffer {
  paddingTurn = (paddingTurn + 7) % padding.length;
  const payload = { bytes: Buffer.from(JSON.stringify(event)).toString('base64'), p: padding.slice(0, paddingTurn + 1) };
  return frame({ ':event-type': 'chunk', ':content-type': 'application/json', ':message-type': 'event' }, payload);
}

export function exceptionFrame(exceptionType: string, message: string): Buffer {
  return frame({ ':exception-type': exceptionType, ':content-type': 'application/json', ':message-type': 'exception' }, { message });
}

/** A frame with string headers and a JSON payload. */
function frame(stringHeaders: Record<string, string>, payload: unknown): Buffer {
  const headers: MessageHeaders = {};
  for (const [name, value] of Object.entries(stringHeaders)) headers[name] = { type: 'string', value };
  return Buffer.from(eventStreamCodec.encode({ headers, body: Buffer.from(JSON.stringify(payload)) }));
}

/** Same frame with its trailing message CRC flipped: a decoder must reject it. */
function corruptCrc(bytes: Buffer): Buffer {
  const copy = Buffer.from(bytes);
  copy[copy.length - 1] = (copy[copy.length - 1] ?? 0) ^ 0xff;
  return copy;
}

/** `us.anthropic.claude-sonnet-4-20250514-v1:0` → `claude-sonnet-4-20250514`, the name the body reports. */
function responseModel(modelId: string): string {
  return modelId.replace(/^([a-z]{2,4}\.)?anthropic\./, '').replace(/-v\d+(:\d+)?$/, '');
}
