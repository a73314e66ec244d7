// How a provider's answer becomes the chat pivot, whole or streamed: one object per upstream answer format,
// which a route module names for its /v1 calls. A streamed answer is handed to an encoder that writes the
// caller's events (OpenAI chat SSE by default; the Responses or Messages events for their callers).

import { bedrockHeaderUsage, type ResponseHeaders } from '../wire-formats/bedrock/usage.ts';
import {
  anthropicSseChatStream,
  bedrockChatStream,
  converseChatStream,
  geminiSseChatStream,
  openAiSseChatStream,
  type ChatStreamTranslator,
  type ChunkEncoder,
} from './chat-stream.ts';
import { AnthropicChunkTranslator, fromAnthropicMessage } from './openai-anthropic.ts';
import type { ChatCompletion, ChunkIdentity } from './openai-chat.ts';
import { fromOpenAiCompletion, OpenAiChunkReader } from './openai-chunks.ts';
import { ConverseChunkTranslator, fromConverseResponse } from './openai-converse.ts';
import { fromGeminiResponse, GeminiChunkTranslator } from './openai-gemini.ts';

export interface ResponseShaping {
  /** Model to report when the upstream names none. */
  model: string;
  created: number;
  /** Anthropic: the answer is the forced JSON tool's input. */
  jsonMode: boolean;
  headers: ResponseHeaders;
  /** Gemini function calls carry no id; the gateway makes them up. */
  newToolCallId: () => string;
  /** Return the answer's thinking (ChatExtensions.returnReasoning). */
  reasoning: boolean;
  /** Keep only the first tool call (ChatExtensions.singleToolCall), where the provider could not be told. */
  singleToolCall: boolean;
}

export interface ChatResponseTranslation {
  readonly name: 'anthropic' | 'gemini' | 'converse' | 'openai';
  fromJson(document: Record<string, unknown>, shaping: ResponseShaping): ChatCompletion;
  stream(route: string, identity: ChunkIdentity, shaping: ResponseShaping, encoder?: ChunkEncoder): ChatStreamTranslator;
}

/** Gemini's generateContent JSON and its SSE (?alt=sse). */
export const GEMINI_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'gemini',
  fromJson: (document, s) => fromGeminiResponse(document, { model: s.model, created: s.created, newId: s.newToolCallId, reasoning: s.reasoning, singleToolCall: s.singleToolCall }),
  stream: (route, identity, s, encoder) =>
    geminiSseChatStream(route, new GeminiChunkTranslator(identity, s.newToolCallId, { reasoning: s.reasoning, singleToolCall: s.singleToolCall }), encoder),
};

/** Anthropic's Messages JSON and its SSE (the Anthropic API, Claude on Vertex AI). */
export const ANTHROPIC_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'anthropic',
  fromJson: (document, s) => fromAnthropicMessage(document, { model: s.model, created: s.created, jsonMode: s.jsonMode, fallbackUsage: null, reasoning: s.reasoning }),
  stream: (route, identity, s, encoder) => anthropicSseChatStream(route, new AnthropicChunkTranslator(identity, s.jsonMode, s.reasoning), encoder),
};

/** Claude on Bedrock: Messages JSON with usage also in headers, and Anthropic events inside AWS's event stream. */
export const BEDROCK_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'anthropic',
  fromJson: (document, s) =>
    fromAnthropicMessage(document, { model: s.model, created: s.created, jsonMode: s.jsonMode, fallbackUsage: bedrockHeaderUsage(s.headers), reasoning: s.reasoning }),
  stream: (route, identity, s, encoder) => bedrockChatStream(route, new AnthropicChunkTranslator(identity, s.jsonMode, s.reasoning), encoder),
};

/**
 * Bedrock's models other than Claude (ADR 0914): Converse's JSON, which names no id (Bedrock's request id stands
 * in), and ConverseStream's members inside AWS's event stream.
 */
export const CONVERSE_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'converse',
  fromJson: (document, s) => {
    const requestId = s.headers['x-amzn-requestid'];
    const id = typeof requestId === 'string' && requestId !== '' ? `chatcmpl-${requestId}` : `chatcmpl-${s.newToolCallId()}`;
    return fromConverseResponse(document, { model: s.model, created: s.created, id, singleToolCall: s.singleToolCall });
  },
  stream: (route, identity, s, encoder) => converseChatStream(route, new ConverseChunkTranslator(identity, s.singleToolCall), encoder),
};

/**
 * OpenAI's own chat format (beta, alpha-compat, local). A chat caller gets those answers passed through
 * untouched; this reading is for callers of the Responses and Messages APIs, whose answers are made from it.
 */
export const OPENAI_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'openai',
  fromJson: (document, s) => fromOpenAiCompletion(document, s.reasoning),
  stream: (route, _identity, s, encoder) => {
    if (encoder === undefined) throw new Error('an OpenAI chat stream is read only for a caller of another API');
    return openAiSseChatStream(route, new OpenAiChunkReader(s.reasoning), encoder);
  },
};
