// OpenAI chat completions ↔ Bedrock's Converse API, for the models Bedrock serves other than Claude (Amazon
// Nova, Meta Llama, Mistral, …; ADR 0914). Pure functions and one stateful stream translator fed the decoded
// ConverseStream members (messageStart, contentBlockStart/Delta/Stop, messageStop, metadata).
// Field mappings: the parameter table in docs/openai-gateway.md.

import { isRecord } from '../../../contracts/json-record.ts';
import { normaliseConverseUsage } from '../wire-formats/bedrock/usage.ts';
import { readChatRequest } from './chat-content.ts';
import type { ConverseBlock, ConverseBody, ConverseText, ConverseInferenceConfig, ConverseToolConfig, ConverseTurn } from './converse-request-body.ts';
import type { ChatContentPart, ChatRequest } from './chat-pivot.ts';
import type { ChatExtensions } from './chat-extensions.ts';
import { chatUsage, chunk, usageChunk, type ChatChunk, type ChatCompletion, type ChatToolCall, type ChunkIdentity, type FinishReason } from './openai-chat.ts';
import type { StreamStep } from './openai-anthropic.ts';
import { invalidParameter, unsupportedParameter } from './openai-error.ts';

export interface ConverseRequest {
  /** Converse body: the model and the streaming choice are in the path. */
  body: ConverseBody;
  stream: boolean;
  includeUsage: boolean;
}

/** Converse's image formats, by the media type of a data: URL. */
const IMAGE_FORMATS: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

function imageBlock(part: Extract<ChatContentPart, { type: 'image' }>, route: string): ConverseBlock {
  if (part.source.kind === 'url') {
    throw unsupportedParameter(part.param, `${part.param}: Bedrock's Converse API (route ${route}) takes images as bytes, so send them as base64 data: URLs, not by URL`);
  }
  const format = IMAGE_FORMATS[part.source.mediaType];
  if (format === undefined) {
    throw unsupportedParameter(part.param, `${part.param}: Converse accepts image/png, image/jpeg, image/gif and image/webp, not ${part.source.mediaType}`);
  }
  return { image: { format, source: { bytes: part.source.data } } };
}

interface ConverseMessages {
  system: ConverseText[];
  messages: ConverseTurn[];
  /** The conversation holds toolUse or toolResult blocks, which Converse reads only with the tools declared. */
  holdsToolBlocks: boolean;
}

function converseMessages(request: ChatRequest, route: string): ConverseMessages {
  const system: ConverseText[] = [];
  const messages: ConverseTurn[] = [];
  let holdsToolBlocks = false;
  const push = (role: ConverseTurn['role'], blocks: ConverseBlock[]) => {
    if (blocks.length === 0) return;
    const last = messages[messages.length - 1];
    // Converse wants user and assistant turns to alternate: consecutive same-role messages become one turn.
    if (last && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        if (message.text !== '') system.push({ text: message.text });
        break;
      case 'user':
        push(
          'user',
          message.content.map((part) => (part.type === 'text' ? { text: part.text } : imageBlock(part, route))),
        );
        break;
      case 'assistant': {
        const blocks: ConverseBlock[] = [];
        if (message.text !== '') blocks.push({ text: message.text });
        for (const call of message.toolCalls) blocks.push({ toolUse: { toolUseId: call.id, name: call.name, input: call.input } });
        holdsToolBlocks ||= blocks.some((block) => 'toolUse' in block);
        push('assistant', blocks);
        break;
      }
      case 'tool':
        holdsToolBlocks = true;
        push('user', [{ toolResult: { toolUseId: message.toolCallId, content: [{ text: message.text }] } }]);
        break;
    }
  }
  if (messages.length === 0) throw invalidParameter('messages', 'messages must hold at least one user, assistant or tool message');
  return { system, messages, holdsToolBlocks };
}

function inferenceConfig(request: ChatRequest): ConverseInferenceConfig {
  const config: ConverseInferenceConfig = {};
  if (request.maxTokens !== undefined) config.maxTokens = request.maxTokens;
  const temperature = request.temperature;
  if (temperature !== undefined) {
    if (temperature > 1) throw invalidParameter('temperature', `temperature ${temperature} is out of range for Bedrock's Converse API, which accepts 0 to 1`);
    config.temperature = temperature;
  }
  if (request.topP !== undefined) config.topP = request.topP;
  if (request.stop) config.stopSequences = request.stop;
  return config;
}

/** `toolConfig`, or undefined when no tools go upstream. */
function toolConfig(request: ChatRequest, holdsToolBlocks: boolean): ConverseToolConfig | undefined {
  const { tools, toolChoice: choice } = request;
  if (tools.length === 0) {
    if (choice !== undefined && choice.kind !== 'none') throw invalidParameter('tool_choice', 'tool_choice needs tools');
    if (holdsToolBlocks) {
      throw invalidParameter('tools', "the conversation holds tool calls or results, which Bedrock's Converse API reads only with the tools declared: send tools");
    }
    return undefined;
  }
  if (choice?.kind === 'none') {
    // Converse's toolChoice has no "none"; leaving the tools out forbids calls, unless the conversation needs them.
    if (holdsToolBlocks) {
      throw unsupportedParameter(
        'tool_choice',
        "tool_choice none cannot be sent to Bedrock's Converse API for a conversation that holds tool calls: Converse needs the tools then and cannot forbid calling them",
      );
    }
    return undefined;
  }
  const config: ConverseToolConfig = {
    tools: tools.map((t) => ({
      toolSpec: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        inputSchema: { json: t.parameters ?? { type: 'object', properties: {} } },
      },
    })),
  };
  if (choice !== undefined) config.toolChoice = choice.kind === 'auto' ? { auto: {} } : choice.kind === 'required' ? { any: {} } : { tool: { name: choice.name } };
  return config;
}

/** The caller's chat-completions JSON as a Converse body (read into the chat pivot first). `route` names the route in refusals. */
export function toConverseRequest(json: Record<string, unknown>, opts: { route: string; extensions?: ChatExtensions | undefined }): ConverseRequest {
  const request = readChatRequest(json, 'converse', "Bedrock's Converse API");
  const reasoning = opts.extensions?.reasoning;
  if (reasoning !== undefined && reasoning.budget !== 0) {
    throw unsupportedParameter('reasoning', "reasoning is not translated for Bedrock's Converse API: each model family takes its own thinking settings there");
  }
  const { system, messages, holdsToolBlocks } = converseMessages(request, opts.route);
  const body: ConverseBody = { messages };
  if (system.length > 0) body.system = system;
  const config = inferenceConfig(request);
  if (Object.keys(config).length > 0) body.inferenceConfig = config;
  const tools = toolConfig(request, holdsToolBlocks);
  if (tools !== undefined) body.toolConfig = tools;
  return { body, stream: request.stream, includeUsage: request.includeUsage };
}

export function converseFinishReason(stopReason: unknown): FinishReason {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'guardrail_intervened':
    case 'content_filtered':
      return 'content_filter';
    default:
      return 'stop'; // end_turn, stop_sequence, malformed_model_output, malformed_tool_use
  }
}

export interface ConverseResponseContext {
  /** Converse's answer names no model: the one sent. */
  model: string;
  created: number;
  /** The completion's id (Converse's answer has none: the gateway gives its request id). */
  id: string;
  /** Keep only the first tool call: Converse cannot be told to make at most one. */
  singleToolCall?: boolean;
}

/** A Converse response as a chat.completion. */
export function fromConverseResponse(response: Record<string, unknown>, ctx: ConverseResponseContext): ChatCompletion {
  let text = '';
  const calls: ChatToolCall[] = [];
  const output = isRecord(response.output) ? response.output : {};
  const message = isRecord(output.message) ? output.message : {};
  for (const block of Array.isArray(message.content) ? message.content : []) {
    if (!isRecord(block)) continue;
    if (typeof block.text === 'string') text += block.text;
    else if (isRecord(block.toolUse) && !(ctx.singleToolCall === true && calls.length > 0)) {
      const use = block.toolUse;
      calls.push({ id: String(use.toolUseId), type: 'function', function: { name: String(use.name), arguments: JSON.stringify(use.input ?? {}) } });
    }
    // reasoningContent stays hidden, as OpenAI hides its reasoning
  }
  const usage = normaliseConverseUsage(response.usage);
  const out: ChatCompletion = {
    id: ctx.id,
    object: 'chat.completion',
    created: ctx.created,
    model: ctx.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text === '' && calls.length > 0 ? null : text, refusal: null, ...(calls.length > 0 ? { tool_calls: calls } : {}) },
        logprobs: null,
        finish_reason: converseFinishReason(response.stopReason),
      },
    ],
    system_fingerprint: null,
  };
  if (usage) out.usage = chatUsage(usage);
  return out;
}

/**
 * ConverseStream members → OpenAI chunks. Text deltas become content deltas; a toolUse block becomes one tool
 * call (its id and name at contentBlockStart, then its input's JSON pieces); messageStop's stopReason becomes the
 * finish chunk; metadata, the last member, carries the usage. A stream without its metadata is cut.
 */
export class ConverseChunkTranslator {
  readonly #identity: ChunkIdentity;
  readonly #singleToolCall: boolean;
  /** contentBlockIndex → tool call index. */
  readonly #toolIndex = new Map<number, number>();
  /** Tool calls that have received input text; one without any gets `{}` when its block stops. */
  readonly #toolArgs = new Set<number>();
  #tools = 0;
  #started = false;
  #finished = false;
  #ended = false;
  #usage: unknown;

  constructor(identity: ChunkIdentity, singleToolCall = false) {
    this.#identity = { ...identity };
    this.#singleToolCall = singleToolCall;
  }

  /** One member: its event type and its JSON payload; `error` carries a stream failure's message. */
  event(type: string, json: string): StreamStep {
    let event: unknown;
    try {
      event = JSON.parse(json);
    } catch {
      return { chunks: [], error: { message: `malformed JSON in an upstream ${type} event`, code: 'upstream_stream_error' } };
    }
    if (!isRecord(event)) return { chunks: [] };
    if (type === 'error') {
      return { chunks: [], error: { message: typeof event.message === 'string' ? event.message : 'upstream stream error', code: 'bedrock_stream_error' } };
    }
    const chunks: ChatChunk[] = [];
    if (!this.#started && type !== 'metadata') chunks.push(this.#roleChunk());
    const index = typeof event.contentBlockIndex === 'number' ? event.contentBlockIndex : 0;
    switch (type) {
      case 'contentBlockStart':
        this.#blockStart(index, event.start, chunks);
        break;
      case 'contentBlockDelta':
        this.#delta(index, event.delta, chunks);
        break;
      case 'contentBlockStop': {
        // A tool called without arguments streams no input at all; callers parse the arguments, so send `{}`.
        const toolIndex = this.#toolIndex.get(index);
        if (toolIndex !== undefined && !this.#toolArgs.has(toolIndex)) {
          this.#toolArgs.add(toolIndex);
          chunks.push(chunk(this.#identity, 0, { tool_calls: [{ index: toolIndex, function: { arguments: '{}' } }] }));
        }
        break;
      }
      case 'messageStop':
        if (!this.#finished) {
          this.#finished = true;
          chunks.push(chunk(this.#identity, 0, {}, converseFinishReason(event.stopReason)));
        }
        break;
      case 'metadata':
        this.#ended = true;
        this.#usage = event.usage;
        break;
      default:
        break; // messageStart: the role chunk above
    }
    return { chunks };
  }

  /** The end of the upstream stream: the usage chunk (when asked for), or the failure when it ended before metadata. */
  end(cut?: string): StreamStep {
    if (cut !== undefined || !this.#ended || !this.#finished) {
      return { chunks: [], error: { message: cut ?? 'stream ended before the metadata event', code: 'upstream_stream_error' } };
    }
    const usage = normaliseConverseUsage(this.#usage);
    return { chunks: this.#identity.includeUsage && usage ? [usageChunk(this.#identity, chatUsage(usage))] : [] };
  }

  #blockStart(index: number, start: unknown, chunks: ChatChunk[]): void {
    const use = isRecord(start) && isRecord(start.toolUse) ? start.toolUse : undefined;
    if (use === undefined || (this.#singleToolCall && this.#tools > 0)) return;
    const toolIndex = this.#tools++;
    this.#toolIndex.set(index, toolIndex);
    chunks.push(chunk(this.#identity, 0, { tool_calls: [{ index: toolIndex, id: String(use.toolUseId), type: 'function', function: { name: String(use.name), arguments: '' } }] }));
  }

  #delta(index: number, delta: unknown, chunks: ChatChunk[]): void {
    if (!isRecord(delta)) return;
    if (typeof delta.text === 'string' && delta.text !== '') {
      chunks.push(chunk(this.#identity, 0, { content: delta.text }));
      return;
    }
    const toolIndex = this.#toolIndex.get(index);
    const input = isRecord(delta.toolUse) ? delta.toolUse.input : undefined;
    if (toolIndex !== undefined && typeof input === 'string' && input !== '') {
      this.#toolArgs.add(toolIndex);
      chunks.push(chunk(this.#identity, 0, { tool_calls: [{ index: toolIndex, function: { arguments: input } }] }));
    }
    // reasoningContent stays hidden, as OpenAI hides its reasoning
  }

  #roleChunk(): ChatChunk {
    this.#started = true;
    return chunk(this.#identity, 0, { role: 'assistant', content: '' });
  }
}
