// OpenAI chat completions ↔ Anthropic Messages API (direct, on Vertex AI and on Bedrock: the body is the same,
// the route adds its envelope). Pure functions and one stateful stream translator fed decoded events.
// Field mappings: the parameter table in docs/openai-gateway.md.

import { AnthropicStreamUsage, normaliseAnthropicUsage } from '../wire-formats/anthropic/usage.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import type { TokenUsage } from '../usage/usage.ts';
import type { AnthropicBlock, AnthropicMessagesBody, AnthropicTextBlock, AnthropicTool, AnthropicToolChoice, AnthropicTurn } from './anthropic-request-body.ts';
import { readChatRequest } from './chat-content.ts';
import type { ChatContentPart, ChatRequest, JsonMode } from './chat-pivot.ts';
import { EFFORT_BUDGETS, type ChatExtensions, type ThinkingBlock } from './chat-extensions.ts';
import { chatUsage, chunk, usageChunk, type ChatChunk, type ChatCompletion, type ChatToolCall, type ChunkIdentity, type FinishReason } from './openai-chat.ts';
import { invalidParameter, unsupportedParameter } from './openai-error.ts';

/** Anthropic requires max_tokens; chat completions does not. Every current Claude model can write this many. */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096;

/** The forced tool that carries a JSON answer when response_format asks for JSON (Claude has no JSON mode). */
export const JSON_RESPONSE_TOOL = 'json_response';

/** The smallest thinking budget Anthropic accepts. */
const MIN_THINKING_BUDGET = 1024;

export interface AnthropicRequestOptions {
  /** Whether the route accepts images by URL (the Anthropic API does; Vertex AI and Bedrock take base64 only). */
  imageUrls: boolean;
  /** Route name, for messages. */
  route: string;
  /** What a Responses caller asked for beyond chat completions (thinking). */
  extensions?: ChatExtensions | undefined;
}

export interface AnthropicRequest {
  /** Messages API body, with `stream` when streaming (route envelopes adjust it). */
  body: AnthropicMessagesBody;
  stream: boolean;
  includeUsage: boolean;
  /** The answer comes back as the forced JSON tool's input, to be turned into message content. */
  jsonMode: boolean;
}

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** The caller's chat-completions JSON as a Messages API body (read into the chat pivot first). */
export function toAnthropicRequest(json: Record<string, unknown>, opts: AnthropicRequestOptions): AnthropicRequest {
  const request = readChatRequest(json, 'anthropic', 'Anthropic');
  const thinking = thinkingBudget(opts.extensions);
  const { system, turns } = anthropicTurns(request, opts, thinking);
  // max_tokens counts the thinking too: a default leaves the usual room for the answer beside the budget.
  const max = request.maxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS + (thinking ?? 0);
  const body: AnthropicMessagesBody = { max_tokens: max, messages: turns };
  if (thinking !== undefined) body.thinking = { type: 'enabled', budget_tokens: thinkingTokens(thinking, max) };
  if (system.length > 0) body.system = system;
  addSampling(request, body);
  const jsonMode = addTools(request, opts, thinking, body);
  if (request.stream) body.stream = true;
  return { body, stream: request.stream, includeUsage: request.includeUsage, jsonMode };
}

/** The chat messages as Anthropic's system blocks and alternating turns. */
function anthropicTurns(request: ChatRequest, opts: AnthropicRequestOptions, thinking: number | undefined): { system: AnthropicTextBlock[]; turns: AnthropicTurn[] } {
  const system: AnthropicTextBlock[] = [];
  const turns: AnthropicTurn[] = [];
  const push = (role: AnthropicTurn['role'], blocks: AnthropicBlock[]) => {
    if (blocks.length === 0) return;
    const last = turns[turns.length - 1];
    // Anthropic wants user and assistant turns to alternate: consecutive same-role messages become one turn.
    if (last && last.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        if (message.text !== '') system.push({ type: 'text', text: message.text });
        break;
      case 'user':
        push(
          'user',
          message.content.map((part) => userBlock(part, opts)),
        );
        break;
      case 'assistant': {
        const blocks: AnthropicBlock[] = thinking ? (opts.extensions?.thinking?.get(message.index) ?? []).map(thinkingBlock) : [];
        if (message.text !== '') blocks.push({ type: 'text', text: message.text });
        for (const call of message.toolCalls) blocks.push({ type: 'tool_use', id: call.id, name: call.name, input: call.input });
        push('assistant', blocks);
        break;
      }
      case 'tool':
        push('user', [{ type: 'tool_result', tool_use_id: message.toolCallId, content: message.text }]);
        break;
    }
  }
  return { system, turns };
}

/** One part of a user message as Anthropic's block: text, or an image by URL (where the route takes one) or base64. */
function userBlock(part: ChatContentPart, opts: AnthropicRequestOptions): AnthropicBlock {
  if (part.type === 'text') return { type: 'text', text: part.text };
  if (part.source.kind === 'url') {
    if (!opts.imageUrls) {
      throw unsupportedParameter(part.param, `${part.param}: route ${opts.route} takes images only as base64 data: URLs, not by URL`);
    }
    return { type: 'image', source: { type: 'url', url: part.source.url } };
  }
  if (!IMAGE_TYPES.has(part.source.mediaType)) {
    throw unsupportedParameter(part.param, `${part.param}: Claude accepts image/jpeg, image/png, image/gif and image/webp, not ${part.source.mediaType}`);
  }
  return { type: 'image', source: { type: 'base64', media_type: part.source.mediaType, data: part.source.data } };
}

/** The thinking budget that fits below max_tokens; refused when less than Anthropic's minimum is left. */
function thinkingTokens(thinking: number, max: number): number {
  const budget = Math.min(thinking, max - 1);
  if (budget < MIN_THINKING_BUDGET) {
    throw invalidParameter(
      'max_output_tokens',
      `max_output_tokens ${max} leaves no room for Claude's thinking, which needs at least ${MIN_THINKING_BUDGET} tokens below the limit`,
    );
  }
  return budget;
}

/** Stop sequences, temperature (Anthropic's 0 to 1), top_p and the end user. */
function addSampling(request: ChatRequest, body: AnthropicMessagesBody): void {
  if (request.stop) body.stop_sequences = request.stop;
  const temperature = request.temperature;
  if (temperature !== undefined) {
    if (temperature > 1) throw invalidParameter('temperature', `temperature ${temperature} is out of range for Anthropic models, which accept 0 to 1`);
    body.temperature = temperature;
  }
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.user !== undefined) body.metadata = { user_id: request.user };
}

/** Tools and tool_choice, or the forced JSON tool for a JSON response_format; whether the answer is that tool's input. */
function addTools(request: ChatRequest, opts: AnthropicRequestOptions, thinking: number | undefined, body: AnthropicMessagesBody): boolean {
  const { tools, toolChoice: choice, responseFormat: format } = request;
  if (format.kind !== 'text') {
    if (thinking !== undefined) {
      throw unsupportedParameter('reasoning', 'Claude cannot think and answer in JSON at once: its JSON answer is a forced tool call, which extended thinking refuses');
    }
    if (tools.length > 0) {
      throw unsupportedParameter('response_format', 'response_format json cannot be combined with tools for Anthropic models: Claude returns JSON through a forced tool');
    }
    body.tools = [jsonTool(format)];
    body.tool_choice = { type: 'tool', name: JSON_RESPONSE_TOOL };
    return true;
  }
  if (tools.length > 0) {
    body.tools = tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters ?? { type: 'object', properties: {} },
    }));
    const anthropicChoice: AnthropicToolChoice | undefined =
      choice === undefined ? undefined : choice.kind === 'function' ? { type: 'tool', name: choice.name } : { type: choice.kind === 'required' ? 'any' : choice.kind };
    if ((!request.parallelToolCalls || opts.extensions?.singleToolCall === true) && choice?.kind !== 'none') {
      body.tool_choice = { ...(anthropicChoice ?? { type: 'auto' }), disable_parallel_tool_use: true };
    } else if (anthropicChoice) {
      body.tool_choice = anthropicChoice;
    }
  } else if (choice !== undefined && choice.kind !== 'none') {
    throw invalidParameter('tool_choice', 'tool_choice needs tools');
  }
  return false;
}

/** Claude's thinking budget for what the caller asked, or undefined for no thinking. */
function thinkingBudget(extensions: ChatExtensions | undefined): number | undefined {
  const reasoning = extensions?.reasoning;
  if (reasoning === undefined || reasoning.budget === 0) return undefined;
  return reasoning.budget === 'dynamic' ? EFFORT_BUDGETS.medium : Math.max(reasoning.budget, MIN_THINKING_BUDGET);
}

function thinkingBlock(block: ThinkingBlock): AnthropicBlock {
  return block.kind === 'thinking' ? { type: 'thinking', thinking: block.thinking, signature: block.signature } : { type: 'redacted_thinking', data: block.data };
}

function jsonTool(format: Exclude<JsonMode, { kind: 'text' }>): AnthropicTool {
  if (format.kind === 'json_schema' && format.schema.type !== undefined && format.schema.type !== 'object') {
    throw unsupportedParameter('response_format.json_schema.schema', 'for Anthropic models the JSON schema must describe an object (type: object)');
  }
  return {
    name: JSON_RESPONSE_TOOL,
    description: format.kind === 'json_schema' ? `Respond with a JSON object named ${format.name} matching this schema.` : 'Respond with a JSON object.',
    input_schema: format.kind === 'json_schema' ? format.schema : { type: 'object' },
  };
}

export function anthropicFinishReason(stopReason: unknown, jsonMode: boolean): FinishReason {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return jsonMode ? 'stop' : 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop'; // end_turn, stop_sequence, pause_turn
  }
}

export interface ResponseContext {
  /** Model to report when the upstream names none. */
  model: string;
  jsonMode: boolean;
  created: number;
  /** Usage from elsewhere when the body has none (Bedrock's token-count headers). */
  fallbackUsage?: TokenUsage | null;
  /** Keep the thinking blocks (ChatExtensions.returnReasoning); hidden otherwise, as OpenAI hides its reasoning. */
  reasoning?: boolean;
}

/** A Messages API response as a chat.completion. */
export function fromAnthropicMessage(message: Record<string, unknown>, ctx: ResponseContext): ChatCompletion {
  let text = '';
  const calls: ChatToolCall[] = [];
  const thinking: ThinkingBlock[] = [];
  for (const block of Array.isArray(message.content) ? message.content : []) {
    if (!isRecord(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') text += block.text;
    else if (block.type === 'tool_use') {
      if (ctx.jsonMode && block.name === JSON_RESPONSE_TOOL) text += JSON.stringify(block.input ?? {});
      else calls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
    } else if (ctx.reasoning === true && block.type === 'thinking') {
      thinking.push({
        kind: 'thinking',
        thinking: typeof block.thinking === 'string' ? block.thinking : '',
        signature: typeof block.signature === 'string' ? block.signature : '',
      });
    } else if (ctx.reasoning === true && block.type === 'redacted_thinking' && typeof block.data === 'string') {
      thinking.push({ kind: 'redacted', data: block.data });
    }
  }
  const usage = normaliseAnthropicUsage(message.usage) ?? ctx.fallbackUsage ?? null;
  const out: ChatCompletion = {
    id: typeof message.id === 'string' ? message.id : 'msg_unknown',
    object: 'chat.completion',
    created: ctx.created,
    model: typeof message.model === 'string' ? message.model : ctx.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && calls.length > 0 ? null : text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
          ...(thinking.length > 0 ? { thinking } : {}),
        },
        logprobs: null,
        finish_reason: anthropicFinishReason(message.stop_reason, ctx.jsonMode),
      },
    ],
    system_fingerprint: null,
  };
  if (usage) out.usage = chatUsage(usage);
  return out;
}

/** What a stream translator hands back for one upstream event. */
export interface StreamStep {
  chunks: ChatChunk[];
  /** The upstream reported a failure inside the stream: send it and stop. */
  error?: { message: string; code: string | null };
}

/**
 * Anthropic stream events (message_start, content_block_*, message_delta, message_stop, error) → OpenAI
 * chunks. Text deltas become content deltas; a tool_use block becomes one tool call (id and name first, then
 * argument pieces); message_delta's stop_reason becomes the finish chunk; usage merges as the extractor does.
 */
export class AnthropicChunkTranslator {
  readonly #identity: ChunkIdentity;
  readonly #jsonMode: boolean;
  readonly #reasoning: boolean;
  readonly #usage = new AnthropicStreamUsage();
  /** content block index → tool call index (-1: the JSON answer tool, streamed as content). */
  readonly #toolIndex = new Map<number, number>();
  /** Tool calls that have received argument text; one without any gets `{}` when its block stops. */
  readonly #toolArgs = new Set<number>();
  #tools = 0;
  #started = false;
  #finished = false;
  #stopped = false;

  /** `reasoning`: pass thinking on as ChunkDelta.thinking (ChatExtensions.returnReasoning); hidden otherwise. */
  constructor(identity: ChunkIdentity, jsonMode: boolean, reasoning = false) {
    this.#identity = { ...identity };
    this.#jsonMode = jsonMode;
    this.#reasoning = reasoning;
  }

  get identity(): ChunkIdentity {
    return this.#identity;
  }

  event(type: string, json: string): StreamStep {
    let event: unknown;
    try {
      event = JSON.parse(json);
    } catch {
      return { chunks: [], error: { message: 'malformed JSON in an upstream stream event', code: 'upstream_stream_error' } };
    }
    if (!isRecord(event)) return { chunks: [] };
    const kind = type !== '' ? type : typeof event.type === 'string' ? event.type : '';
    this.#usage.event(kind, json);
    const chunks: ChatChunk[] = [];
    switch (kind) {
      case 'message_start':
        this.#messageStart(event, chunks);
        break;
      case 'content_block_start':
        this.#blockStart(event, chunks);
        break;
      case 'content_block_delta':
        this.#blockDelta(event, chunks);
        break;
      case 'message_delta': {
        const delta = isRecord(event.delta) ? event.delta : {};
        if (delta.stop_reason !== undefined && delta.stop_reason !== null && !this.#finished) {
          this.#finished = true;
          chunks.push(chunk(this.#identity, 0, {}, anthropicFinishReason(delta.stop_reason, this.#jsonMode)));
        }
        break;
      }
      case 'content_block_stop':
        this.#blockStop(event, chunks);
        break;
      case 'message_stop':
        this.#stopped = true;
        break;
      case 'error': {
        const error = isRecord(event.error) ? event.error : {};
        return {
          chunks,
          error: {
            message: typeof error.message === 'string' ? error.message : 'upstream stream error',
            code: typeof error.type === 'string' ? error.type : null,
          },
        };
      }
      default:
        break; // ping
    }
    return { chunks };
  }

  #messageStart(event: Record<string, unknown>, chunks: ChatChunk[]): void {
    const message = isRecord(event.message) ? event.message : {};
    if (typeof message.id === 'string') this.#identity.id = message.id;
    if (typeof message.model === 'string') this.#identity.model = message.model;
    chunks.push(this.#roleChunk());
  }

  #blockStart(event: Record<string, unknown>, chunks: ChatChunk[]): void {
    const block = isRecord(event.content_block) ? event.content_block : {};
    const index = typeof event.index === 'number' ? event.index : 0;
    if (!this.#started) chunks.push(this.#roleChunk());
    if (block.type === 'tool_use') {
      if (this.#jsonMode && block.name === JSON_RESPONSE_TOOL) {
        this.#toolIndex.set(index, -1);
      } else {
        const toolIndex = this.#tools++;
        this.#toolIndex.set(index, toolIndex);
        chunks.push(
          chunk(this.#identity, 0, {
            tool_calls: [{ index: toolIndex, id: String(block.id), type: 'function', function: { name: String(block.name), arguments: '' } }],
          }),
        );
      }
    } else if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') {
      chunks.push(chunk(this.#identity, 0, { content: block.text }));
    } else if (this.#reasoning && block.type === 'thinking' && typeof block.thinking === 'string' && block.thinking !== '') {
      chunks.push(chunk(this.#identity, 0, { thinking: { block: index, text: block.thinking } }));
    } else if (this.#reasoning && block.type === 'redacted_thinking' && typeof block.data === 'string') {
      chunks.push(chunk(this.#identity, 0, { thinking: { block: index, redacted: block.data } }));
    }
  }

  #blockDelta(event: Record<string, unknown>, chunks: ChatChunk[]): void {
    const delta = isRecord(event.delta) ? event.delta : {};
    const index = typeof event.index === 'number' ? event.index : 0;
    if (delta.type === 'text_delta' && typeof delta.text === 'string') {
      chunks.push(chunk(this.#identity, 0, { content: delta.text }));
    } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string' && delta.partial_json !== '') {
      const toolIndex = this.#toolIndex.get(index);
      if (toolIndex === -1) {
        this.#toolArgs.add(-1);
        chunks.push(chunk(this.#identity, 0, { content: delta.partial_json }));
      } else if (toolIndex !== undefined) {
        this.#toolArgs.add(toolIndex);
        chunks.push(chunk(this.#identity, 0, { tool_calls: [{ index: toolIndex, function: { arguments: delta.partial_json } }] }));
      }
    } else if (this.#reasoning && delta.type === 'thinking_delta' && typeof delta.thinking === 'string') {
      chunks.push(chunk(this.#identity, 0, { thinking: { block: index, text: delta.thinking } }));
    } else if (this.#reasoning && delta.type === 'signature_delta' && typeof delta.signature === 'string') {
      chunks.push(chunk(this.#identity, 0, { thinking: { block: index, signature: delta.signature } }));
    }
    // otherwise thinking stays hidden, as OpenAI hides its reasoning
  }

  #blockStop(event: Record<string, unknown>, chunks: ChatChunk[]): void {
    // A tool called without arguments streams no JSON at all; callers parse the arguments, so send `{}`.
    const toolIndex = this.#toolIndex.get(typeof event.index === 'number' ? event.index : 0);
    if (toolIndex !== undefined && !this.#toolArgs.has(toolIndex)) {
      this.#toolArgs.add(toolIndex);
      chunks.push(chunk(this.#identity, 0, toolIndex === -1 ? { content: '{}' } : { tool_calls: [{ index: toolIndex, function: { arguments: '{}' } }] }));
    }
  }

  /**
   * The end of the upstream stream: the usage chunk (when asked for), or the failure when the stream stopped
   * before message_stop. `cut` names a transport failure already known.
   */
  end(cut?: string): StreamStep {
    const result = this.#usage.result(cut);
    if (result.streamError !== undefined || !this.#stopped) {
      return { chunks: [], error: { message: result.streamError ?? 'stream ended before message_stop', code: 'upstream_stream_error' } };
    }
    const chunks: ChatChunk[] = [];
    if (!this.#finished) chunks.push(chunk(this.#identity, 0, {}, 'stop'));
    if (this.#identity.includeUsage && result.usage) chunks.push(usageChunk(this.#identity, chatUsage(result.usage)));
    return { chunks };
  }

  #roleChunk(): ChatChunk {
    this.#started = true;
    return chunk(this.#identity, 0, { role: 'assistant', content: '' });
  }
}
