// The generateContent request body (Vertex AI) a chat request is translated into (openai-gemini.ts), in
// Gemini's field names. A `type` of an object, so it is still a JSON object to the code that serialises it.

/** A part of a turn. `args` and `response` are JSON objects the caller wrote (tool call arguments, a tool's result). */
export type GeminiPart =
  | { text: string }
  | { inlineData: { mimeType: string; data: string } }
  | { fileData: { mimeType: string; fileUri: string } }
  | { functionCall: { name: string; args: Record<string, unknown> } }
  | { functionResponse: { name: string; response: Record<string, unknown> } };

export type GeminiContent = { role: 'user' | 'model'; parts: GeminiPart[] };

export type GeminiGenerationConfig = {
  maxOutputTokens?: number;
  stopSequences?: readonly string[];
  temperature?: number;
  topP?: number;
  candidateCount?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  seed?: number;
  /** -1: the model decides. */
  thinkingConfig?: { thinkingBudget: number; includeThoughts?: true };
  responseMimeType?: 'application/json';
  /** The caller's JSON Schema, passed on as it is. */
  responseJsonSchema?: Record<string, unknown>;
};

export type GeminiFunctionDeclaration = { name: string; description?: string; parametersJsonSchema?: Record<string, unknown> };

export type GeminiGenerateContentBody = {
  contents: GeminiContent[];
  systemInstruction?: { parts: GeminiPart[] };
  generationConfig?: GeminiGenerationConfig;
  tools?: { functionDeclarations: GeminiFunctionDeclaration[] }[];
  toolConfig?: { functionCallingConfig: { mode: 'AUTO' | 'ANY' | 'NONE'; allowedFunctionNames?: string[] } };
};
