// Fake OpenAI chat completions (also the reply side of Vertex AI's OpenAI-compatible surface), and the
// Responses API (llm-openai-responses.ts), and the moderation, input-token and realtime client-secret calls
// (llm-openai-free-calls.ts).

import { randomBytes } from 'node:crypto';
import type { OutgoingHttpHeaders } from 'node:http';
import { mapLazy, randomId, replyContent, splitText, usageOf } from './llm-reply-content.ts';
import type { ReplyContent } from './llm-reply-content.ts';
import { sseEvent, writeJson, writeJsonWithText, writeStream } from './llm-reply-writer.ts';
import type { StreamPlan } from './llm-reply-writer.ts';
import { sendBehaviourError, sendGoogleError, sendOpenAiError } from './llm-errors.ts';
import { bearerToken, jsonObject, requestHeader } from './llm-request.ts';
import { responses, retrieveResponse } from './llm-openai-responses.ts';
import { handleOpenAiBatches } from './llm-openai-batches.ts';
import { openAiEmbeddings } from './llm-embeddings.ts';
import { openAiImageEdit, openAiImageGeneration } from './llm-images.ts';
import { openAiAudio, openAiSpeech } from './llm-audio.ts';
import { inputTokens, moderations, realtimeClientSecret } from './llm-openai-free-calls.ts';
import type { FakeExchange, FakeUsage } from './llm-upstream.ts';

export type ChatFlavour = 'openai' | 'vertex';

// OpenAI answers with the dated snapshot behind an alias.
const snapshots: Record<string, string> = {
  'gpt-4o': 'gpt-4o-2024-08-06',
  'gpt-4o-mini': 'gpt-4o-mini-2024-07-18',
  'gpt-4.1': 'gpt-4.1-2025-04-14',
  'gpt-4.1-mini': 'gpt-4.1-mini-2025-04-14',
  'gpt-4.1-nano': 'gpt-4.1-nano-2025-04-14',
  o3: 'o3-2025-04-16',
  'o4-mini': 'o4-mini-2025-04-16',
};

/** Credentials a request may carry; a server that takes none sees none of them from a proxy. */
const CREDENTIAL_HEADERS = ['authorization', 'api-key', 'x-api-key', 'x-goog-api-key'];

export async function handleOpenAi(x: FakeExchange): Promise<void> {
  if (x.opts.anonymous) {
    const carried = CREDENTIAL_HEADERS.find((name) => requestHeader(x.req, name) !== undefined);
    if (carried !== undefined) return sendOpenAiError(x.res, 400, `this server takes no credential, but the request carries ${carried}`, { code: null });
    return openAiPaths(x);
  }
  const key = x.opts.expectApiKey ?? x.opts.expectBearer;
  const header = x.opts.apiKeyHeader;
  const token = header === undefined ? bearerToken(x.req) : (requestHeader(x.req, header) ?? null);
  if (token === null) {
    return sendOpenAiError(x.res, 401, 'No API key provided: send it as `Authorization: Bearer <key>`.', { code: null });
  }
  if (key !== undefined && token !== key) {
    return sendOpenAiError(x.res, 401, `Incorrect API key provided: ${redact(token)}.`);
  }
  return openAiPaths(x);
}

async function openAiPaths(x: FakeExchange): Promise<void> {
  if (x.req.method === 'GET' && x.path === '/v1/models') return listModels(x);
  if (x.req.method === 'POST' && x.path === '/v1/chat/completions') return chatCompletions(x, 'openai');
  if (x.req.method === 'POST' && x.path === '/v1/responses') return responses(x);
  const stored = x.req.method === 'GET' ? /^\/v1\/responses\/(resp_[A-Za-z0-9]+)$/.exec(x.path) : null;
  if (stored) return retrieveResponse(x, stored[1]!);
  if ((x.path.startsWith('/v1/files') || x.path.startsWith('/v1/batches')) && (await handleOpenAiBatches(x))) return;
  if (x.req.method === 'POST' && x.path === '/v1/embeddings') return openAiEmbeddings(x);
  if (x.req.method === 'POST' && x.path === '/v1/images/generations') return openAiImageGeneration(x);
  if (x.req.method === 'POST' && x.path === '/v1/images/edits') return openAiImageEdit(x);
  if (x.req.method === 'POST' && x.path === '/v1/audio/transcriptions') return openAiAudio(x, 'transcribe');
  if (x.req.method === 'POST' && x.path === '/v1/audio/translations') return openAiAudio(x, 'translate');
  if (x.req.method === 'POST' && x.path === '/v1/audio/speech') return openAiSpeech(x);
  if (x.req.method === 'POST' && x.path === '/v1/moderations') return moderations(x);
  if (x.req.method === 'POST' && x.path === '/v1/responses/input_tokens') return inputTokens(x);
  if (x.req.method === 'POST' && x.path === '/v1/realtime/client_secrets') return realtimeClientSecret(x);
  return sendOpenAiError(x.res, 404, `Invalid URL (${x.req.method} ${x.path})`, { code: null });
}

/** Validates a chat-completions body and replies (JSON or SSE); used by both flavours. */
export async function chatCompletions(x: FakeExchange, flavour: ChatFlavour): Promise<void> {
  // Vertex answers malformed requests in Google's error shape, OpenAI in its own.
  const reject = (message: string, param?: string) =>
    flavour === 'vertex' ? sendGoogleError(x.res, 400, message) : sendOpenAiError(x.res, 400, message, param ? { param, code: 'missing_required_parameter' } : {});
  const body = jsonObject(x.json);
  if (body === null) return reject('We could not parse the JSON body of your request.');
  if (typeof body.model !== 'string' || body.model === '') return reject('you must provide a model parameter');
  if (flavour === 'vertex' && !body.model.includes('/')) {
    return reject(`Invalid model "${body.model}": Vertex expects a publisher-qualified name such as google/gemini-2.5-flash.`);
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return reject("Missing required parameter: 'messages'.", 'messages');
  }
  const problem = toolMessagesProblem(body.messages) ?? (flavour === 'openai' ? reasoningParameterProblem(body) : undefined);
  if (problem !== undefined)
    return flavour === 'vertex' ? sendGoogleError(x.res, 400, problem.message) : sendOpenAiError(x.res, 400, problem.message, { param: problem.param, code: problem.code });
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, flavour === 'vertex' ? 'google' : 'openai');

  const model = flavour === 'openai' ? (snapshots[body.model] ?? body.model) : body.model;
  const shape: ChunkShape = {
    id: flavour === 'openai' ? randomId('chatcmpl-', 29) : randomBytes(18).toString('base64url'),
    created: Math.floor(Date.now() / 1000),
    model,
    flavour,
  };
  const content = replyContent(x.behaviour, `Hello from the fake ${flavour} chat completions upstream.`);
  const usage = openAiUsage(usageOf(x.behaviour), flavour);
  const headers = responseHeaders(flavour);
  if (body.stream === true) {
    const includeUsage = jsonObject(body.stream_options)?.include_usage === true;
    return writeStream(x.res, streamPlan(shape, content, usage, includeUsage, headers), x.behaviour);
  }
  return writeJsonWithText(x.res, headers, content, (text) => ({
    id: shape.id,
    object: 'chat.completion',
    created: shape.created,
    model,
    choices: [
      {
        index: 0,
        message: content.toolCall
          ? { role: 'assistant', content: null, tool_calls: [toolCallOf(content.toolCall)], refusal: null, annotations: [] }
          : { role: 'assistant', content: text, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: content.toolCall ? 'tool_calls' : 'stop',
      },
    ],
    usage,
    ...fingerprint(flavour),
  }));
}

interface Refusal {
  message: string;
  param: string;
  code: string;
}

/** Tool messages answer the assistant message right before them, every call of it, as OpenAI checks. */
function toolMessagesProblem(messages: unknown[]): Refusal | undefined {
  for (let i = 0; i < messages.length; i++) {
    const message = jsonObject(messages[i]);
    const calls = message?.role === 'assistant' && Array.isArray(message.tool_calls) ? message.tool_calls.map((c) => String(jsonObject(c)?.id)) : [];
    if (calls.length > 0) {
      const answered = new Set<string>();
      for (let j = i + 1; j < messages.length && jsonObject(messages[j])?.role === 'tool'; j++) answered.add(String(jsonObject(messages[j])?.tool_call_id));
      const missing = calls.filter((id) => !answered.has(id));
      if (missing.length > 0) {
        return {
          message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${missing.join(', ')}`,
          param: `messages.[${i}].role`,
          code: 'invalid_value',
        };
      }
    }
    if (message?.role === 'tool') {
      let k = i - 1;
      while (k >= 0 && jsonObject(messages[k])?.role === 'tool') k--;
      const before = jsonObject(messages[k]);
      const ids = before?.role === 'assistant' && Array.isArray(before.tool_calls) ? before.tool_calls.map((c) => String(jsonObject(c)?.id)) : [];
      if (!ids.includes(String(message.tool_call_id))) {
        return {
          message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          param: `messages.[${i}].role`,
          code: 'invalid_value',
        };
      }
    }
  }
  return undefined;
}

const REASONING_MODEL = /^(o\d|gpt-5)/;

/** Reasoning models take max_completion_tokens and reasoning_effort; the others refuse reasoning_effort. */
function reasoningParameterProblem(body: Record<string, unknown>): Refusal | undefined {
  const reasoning = REASONING_MODEL.test(String(body.model));
  if (reasoning && body.max_tokens !== undefined) {
    return {
      message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      param: 'max_tokens',
      code: 'unsupported_parameter',
    };
  }
  if (!reasoning && body.reasoning_effort !== undefined) {
    return { message: "Unsupported parameter: 'reasoning_effort' is not supported with this model.", param: 'reasoning_effort', code: 'unsupported_parameter' };
  }
  return undefined;
}

interface ChunkShape {
  id: string;
  created: number;
  model: string;
  flavour: ChatFlavour;
}

function streamPlan(shape: ChunkShape, content: ReplyContent, usage: Record<string, unknown>, includeUsage: boolean, headers: OutgoingHttpHeaders): StreamPlan {
  // With include_usage every chunk carries `usage: null` except the last, which has `choices: []`.
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    sseEvent({
      id: shape.id,
      object: 'chat.completion.chunk',
      created: shape.created,
      model: shape.model,
      ...fingerprint(shape.flavour),
      choices,
      ...(includeUsage ? { usage: null } : {}),
      ...extra,
    });
  const choice = (delta: Record<string, unknown>, finish: string | null = null) => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
  });
  const call = content.toolCall;
  const toolCall = call ? toolCallOf(call) : undefined;
  // A streamed tool call names the function first, then sends its arguments in pieces.
  const firstDelta = toolCall
    ? { role: 'assistant', content: null, tool_calls: [{ index: 0, ...toolCall, function: { name: toolCall.function.name, arguments: '' } }], refusal: null }
    : { role: 'assistant', content: '', refusal: null };
  const head = [chunk([choice(firstDelta)])];
  const argumentPieces = toolCall ? splitText(toolCall.function.arguments, 3) : [];
  const body = toolCall
    ? argumentPieces.map((a) => chunk([choice({ tool_calls: [{ index: 0, function: { arguments: a } }] })]))
    : mapLazy(content.pieces(), (piece) => chunk([choice({ content: piece })]));
  const tail = [chunk([choice({}, call ? 'tool_calls' : 'stop')])];
  if (includeUsage) tail.push(chunk([], { usage }));
  tail.push(sseEvent('[DONE]'));
  return {
    headers: { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' },
    head,
    body,
    bodyCount: toolCall ? argumentPieces.length : content.count,
    tail,
    garbage: Buffer.from('data: {"id":"' + shape.id + '","object":"chat.completion.chunk","choices":[{"delta":\n\n'),
    errorEvent: sseEvent({
      error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null },
    }),
  };
}

export function openAiUsage(u: Required<FakeUsage>, flavour: ChatFlavour = 'openai'): Record<string, unknown> {
  const prompt = u.input + u.cacheRead;
  const completion = u.output + u.reasoning;
  if (flavour === 'vertex') {
    return {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      ...(u.cacheRead ? { prompt_tokens_details: { cached_tokens: u.cacheRead } } : {}),
      ...(u.reasoning ? { completion_tokens_details: { reasoning_tokens: u.reasoning } } : {}),
    };
  }
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: u.cacheRead, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: u.reasoning,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

function listModels(x: FakeExchange): void {
  const created = 1_715_367_049;
  const data = Object.values(snapshots)
    .concat(Object.keys(snapshots))
    .map((id) => ({ id, object: 'model', created, owned_by: 'system' }));
  writeJson(x.res, 200, { object: 'list', data }, responseHeaders('openai'));
}

function toolCallOf(call: { name: string; arguments: Record<string, unknown> }) {
  return { id: randomId('call_', 24), type: 'function' as const, function: { name: call.name, arguments: JSON.stringify(call.arguments) } };
}

function fingerprint(flavour: ChatFlavour): Record<string, unknown> {
  return flavour === 'openai' ? { service_tier: 'default', system_fingerprint: 'fp_07871e2ad8' } : {};
}

function responseHeaders(flavour: ChatFlavour): OutgoingHttpHeaders {
  if (flavour === 'vertex') return {};
  return { 'x-request-id': `req_${randomBytes(16).toString('hex')}`, 'openai-version': '2020-10-01', 'openai-processing-ms': '212' };
}

function redact(key: string): string {
  return key.length > 8 ? `${key.slice(0, 3)}...${key.slice(-4)}` : '***';
}
