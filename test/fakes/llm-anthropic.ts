// Fake Anthropic Messages API (direct; its Message Batches in llm-anthropic-batches.ts, its file uploads in
// llm-anthropic-files.ts), Claude on Vertex AI (rawPredict / streamRawPredict / count-tokens), and the Anthropic
// events Bedrock wraps in its event stream.

import type { OutgoingHttpHeaders } from 'node:http';
import { anthropicRequestId, sendAnthropicError, sendBehaviourError } from './llm-errors.ts';
import { handleMessageBatches } from './llm-anthropic-batches.ts';
import { uploadAnthropicFile } from './llm-anthropic-files.ts';
import { mapLazy, randomId, replyContent, splitText, usageOf } from './llm-reply-content.ts';
import type { ReplyContent } from './llm-reply-content.ts';
import { sseEvent, writeJson, writeJsonWithText, writeStream } from './llm-reply-writer.ts';
import { jsonObject, requestHeader } from './llm-request.ts';
import type { FakeBehaviour, FakeExchange, FakeUsage } from './llm-upstream.ts';

// 2026-10-21 is the version the current Anthropic SDKs send.
const knownVersions = new Set(['2023-06-01', '2023-01-01', '2026-10-21']);

export async function handleAnthropic(x: FakeExchange): Promise<void> {
  const key = requestHeader(x.req, 'x-api-key');
  if (key === undefined) return sendAnthropicError(x.res, 401, 'x-api-key header is required');
  if (x.opts.expectApiKey !== undefined && key !== x.opts.expectApiKey) {
    return sendAnthropicError(x.res, 401, 'invalid x-api-key');
  }
  const version = requestHeader(x.req, 'anthropic-version');
  if (version === undefined) return sendAnthropicError(x.res, 400, 'anthropic-version: header is required');
  if (!knownVersions.has(version)) return sendAnthropicError(x.res, 400, `anthropic-version: invalid version "${version}"`);
  if (x.path.startsWith('/v1/messages/batches') && handleMessageBatches(x, (params) => extra(params, 'anthropic_version') ?? messagesProblem(params))) return;
  if (x.req.method === 'POST' && x.path === '/v1/files') return uploadAnthropicFile(x);
  if (x.req.method !== 'POST' || (x.path !== '/v1/messages' && x.path !== '/v1/messages/count_tokens')) {
    return sendAnthropicError(x.res, 404, `Not found: ${x.req.method} ${x.path}`);
  }
  const body = jsonObject(x.json);
  if (body === null) return sendAnthropicError(x.res, 400, 'The request body is not valid JSON.');
  const problem = required(body, 'model') ?? extra(body, 'anthropic_version') ?? (x.path === '/v1/messages' ? messagesProblem(body) : messagesListProblem(body));
  if (problem) return sendAnthropicError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'anthropic');
  if (x.path === '/v1/messages/count_tokens') return countTokens(x);
  return replyMessages(x, String(body.model), body.stream === true, wantsThinking(body));
}

/** Claude on Vertex AI: the model is in the URL, `anthropic_version` in the body. */
export async function handleClaudeOnVertex(x: FakeExchange, model: string, method: string): Promise<void> {
  const body = jsonObject(x.json);
  if (body === null) return sendAnthropicError(x.res, 400, 'The request body is not valid JSON.');
  if (model === 'count-tokens') {
    // count-tokens has no model in its URL, so here the body names it.
    const problem = required(body, 'model') ?? messagesListProblem(body);
    if (problem) return sendAnthropicError(x.res, 400, problem);
    if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'anthropic');
    return countTokens(x);
  }
  const problem =
    extra(body, 'model') ??
    required(body, 'anthropic_version') ??
    messagesProblem(body) ??
    // Stricter than Vertex is known to be: a mismatch here is a proxy bug worth catching.
    (method === 'streamRawPredict' && body.stream !== true ? 'stream: streamRawPredict requires "stream": true' : undefined) ??
    (method === 'rawPredict' && body.stream === true ? 'stream: use streamRawPredict for "stream": true' : undefined);
  if (problem) return sendAnthropicError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'anthropic');
  // Vertex ids look like claude-sonnet-4@20250514; the response names the model the way the direct API does.
  return replyMessages(x, model.replace('@', '-'), method === 'streamRawPredict', wantsThinking(body));
}

/** The checks Anthropic applies to a Messages body (model and version checks are the caller's). */
export function messagesProblem(body: Record<string, unknown>): string | undefined {
  if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
  return messagesListProblem(body) ?? toolsProblem(body) ?? thinkingProblem(body) ?? toolPairingProblem(body) ?? thinkingBlocksProblem(body);
}

/** Thinking signatures this fake issued: Anthropic refuses a thinking block it did not sign. */
const issuedSignatures = new Set<string>();

type Block = Record<string, unknown>;

function contentBlocks(message: unknown): Block[] {
  const content = jsonObject(message)?.content;
  return Array.isArray(content) ? content.map((b) => jsonObject(b) ?? {}) : [];
}

/** Every tool_use answered by a tool_result in the next message, and no tool_result without its tool_use. */
function toolPairingProblem(body: Record<string, unknown>): string | undefined {
  const messages = body.messages as unknown[];
  for (let i = 0; i < messages.length; i++) {
    const role = jsonObject(messages[i])?.role;
    const blocks = contentBlocks(messages[i]);
    if (role === 'assistant') {
      const uses = blocks.filter((b) => b.type === 'tool_use').map((b) => String(b.id));
      if (uses.length === 0 || i + 1 >= messages.length) continue;
      const answered = new Set(
        contentBlocks(messages[i + 1])
          .filter((b) => b.type === 'tool_result')
          .map((b) => String(b.tool_use_id)),
      );
      const missing = uses.filter((id) => !answered.has(id));
      if (missing.length > 0) {
        return `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
      }
    } else {
      const previous =
        i > 0
          ? contentBlocks(messages[i - 1])
              .filter((b) => b.type === 'tool_use')
              .map((b) => String(b.id))
          : [];
      const k = blocks.findIndex((b) => b.type === 'tool_result' && !previous.includes(String(b.tool_use_id)));
      if (k >= 0) {
        return `messages.${i}.content.${k}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(blocks[k]!.tool_use_id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
      }
    }
  }
  return undefined;
}

/**
 * Thinking blocks are Anthropic's own, signed; with thinking on, the assistant turn whose tool calls the
 * conversation ends by answering must start with its thinking.
 */
function thinkingBlocksProblem(body: Record<string, unknown>): string | undefined {
  const messages = body.messages as unknown[];
  for (let i = 0; i < messages.length; i++) {
    const k = contentBlocks(messages[i]).findIndex((b) => b.type === 'thinking' && !issuedSignatures.has(String(b.signature)));
    if (k >= 0) return `messages.${i}.content.${k}: Invalid \`signature\` in \`thinking\` block`;
  }
  const last = messages.length - 1;
  if (!wantsThinking(body) || last < 1 || !contentBlocks(messages[last]).some((b) => b.type === 'tool_result')) return undefined;
  const first = contentBlocks(messages[last - 1])[0]?.type;
  if (first === 'thinking' || first === 'redacted_thinking') return undefined;
  return `messages.${last - 1}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(first)}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks).`;
}

function toolsProblem(body: Record<string, unknown>): string | undefined {
  if (body.tools === undefined) return undefined;
  if (!Array.isArray(body.tools)) return 'tools: Input should be a valid list';
  const bad = body.tools.findIndex((t) => {
    const tool = jsonObject(t);
    // Server tools (web search, bash, text editor) carry a `type`; custom tools a name and an input schema.
    return tool === null || typeof tool.name !== 'string' || (tool.type === undefined && jsonObject(tool.input_schema) === null);
  });
  return bad >= 0 ? `tools.${bad}.input_schema: Field required` : undefined;
}

/** Extended thinking: a budget of at least 1024 tokens below max_tokens, or adaptive; never with a forced tool. */
function thinkingProblem(body: Record<string, unknown>): string | undefined {
  const thinking = jsonObject(body.thinking);
  if (body.thinking === undefined || thinking?.type === 'disabled' || thinking?.type === 'adaptive') return undefined;
  if (thinking === null || thinking.type !== 'enabled') return "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'";
  const budget = thinking.budget_tokens;
  if (typeof budget !== 'number' || budget < 1024) return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
  if (budget >= (body.max_tokens as number)) return '`max_tokens` must be greater than `thinking.budget_tokens`';
  const choice = jsonObject(body.tool_choice)?.type;
  if (choice === 'any' || choice === 'tool') return 'Thinking may not be enabled when tool_choice forces tool use.';
  return undefined;
}

/** Whether a Messages body asks for thinking (the reply then starts with a thinking block). */
export function wantsThinking(body: Record<string, unknown> | null): boolean {
  const type = jsonObject(body?.thinking)?.type;
  return type === 'enabled' || type === 'adaptive';
}

function messagesListProblem(body: Record<string, unknown>): string | undefined {
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: Field required';
  const badRole = body.messages.findIndex((m) => {
    const role = jsonObject(m)?.role;
    return role !== 'user' && role !== 'assistant';
  });
  if (badRole >= 0) return `messages.${badRole}.role: Input should be 'user' or 'assistant'`;
  return undefined;
}

function required(body: Record<string, unknown>, field: string): string | undefined {
  return body[field] === undefined ? `${field}: Field required` : undefined;
}

function extra(body: Record<string, unknown>, field: string): string | undefined {
  return body[field] !== undefined ? `${field}: Extra inputs are not permitted` : undefined;
}

function countTokens(x: FakeExchange): void {
  const u = usageOf(x.behaviour);
  writeJson(x.res, 200, { input_tokens: u.input + u.cacheRead + u.cacheWrite + u.cacheWrite1h }, { 'request-id': anthropicRequestId() });
}

async function replyMessages(x: FakeExchange, model: string, stream: boolean, thinking: boolean): Promise<void> {
  const headers: OutgoingHttpHeaders = { 'request-id': anthropicRequestId() };
  const reply = anthropicReply(x.behaviour, model, thinking);
  if (!stream) return writeJsonWithText(x.res, headers, reply.content, reply.message);
  const sse = (event: AnthropicEvent) => sseEvent(event, { event: event.type });
  const events = anthropicStreamEvents(reply, { ping: true });
  return writeStream(
    x.res,
    {
      headers: { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' },
      head: events.head.map(sse),
      body: mapLazy(events.body, sse),
      bodyCount: events.bodyCount,
      tail: events.tail.map(sse),
      garbage: Buffer.from('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_del\n\n'),
      errorEvent: sse(events.error),
    },
    x.behaviour,
  );
}

export interface AnthropicReply {
  id: string;
  model: string;
  content: ReplyContent;
  usage: Required<FakeUsage>;
  toolUseId: string;
  /** A thinking block before the answer (the request asked for extended or adaptive thinking). */
  thinking?: { text: string; signature: string };
  /** The non-streaming Messages response around a text. */
  message: (text: string) => Record<string, unknown>;
}

export function anthropicReply(b: FakeBehaviour, model: string, thinking = false): AnthropicReply {
  const content = replyContent(b, 'Hello from the fake Claude upstream.');
  const usage = usageOf(b);
  const id = randomId('msg_01', 22);
  const toolUseId = randomId('toolu_01', 22);
  const call = content.toolCall;
  const thought = thinking ? { text: 'The user wants a short answer; nothing needs looking up.', signature: Buffer.from(randomId('sig', 48)).toString('base64') } : undefined;
  if (thought) issuedSignatures.add(thought.signature);
  const thinkingBlocks = thought ? [{ type: 'thinking', thinking: thought.text, signature: thought.signature }] : [];
  return {
    id,
    model,
    content,
    usage,
    toolUseId,
    ...(thought ? { thinking: thought } : {}),
    message: (text) => ({
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [...thinkingBlocks, ...(call ? [{ type: 'tool_use', id: toolUseId, name: call.name, input: call.arguments }] : [{ type: 'text', text }])],
      stop_reason: call ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { ...inputUsage(usage), output_tokens: usage.output + usage.reasoning, service_tier: 'standard' },
    }),
  };
}

/** Input-side usage fields: input_tokens excludes cache reads and writes. */
export function inputUsage(u: Required<FakeUsage>): Record<string, unknown> {
  return {
    input_tokens: u.input,
    cache_creation_input_tokens: u.cacheWrite + u.cacheWrite1h,
    cache_read_input_tokens: u.cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite, ephemeral_1h_input_tokens: u.cacheWrite1h },
  };
}

export interface AnthropicEvent {
  type: string;
  [field: string]: unknown;
}

export interface AnthropicStreamEvents {
  head: AnthropicEvent[];
  body: Iterable<AnthropicEvent>;
  bodyCount: number;
  /** content_block_stop, message_delta, message_stop (always last). */
  tail: AnthropicEvent[];
  error: AnthropicEvent;
}

/** message_start … message_stop; message_delta usage is cumulative and repeats the input fields. */
export function anthropicStreamEvents(reply: AnthropicReply, opts: { ping: boolean }): AnthropicStreamEvents {
  const { usage, content } = reply;
  const call = content.toolCall;
  const start: AnthropicEvent = {
    type: 'message_start',
    message: {
      id: reply.id,
      type: 'message',
      role: 'assistant',
      model: reply.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...inputUsage(usage), output_tokens: 1, service_tier: 'standard' },
    },
  };
  // With thinking, block 0 is the thinking (its text, then its signature) and the answer is block 1.
  const thinkingEvents: AnthropicEvent[] = reply.thinking
    ? [
        { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
        ...splitText(reply.thinking.text, 2).map((thinking) => ({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking } })),
        { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: reply.thinking.signature } },
        { type: 'content_block_stop', index: 0 },
      ]
    : [];
  const index = reply.thinking ? 1 : 0;
  const blockStart: AnthropicEvent = {
    type: 'content_block_start',
    index,
    content_block: call ? { type: 'tool_use', id: reply.toolUseId, name: call.name, input: {} } : { type: 'text', text: '' },
  };
  const argumentPieces = call ? splitText(JSON.stringify(call.arguments), 3) : [];
  const body = call
    ? argumentPieces.map((partial_json) => ({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } }))
    : mapLazy(content.pieces(), (text) => ({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } }));
  const { cache_creation: _nested, ...flatInput } = inputUsage(usage);
  return {
    head: opts.ping ? [start, ...thinkingEvents, blockStart, { type: 'ping' }] : [start, ...thinkingEvents, blockStart],
    body,
    bodyCount: call ? argumentPieces.length : content.count,
    tail: [
      { type: 'content_block_stop', index },
      {
        type: 'message_delta',
        delta: { stop_reason: call ? 'tool_use' : 'end_turn', stop_sequence: null },
        usage: { ...flatInput, output_tokens: usage.output + usage.reasoning },
      },
      { type: 'message_stop' },
    ],
    error: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
  };
}
