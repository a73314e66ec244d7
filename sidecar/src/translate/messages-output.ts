// The Messages API's answer made from the chat pivot, whole (a `message`) or as its event stream:
// message_start; per content block content_block_start, its deltas (thinking, text, input_json) and
// content_block_stop; message_delta with the stop reason and the usage; message_stop. Nothing is kept but the
// block being written: every delta goes out as it comes, written as text without building an object.

import { anthropicStreamErrorEvent } from './anthropic-error.ts';
import type { AnthropicBlock } from './anthropic-request-body.ts';
import { ChoiceEncoder } from './choice-encoder.ts';
import type { ChatCompletion, ChatUsage, ChunkToolCallDelta, FinishReason, ThinkingDelta } from './openai-chat.ts';
import { ProxyError } from '../errors.ts';

export interface MessagesUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

/** Anthropic counts input without the cache reads that chat's prompt_tokens include. */
export function messagesUsage(usage: ChatUsage | null | undefined): MessagesUsage {
  if (!usage) return { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 };
  const cached = usage.prompt_tokens_details.cached_tokens;
  return { input_tokens: usage.prompt_tokens - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: usage.completion_tokens };
}

export function stopReason(finish: FinishReason | null): string {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

/** A Messages API `message`, the whole answer; its blocks are those a request sends back. */
export type AnthropicMessage = {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicBlock[];
  stop_reason: string;
  stop_sequence: null;
  usage: MessagesUsage;
};

/** A whole chat completion's first choice as a Messages `message`. */
export function messageFromCompletion(completion: ChatCompletion, id: string): AnthropicMessage {
  const choice = completion.choices[0];
  const message = choice?.message;
  const content: AnthropicBlock[] = [];
  for (const block of message?.thinking ?? []) {
    content.push(block.kind === 'thinking' ? { type: 'thinking', thinking: block.thinking, signature: block.signature } : { type: 'redacted_thinking', data: block.data });
  }
  if (message?.content) content.push({ type: 'text', text: message.content });
  for (const call of message?.tool_calls ?? []) {
    let input: unknown;
    try {
      input = call.function.arguments === '' ? {} : JSON.parse(call.function.arguments);
    } catch {
      input = undefined;
    }
    // A tool_use block's input is an object: arguments that are not one cannot be handed to the caller.
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      throw new ProxyError('upstream_stream_error', `the model called ${call.function.name} with arguments that are not a JSON object`);
    }
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input });
  }
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: completion.model,
    content,
    stop_reason: stopReason(choice?.finish_reason ?? null),
    stop_sequence: null,
    usage: messagesUsage(completion.usage),
  };
}

type OpenBlock = { kind: 'thinking'; block: number } | { kind: 'text' } | { kind: 'tool'; toolIndex: number } | undefined;

export class MessagesStreamEncoder extends ChoiceEncoder {
  readonly #id: string;
  readonly #model: string;
  #started = false;
  /** Index of the block being written; -1 before the first. */
  #index = -1;
  /** What the open block takes more of (a redacted thinking block takes nothing, and is open only until it is stopped). */
  #open: OpenBlock;
  #blockOpen = false;

  /** `model` is named until the upstream names one. */
  constructor(id: string, model: string) {
    super();
    this.#id = id;
    this.#model = model;
  }

  end(): string {
    const out = this.begin(this.#model) + this.#stop();
    const usage = JSON.stringify(messagesUsage(this.usage));
    return `${out}event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"${stopReason(this.finish)}","stop_sequence":null},"usage":${usage}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`;
  }

  fail(route: string, message: string): string {
    return anthropicStreamErrorEvent(route, message);
  }

  protected begin(model: string): string {
    if (this.#started) return '';
    this.#started = true;
    const message = { id: this.#id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: messagesUsage(null) };
    return `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message })}\n\n`;
  }

  protected thinking(delta: ThinkingDelta): string {
    let out = '';
    const open = this.#open;
    if (delta.redacted !== undefined) {
      out += this.#stop() + this.#begin(undefined, { type: 'redacted_thinking', data: delta.redacted });
      return out + this.#stop();
    }
    if (open?.kind !== 'thinking' || open.block !== delta.block) {
      out += this.#stop() + this.#begin({ kind: 'thinking', block: delta.block }, { type: 'thinking', thinking: '', signature: '' });
    }
    if (delta.text !== undefined && delta.text !== '') out += this.#delta(`{"type":"thinking_delta","thinking":${JSON.stringify(delta.text)}}`);
    if (delta.signature !== undefined) out += this.#delta(`{"type":"signature_delta","signature":${JSON.stringify(delta.signature)}}`);
    return out;
  }

  protected text(text: string): string {
    const out = this.#open?.kind === 'text' ? '' : this.#stop() + this.#begin({ kind: 'text' }, { type: 'text', text: '' });
    return out + this.#delta(`{"type":"text_delta","text":${JSON.stringify(text)}}`);
  }

  protected toolCall(call: ChunkToolCallDelta): string {
    let out = '';
    const open = this.#open;
    if (open?.kind !== 'tool' || open.toolIndex !== call.index) {
      if (call.id === undefined) return ''; // arguments of a call whose start was never seen
      out += this.#stop() + this.#begin({ kind: 'tool', toolIndex: call.index }, { type: 'tool_use', id: call.id, name: call.function.name ?? '', input: {} });
    }
    const args = call.function.arguments;
    return args === '' ? out : out + this.#delta(`{"type":"input_json_delta","partial_json":${JSON.stringify(args)}}`);
  }

  #begin(open: OpenBlock, block: AnthropicBlock): string {
    this.#open = open;
    this.#blockOpen = true;
    this.#index += 1;
    return `event: content_block_start\ndata: ${JSON.stringify({ type: 'content_block_start', index: this.#index, content_block: block })}\n\n`;
  }

  #delta(delta: string): string {
    return `event: content_block_delta\ndata: {"type":"content_block_delta","index":${this.#index},"delta":${delta}}\n\n`;
  }

  #stop(): string {
    if (!this.#blockOpen) return '';
    this.#blockOpen = false;
    this.#open = undefined;
    return `event: content_block_stop\ndata: {"type":"content_block_stop","index":${this.#index}}\n\n`;
  }
}
