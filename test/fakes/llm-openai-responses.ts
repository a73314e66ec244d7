// Fake OpenAI Responses API (POST /v1/responses), the API the OpenAI Codex CLI and the Agents SDK call. It
// checks the body the way the real API does (`input`, not `messages`; the Responses API's own stream_options,
// which has no include_usage) and answers as it does: one `response` object, or a stream of typed events
// (`event: response.output_text.delta` …) whose last, `response.completed`, carries the whole response with
// its usage: input_tokens (cache reads included), input_tokens_details.cached_tokens, output_tokens
// (reasoning included), output_tokens_details.reasoning_tokens.

import { randomBytes } from 'node:crypto';
import { mapLazy, randomId, replyContent, splitText, usageOf } from './llm-reply-content.ts';
import type { ReplyContent } from './llm-reply-content.ts';
import { sseEvent, writeJson, writeJsonWithText, writeStream } from './llm-reply-writer.ts';
import { sendBehaviourError, sendOpenAiError } from './llm-errors.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange, FakeUsage } from './llm-upstream.ts';

const snapshots: Record<string, string> = {
  'gpt-5': 'gpt-5-2025-08-07',
  'gpt-5-mini': 'gpt-5-mini-2025-08-07',
  'gpt-5-codex': 'gpt-5-codex',
};

// Request fields the Responses API accepts; anything else is refused as the real API does.
const KNOWN_FIELDS = new Set([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'stream',
  'stream_options',
  'store',
  'reasoning',
  'include',
  'max_output_tokens',
  'temperature',
  'top_p',
  'text',
  'metadata',
  'previous_response_id',
  'prompt_cache_key',
  'service_tier',
  'user',
  'safety_identifier',
  'truncation',
  'background',
]);

/**
 * Background responses (background: true): the answer is `queued` (streamed: response.created and
 * response.queued with status `queued`, then the usual events to response.completed); a read by id shows it
 * `in_progress` the first time and `completed`, with its usage, from then on, as a poller sees a response finish.
 */
const backgrounds = new Map<string, { reads: number; done: Record<string, unknown> }>();

/** GET /v1/responses/{id}: a background response as it stands. */
export function retrieveResponse(x: FakeExchange, id: string): void {
  const response = backgrounds.get(id);
  if (response === undefined) return sendOpenAiError(x.res, 404, `No response found with id '${id}'.`, { param: null, code: null });
  response.reads++;
  const body = response.reads === 1 ? { ...response.done, status: 'in_progress', output: [], usage: null } : response.done;
  writeJson(x.res, 200, body, { 'x-request-id': `req_${randomBytes(16).toString('hex')}` });
}

/** Responses this fake made with store (the default), for previous_response_id: id → the conversation's items. */
const stored = new Map<string, unknown[]>();

/**
 * What OpenAI checks in input items: a function_call_output answers a function_call sent before it (in this
 * input or the stored conversation), and a reasoning item's encrypted_content is one OpenAI wrote.
 */
function inputProblem(input: unknown[], before: unknown[]): { message: string; param: string } | undefined {
  const calls = new Set<string>();
  for (const item of before) {
    const object = jsonObject(item);
    if (object?.type === 'function_call') calls.add(String(object.call_id));
  }
  for (let i = 0; i < input.length; i++) {
    const item = jsonObject(input[i]);
    if (item?.type === 'function_call') calls.add(String(item.call_id));
    if (item?.type === 'function_call_output' && !calls.has(String(item.call_id))) {
      return { message: `No tool call found for function call output with call_id ${String(item.call_id)}.`, param: `input[${i}]` };
    }
    if (item?.type === 'reasoning' && typeof item.encrypted_content === 'string') {
      return { message: `The encrypted content for item ${String(item.id)} could not be verified.`, param: `input[${i}].encrypted_content` };
    }
  }
  return undefined;
}

export function responsesUsage(u: Required<FakeUsage>): Record<string, unknown> {
  const input = u.input + u.cacheRead;
  const output = u.output + u.reasoning;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u.cacheRead },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: input + output,
  };
}

export async function responses(x: FakeExchange): Promise<void> {
  const body = jsonObject(x.json);
  const reject = (message: string, param: string | null, code: string) => sendOpenAiError(x.res, 400, message, { param, code });
  if (body === null) return reject('We could not parse the JSON body of your request.', null, 'invalid_json');
  for (const field of Object.keys(body)) {
    if (!KNOWN_FIELDS.has(field)) return reject(`Unsupported parameter: '${field}'.`, field, 'unknown_parameter');
  }
  const streamOptions = jsonObject(body.stream_options);
  for (const field of Object.keys(streamOptions ?? {})) {
    if (field !== 'include_obfuscation') return reject(`Unknown parameter: 'stream_options.${field}'.`, `stream_options.${field}`, 'unknown_parameter');
  }
  if (typeof body.model !== 'string' || body.model === '') return reject("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
  if (typeof body.input !== 'string' && !Array.isArray(body.input)) return reject("Missing required parameter: 'input'.", 'input', 'missing_required_parameter');
  const previous = body.previous_response_id === undefined || body.previous_response_id === null ? undefined : JSON.stringify(body.previous_response_id).replace(/^"|"$/g, '');
  if (previous !== undefined && !stored.has(previous)) {
    return sendOpenAiError(x.res, 400, `Previous response with id '${previous}' not found.`, { param: 'previous_response_id', code: 'previous_response_not_found' });
  }
  const problem = inputProblem(Array.isArray(body.input) ? body.input : [], stored.get(previous ?? '') ?? []);
  if (problem !== undefined) return reject(problem.message, problem.param, 'invalid_value');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');

  const model = snapshots[body.model] ?? body.model;
  const id = `resp_${randomBytes(24).toString('hex')}`;
  const createdAt = Math.floor(Date.now() / 1000);
  const content = replyContent(x.behaviour, 'Hello from the fake OpenAI Responses API.');
  const u = usageOf(x.behaviour);
  const usage = responsesUsage(u);
  const reasoningItem = u.reasoning > 0 ? [{ id: randomId('rs_', 48), type: 'reasoning', summary: [] }] : [];
  const messageId = randomId('msg_', 48);
  const envelope = (status: string, output: unknown[], withUsage: boolean) => ({
    id,
    object: 'response',
    created_at: createdAt,
    status,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: 'medium', summary: null },
    store: body.store ?? true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: body.tools ?? [],
    top_p: 1,
    truncation: 'disabled',
    usage: withUsage ? usage : null,
    user: null,
    metadata: {},
  });
  const call = content.toolCall
    ? { id: randomId('fc_', 48), call_id: randomId('call_', 24), name: content.toolCall.name, arguments: JSON.stringify(content.toolCall.arguments) }
    : undefined;
  const finalItem = (text: string) =>
    call
      ? { id: call.id, type: 'function_call', status: 'completed', arguments: call.arguments, call_id: call.call_id, name: call.name }
      : { id: messageId, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', annotations: [], logprobs: [], text }] };
  const headers = { 'x-request-id': `req_${randomBytes(16).toString('hex')}`, 'openai-version': '2020-10-01', 'openai-processing-ms': '318' };
  // What previous_response_id continues: the conversation so far and this answer's items.
  if (body.store !== false) stored.set(id, [...(stored.get(previous ?? '') ?? []), ...(Array.isArray(body.input) ? (body.input as unknown[]) : []), finalItem(content.text ?? '')]);

  if (body.background === true) {
    // OpenAI keeps a background response to be read later: it cannot be run without storing it.
    if (body.store === false) return reject('Background mode requires store to be true.', 'store', 'invalid_value');
    const background = (status: string, output: unknown[], withUsage: boolean) => ({ ...envelope(status, output, withUsage), background: true });
    backgrounds.set(id, { reads: 0, done: background('completed', [...reasoningItem, finalItem(content.text ?? '')], true) });
    if (body.stream === true) {
      const parts = { content, envelope: background, finalItem, reasoningItem, messageId, call, queued: true };
      return writeStream(x.res, streamPlan(parts), x.behaviour).then(() => undefined);
    }
    return writeJson(x.res, 200, background('queued', [], false), headers);
  }
  if (body.stream !== true) {
    return writeJsonWithText(x.res, headers, content, (text) => envelope('completed', [...reasoningItem, finalItem(text)], true));
  }
  return writeStream(x.res, streamPlan({ content, envelope, finalItem, reasoningItem, messageId, call }), x.behaviour).then(() => undefined);
}

interface ResponseParts {
  content: ReplyContent;
  envelope: (status: string, output: unknown[], withUsage: boolean) => Record<string, unknown>;
  finalItem: (text: string) => Record<string, unknown>;
  reasoningItem: unknown[];
  messageId: string;
  call: { id: string; call_id: string; name: string; arguments: string } | undefined;
  /** A background response streamed: it is created queued (response.queued) before it runs. */
  queued?: boolean;
}

function streamPlan({ content, envelope, finalItem, reasoningItem, messageId, call, queued }: ResponseParts) {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) => sseEvent({ type, sequence_number: sequence++, ...fields }, { event: type });
  const index = reasoningItem.length;
  const head = [
    ...(queued
      ? [event('response.created', { response: envelope('queued', [], false) }), event('response.queued', { response: envelope('queued', [], false) })]
      : [event('response.created', { response: envelope('in_progress', [], false) })]),
    event('response.in_progress', { response: envelope('in_progress', [], false) }),
    ...reasoningItem.map((item, i) => event('response.output_item.done', { output_index: i, item })),
    call
      ? event('response.output_item.added', {
          output_index: index,
          item: { id: call.id, type: 'function_call', status: 'in_progress', arguments: '', call_id: call.call_id, name: call.name },
        })
      : event('response.output_item.added', { output_index: index, item: { id: messageId, type: 'message', status: 'in_progress', role: 'assistant', content: [] } }),
    ...(call
      ? []
      : [event('response.content_part.added', { item_id: messageId, output_index: index, content_index: 0, part: { type: 'output_text', annotations: [], text: '' } })]),
  ];
  const argumentPieces = call ? splitText(call.arguments, 3) : [];
  const body = call
    ? argumentPieces.map((delta) => event('response.function_call_arguments.delta', { item_id: call.id, output_index: index, delta }))
    : mapLazy(content.pieces(), (delta) => event('response.output_text.delta', { item_id: messageId, output_index: index, content_index: 0, delta, logprobs: [] }));
  // The done events repeat the whole text; the fake only knows it when it is small (a big body ends without it).
  const text = content.text ?? '';
  const item = finalItem(text);
  const tail = [
    ...(call
      ? [event('response.function_call_arguments.done', { item_id: call.id, output_index: index, arguments: call.arguments })]
      : [
          event('response.output_text.done', { item_id: messageId, output_index: index, content_index: 0, text, logprobs: [] }),
          event('response.content_part.done', { item_id: messageId, output_index: index, content_index: 0, part: { type: 'output_text', annotations: [], text } }),
        ]),
    event('response.output_item.done', { output_index: index, item }),
    event('response.completed', { response: envelope('completed', [...reasoningItem, item], true) }),
  ];
  return {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' },
    head,
    body,
    bodyCount: call ? argumentPieces.length : content.count,
    tail,
    garbage: Buffer.from('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n'),
    errorEvent: event('error', { code: 'server_error', message: 'The server had an error while processing your request.', param: null }),
  };
}
