// How a provider's answer becomes OpenAI's chat format, whole or streamed: one object per upstream answer
// format, which a route module names for its /v1 calls.

import type { RouteName } from '../../../contracts/routes.ts';
import { bedrockHeaderUsage, type ResponseHeaders } from '../usage/bedrock.ts';
import { anthropicSseChatStream, bedrockChatStream, geminiSseChatStream, type ChatStreamTranslator } from './chat-stream.ts';
import { AnthropicChunkTranslator, fromAnthropicMessage } from './openai-anthropic.ts';
import type { ChatCompletion, ChunkIdentity } from './openai-chat.ts';
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
}

export interface ChatResponseTranslation {
  readonly name: 'anthropic' | 'gemini';
  fromJson(document: Record<string, unknown>, shaping: ResponseShaping): ChatCompletion;
  stream(route: RouteName, identity: ChunkIdentity, shaping: ResponseShaping): ChatStreamTranslator;
}

/** Gemini's generateContent JSON and its SSE (?alt=sse). */
export const GEMINI_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'gemini',
  fromJson: (document, s) => fromGeminiResponse(document, { model: s.model, created: s.created, newId: s.newToolCallId }),
  stream: (route, identity, s) => geminiSseChatStream(route, new GeminiChunkTranslator(identity, s.newToolCallId)),
};

/** Anthropic's Messages JSON and its SSE (the Anthropic API, Claude on Vertex AI). */
export const ANTHROPIC_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'anthropic',
  fromJson: (document, s) => fromAnthropicMessage(document, { model: s.model, created: s.created, jsonMode: s.jsonMode, fallbackUsage: null }),
  stream: (route, identity, s) => anthropicSseChatStream(route, new AnthropicChunkTranslator(identity, s.jsonMode)),
};

/** Claude on Bedrock: Messages JSON with usage also in headers, and Anthropic events inside AWS's event stream. */
export const BEDROCK_CHAT_RESPONSE: ChatResponseTranslation = {
  name: 'anthropic',
  fromJson: (document, s) => fromAnthropicMessage(document, { model: s.model, created: s.created, jsonMode: s.jsonMode, fallbackUsage: bedrockHeaderUsage(s.headers) }),
  stream: (route, identity, s) => bedrockChatStream(route, new AnthropicChunkTranslator(identity, s.jsonMode)),
};
