// The Converse request body (Bedrock) a chat request is translated into (openai-converse.ts), in Converse's
// field names; the model and whether it streams are in the path. A `type` of an object, so it is still a JSON
// object to the code that serialises it.

/** A content block. `input` is a tool call's arguments as the caller wrote them. */
export type ConverseText = { text: string };

export type ConverseBlock =
  | ConverseText
  | { image: { format: string; source: { bytes: string } } }
  | { toolUse: { toolUseId: string; name: string; input: unknown } }
  | { toolResult: { toolUseId: string; content: ConverseText[] } };

export type ConverseTurn = { role: 'user' | 'assistant'; content: ConverseBlock[] };

export type ConverseInferenceConfig = { maxTokens?: number; temperature?: number; topP?: number; stopSequences?: readonly string[] };

/** `inputSchema.json` is the caller's JSON Schema, passed on as it is. */
export type ConverseToolSpec = { toolSpec: { name: string; description?: string; inputSchema: { json: Record<string, unknown> } } };

export type ConverseToolConfig = {
  tools: ConverseToolSpec[];
  toolChoice?: { auto: Record<string, never> } | { any: Record<string, never> } | { tool: { name: string } };
};

export type ConverseBody = {
  messages: ConverseTurn[];
  system?: ConverseText[];
  inferenceConfig?: ConverseInferenceConfig;
  toolConfig?: ConverseToolConfig;
};
