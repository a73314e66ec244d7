// The Responses API's answer made from the chat pivot: the `response` object with its output items (reasoning,
// message, function_call), its status and usage, whole or as the stream encoder (responses-stream.ts) builds
// it. The request's settings are echoed as OpenAI echoes them. Pure: ids come from the caller.

import { isRecord } from '../../../contracts/json-record.ts';
import type { ThinkingBlock } from './chat-extensions.ts';
import type { ChatCompletion, ChatUsage, FinishReason } from './openai-chat.ts';
import { encodeThinking, type ResponseItem } from './responses-request.ts';

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** What an answer's items carry besides their content. */
export interface OutputShaping {
  newId: (prefix: string) => string;
  /** Show the thinking as summary text (the caller set reasoning.summary). */
  summaries: boolean;
  /** Put Claude's signed thinking in encrypted_content (include: reasoning.encrypted_content). */
  encrypted: boolean;
}

/**
 * The request's settings as the response repeats them, with OpenAI's defaults. The values are the caller's as
 * sent (the parameter table has refused what cannot be honoured), hence unknown.
 */
export type ResponseEcho = {
  instructions: unknown;
  max_output_tokens: unknown;
  metadata: unknown;
  parallel_tool_calls: unknown;
  previous_response_id: unknown;
  reasoning: { effort: unknown; summary: unknown };
  service_tier: 'default';
  store: unknown;
  temperature: unknown;
  text: { format: unknown; verbosity: unknown };
  tool_choice: unknown;
  tools: unknown;
  top_p: unknown;
  truncation: unknown;
  user: unknown;
};

export function responseEcho(request: Record<string, unknown>): ResponseEcho {
  const reasoning = isRecord(request.reasoning) ? request.reasoning : {};
  const text = isRecord(request.text) ? request.text : {};
  return {
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? reasoning.generate_summary ?? null },
    service_tier: 'default',
    store: request.store ?? true,
    temperature: request.temperature ?? 1,
    text: { format: text.format ?? { type: 'text' }, verbosity: text.verbosity ?? 'medium' },
    tool_choice: request.tool_choice ?? 'auto',
    tools: request.tools ?? [],
    top_p: request.top_p ?? 1,
    truncation: request.truncation ?? 'disabled',
    user: request.user ?? null,
  };
}

export interface ResponseHead {
  id: string;
  createdAt: number;
  model: string;
  echo: ResponseEcho;
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** The Responses API's `response` object: its head, its output items and usage, then the request's settings. */
export type ResponseObject = {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  background: false;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: string } | null;
  model: string;
  output: ResponseItem[];
  usage: ResponsesUsage | null;
} & ResponseEcho;

export function responseObject(
  head: ResponseHead,
  status: ResponseStatus,
  output: ResponseItem[],
  usage: ResponsesUsage | null,
  details: { incomplete?: string | undefined; error?: { code: string; message: string } | undefined } = {},
): ResponseObject {
  return {
    id: head.id,
    object: 'response',
    created_at: head.createdAt,
    status,
    background: false,
    error: details.error ?? null,
    incomplete_details: details.incomplete !== undefined ? { reason: details.incomplete } : null,
    model: head.model,
    output,
    usage,
    ...head.echo,
  };
}

/** The status a finish reason gives a response, and why it is incomplete. */
export function responseStatus(finish: FinishReason | null): { status: 'completed' | 'incomplete'; incomplete?: string } {
  if (finish === 'length') return { status: 'incomplete', incomplete: 'max_output_tokens' };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete: 'content_filter' };
  return { status: 'completed' };
}

export function responsesUsage(usage: ChatUsage | null | undefined): ResponsesUsage | null {
  if (!usage) return null;
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details.cached_tokens },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details.reasoning_tokens },
    total_tokens: usage.total_tokens,
  };
}

/**
 * A reasoning item: the thinking as summary text when shown, Claude's signed block as encrypted_content when
 * asked for (and always in the stored copy, so previous_response_id keeps a tool loop's thinking).
 */
export function reasoningItem(id: string, text: string, block: ThinkingBlock | undefined, summaries: boolean, encrypted: boolean): ResponseItem {
  const item: ResponseItem = { id, type: 'reasoning', summary: summaries && text !== '' ? [{ type: 'summary_text', text }] : [] };
  if (encrypted) item.encrypted_content = block === undefined ? null : encodeThinking(block);
  return item;
}

export function messageItem(id: string, text: string): ResponseItem {
  return { id, type: 'message', status: 'completed', role: 'assistant', content: [outputText(text)] };
}

export type OutputText = { type: 'output_text'; annotations: []; logprobs: []; text: string };

export function outputText(text: string): OutputText {
  return { type: 'output_text', annotations: [], logprobs: [], text };
}

export function functionCallItem(id: string, callId: string, name: string, args: string): ResponseItem {
  return { id, type: 'function_call', status: 'completed', arguments: args, call_id: callId, name };
}

/** A signed block to send back, or undefined for thinking without a signature (Gemini's, OpenAI-format runtimes'). */
export function signedBlock(block: ThinkingBlock): ThinkingBlock | undefined {
  return block.kind === 'redacted' || block.signature !== '' ? block : undefined;
}

/** A whole chat completion's first choice as output items: what the caller sees, and what the store keeps. */
export function outputItems(completion: ChatCompletion, shaping: OutputShaping): { output: ResponseItem[]; stored: ResponseItem[] } {
  const message = completion.choices[0]?.message;
  const output: ResponseItem[] = [];
  const stored: ResponseItem[] = [];
  for (const block of message?.thinking ?? []) {
    const id = shaping.newId('rs_');
    const text = block.kind === 'thinking' ? block.thinking : '';
    const signed = signedBlock(block);
    output.push(reasoningItem(id, text, signed, shaping.summaries, shaping.encrypted));
    stored.push(reasoningItem(id, text, signed, shaping.summaries, true));
  }
  const calls = message?.tool_calls ?? [];
  const text = message?.content ?? '';
  if (text !== '' || calls.length === 0) {
    const item = messageItem(shaping.newId('msg_'), text);
    output.push(item);
    stored.push(item);
  }
  for (const call of calls) {
    const item = functionCallItem(shaping.newId('fc_'), call.id, call.function.name, call.function.arguments);
    output.push(item);
    stored.push(item);
  }
  return { output, stored };
}
