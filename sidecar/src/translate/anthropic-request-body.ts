// The Anthropic Messages API request body a chat request is translated into (openai-anthropic.ts): what the
// translator writes, and the envelope fields the Claude routes add (`model` on the Anthropic API,
// `anthropic_version` on Vertex AI and Bedrock). Its content blocks are also those of the `message` the
// Messages API answers with (messages-output.ts). Types of the wire, in Anthropic's field names; a `type` of an
// object, so it is still a JSON object to the code that serialises it.

export type AnthropicImageSource = { type: 'url'; url: string } | { type: 'base64'; media_type: string; data: string };

export type AnthropicTextBlock = { type: 'text'; text: string };

export type AnthropicBlock =
  | AnthropicTextBlock
  | { type: 'image'; source: AnthropicImageSource }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; tool_use_id: string; content: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string };

export type AnthropicTurn = { role: 'user' | 'assistant'; content: AnthropicBlock[] };

/** `input_schema` is the caller's JSON Schema, passed on as it is. */
export type AnthropicTool = { name: string; description?: string; input_schema: Record<string, unknown> };

export type AnthropicToolChoice = ({ type: 'auto' | 'any' | 'none' } | { type: 'tool'; name: string }) & { disable_parallel_tool_use?: true };

export type AnthropicMessagesBody = {
  model?: string;
  anthropic_version?: string;
  max_tokens: number;
  messages: AnthropicTurn[];
  thinking?: { type: 'enabled'; budget_tokens: number };
  system?: AnthropicTextBlock[];
  stop_sequences?: readonly string[];
  temperature?: number;
  top_p?: number;
  metadata?: { user_id: string };
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  stream?: true;
};
