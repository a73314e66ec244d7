// The OpenAI chat-completions shapes the translators write: the response and chunk objects they build (the
// answer side of the chat pivot, what a chat caller reads) and the usage block. The request side of the pivot
// is chat-pivot.ts.

import type { TokenUsage } from '../usage/usage.ts';
import type { ThinkingBlock } from './chat-extensions.ts';

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { reasoning_tokens: number };
}

export interface ChatCompletionChoice {
  index: number;
  message: { role: 'assistant'; content: string | null; refusal: null; tool_calls?: ChatToolCall[]; thinking?: ThinkingBlock[] };
  logprobs: null;
  finish_reason: FinishReason;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  usage?: ChatUsage;
  system_fingerprint: null;
}

export interface ChunkToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** A piece of one thinking block: its text, its signature (Claude's, at the block's end) or its redacted data. */
export interface ThinkingDelta {
  /** Which thinking block of the answer (a new number starts a new block). */
  block: number;
  text?: string;
  signature?: string;
  redacted?: string;
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  tool_calls?: ChunkToolCallDelta[];
  /**
   * The gateway's own field, never sent to a chat caller: set only when the Responses or Messages API asked for
   * the answer's thinking (ChatExtensions.returnReasoning), whose encoders read it.
   */
  thinking?: ThinkingDelta;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint: null;
  choices: { index: number; delta: ChunkDelta; logprobs: null; finish_reason: FinishReason | null }[];
  usage?: ChatUsage | null;
}

/**
 * The OpenAI usage block for a normalised usage. The normalised fields already follow OpenAI's conventions:
 * prompt tokens include cache reads and writes, completion tokens include reasoning.
 */
export function chatUsage(usage: TokenUsage): ChatUsage {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}

/** What every chunk of one streamed completion repeats. */
export interface ChunkIdentity {
  id: string;
  created: number;
  model: string;
  /** The caller asked for stream_options.include_usage: chunks carry `usage: null`, a last one the usage. */
  includeUsage: boolean;
}

export function chunk(identity: ChunkIdentity, index: number, delta: ChunkDelta, finishReason: FinishReason | null = null): ChatChunk {
  const out: ChatChunk = {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    system_fingerprint: null,
    choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
  };
  if (identity.includeUsage) out.usage = null;
  return out;
}

/** The usage-only chunk OpenAI sends last when stream_options.include_usage is set. */
export function usageChunk(identity: ChunkIdentity, usage: ChatUsage): ChatChunk {
  return {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    system_fingerprint: null,
    choices: [],
    usage,
  };
}

export function sseData(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

export const SSE_DONE = 'data: [DONE]\n\n';

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
