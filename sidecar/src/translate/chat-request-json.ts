// The chat pivot as JSON: an OpenAI chat-completions request, as the Responses and Messages APIs are translated
// into it (responses-request.ts, messages-request.ts). It goes as it is to a route that speaks chat completions
// (OpenAI, an OpenAI-compatible server, the local runtime), so its fields are OpenAI's names and its key order
// is the one written; a translator to another provider reads it into ChatRequest (chat-pivot.ts). Types, not
// classes: a `type` of an object is a Record<string, unknown> to the routes that plan any JSON body.

import type { ChatToolCall } from './openai-chat.ts';

export type ChatContentPartJson = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } };

export type ChatMessageJson =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | ChatContentPartJson[] }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export type ChatAssistantJson = Extract<ChatMessageJson, { role: 'assistant' }>;

export type ChatToolJson = {
  type: 'function';
  /** `parameters` is the caller's JSON Schema, passed on as sent (a Responses caller's is not checked here). */
  function: { name: string; description?: string; parameters?: unknown; strict?: boolean };
};

export type ChatToolChoiceJson = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

export type ChatResponseFormatJson =
  { type: 'json_object' } | { type: 'json_schema'; json_schema: { name: string; description?: string; schema: Record<string, unknown>; strict?: boolean } };

/**
 * The request. The fields typed `unknown` are the caller's values passed on unchecked, as the caller's API
 * names them a chat caller's (`temperature`, Responses' `max_output_tokens`): the translator that reads them
 * (readChatRequest) or the upstream refuses a bad one, naming it in the caller's terms (through-chat.ts).
 */
export type ChatRequestJson = {
  model: unknown;
  messages: ChatMessageJson[];
  max_completion_tokens?: unknown;
  stop?: unknown;
  temperature?: unknown;
  top_p?: unknown;
  user?: unknown;
  safety_identifier?: unknown;
  service_tier?: unknown;
  tools?: ChatToolJson[];
  tool_choice?: ChatToolChoiceJson;
  response_format?: ChatResponseFormatJson;
  stream?: true;
  stream_options?: { include_usage: true };
};
