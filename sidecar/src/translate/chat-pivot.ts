// The chat pivot as the translators to other providers read it: an OpenAI chat-completions request, checked
// and read once (chat-content.ts, readChatRequest), every field a translator maps in its own type. Field names
// follow OpenAI's request (`max_completion_tokens` → maxTokens, `tool_calls` → toolCalls); the answer side of
// the pivot (ChatCompletion, ChatChunk) is in openai-chat.ts, which is what the caller reads back.
//
// Nothing here passes through unnamed: a chat-completions field none of the translators maps is refused by the
// parameter table (chat-parameters.ts) before the request is read, or ignored there with its reason, so the
// pivot has no place for unknown fields. A caller's JSON that goes to an OpenAI-speaking upstream is never
// read into this type; it is forwarded as sent.

/** An image of a user message: decoded from a data: URL, or an http(s) URL left for the provider to fetch. */
export type ImageSource = { kind: 'base64'; mediaType: string; data: string } | { kind: 'url'; url: string };

/** One part of a user message. `param` names the image's field in refusals (`messages[1].content[0].image_url.url`). */
export type ChatContentPart = { type: 'text'; text: string } | { type: 'image'; source: ImageSource; param: string };

/** A tool call of an earlier assistant message, its `function.arguments` parsed. */
export interface ChatToolCallIn {
  id: string;
  name: string;
  input: unknown;
}

/**
 * One message, by role; `developer` is read as `system` (OpenAI's newer name for it). `index` is its position in
 * the request, for refusals (`messages[3].content`) and for the extensions kept by message (earlier thinking).
 */
export type ChatMessage =
  | { role: 'system'; index: number; text: string }
  | { role: 'user'; index: number; content: readonly ChatContentPart[] }
  | { role: 'assistant'; index: number; text: string; toolCalls: readonly ChatToolCallIn[] }
  | { role: 'tool'; index: number; toolCallId: string; text: string };

/** A `function` tool (the only kind that translates). */
export interface ChatTool {
  name: string;
  description: string | undefined;
  /** The caller's JSON Schema, passed to the provider as it is: a record is its honest type. */
  parameters: Record<string, unknown> | undefined;
}

export type ChatToolChoice = { kind: 'auto' } | { kind: 'none' } | { kind: 'required' } | { kind: 'function'; name: string };

/** `response_format`; a JSON schema is the caller's, passed on as it is. */
export type JsonMode = { kind: 'text' } | { kind: 'json_object' } | { kind: 'json_schema'; name: string; schema: Record<string, unknown> };

/** OpenAI's `reasoning_effort` values a translator maps (Gemini's thinking budget). */
export type ChatReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high';

export interface ChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ChatTool[];
  readonly toolChoice: ChatToolChoice | undefined;
  /** `parallel_tool_calls`: false only when the caller sent false. */
  readonly parallelToolCalls: boolean;
  /** `max_completion_tokens`, else `max_tokens`. */
  readonly maxTokens: number | undefined;
  readonly stop: readonly string[] | undefined;
  /** 0 to 2 (a provider that takes less refuses more itself). */
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  /** 1 to 8 completions. */
  readonly n: number | undefined;
  readonly presencePenalty: number | undefined;
  readonly frequencyPenalty: number | undefined;
  readonly seed: number | undefined;
  readonly reasoningEffort: ChatReasoningEffort | undefined;
  readonly responseFormat: JsonMode;
  readonly stream: boolean;
  /** `stream_options.include_usage` on a streamed request. */
  readonly includeUsage: boolean;
  /** `user`, when a non-empty string. */
  readonly user: string | undefined;
}
