// OpenAI chat completions ↔ Gemini generateContent on Vertex AI. Pure functions and one stateful stream
// translator fed the decoded SSE chunks of :streamGenerateContent?alt=sse.
// Field mappings: the parameter table in docs/openai-gateway.md; ADR 0900 for the JSON Schema fields.

import { normaliseGeminiUsage } from '../wire-formats/gemini/usage.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { readChatRequest } from './chat-content.ts';
import type { GeminiContent, GeminiGenerateContentBody, GeminiGenerationConfig, GeminiPart } from './gemini-request-body.ts';
import type { ChatContentPart, ChatReasoningEffort, ChatRequest } from './chat-pivot.ts';
import {
  chatUsage,
  chunk,
  usageChunk,
  type ChatChunk,
  type ChatCompletion,
  type ChatCompletionChoice,
  type ChatToolCall,
  type ChunkIdentity,
  type FinishReason,
} from './openai-chat.ts';
import { invalidParameter, unsupportedParameter } from './openai-error.ts';
import type { StreamStep } from './openai-anthropic.ts';
import type { ChatExtensions } from './chat-extensions.ts';

export interface GeminiRequest {
  /** generateContent body. */
  body: GeminiGenerateContentBody;
  stream: boolean;
  includeUsage: boolean;
}

// Thinking budgets for reasoning_effort, as Google maps them on its own OpenAI-compatible surface.
const THINKING_BUDGET: Readonly<Record<ChatReasoningEffort, number>> = { none: 0, minimal: 0, low: 1024, medium: 8192, high: 24576 };

const IMAGE_EXTENSIONS: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  heic: 'image/heic',
  heif: 'image/heif',
};

function imageMimeType(url: string): string | undefined {
  const path = url.split(/[?#]/)[0]!;
  const dot = path.lastIndexOf('.');
  return dot === -1 ? undefined : IMAGE_EXTENSIONS[path.slice(dot + 1).toLowerCase()];
}

/** The caller's chat-completions JSON as a generateContent body (read into the chat pivot first). */
export function toGeminiRequest(json: Record<string, unknown>, extensions?: ChatExtensions): GeminiRequest {
  const request = readChatRequest(json, 'gemini', 'Gemini');
  const { system, contents } = geminiContents(request);
  if (contents.length === 0) throw invalidParameter('messages', 'messages must hold at least one user, assistant or tool message');
  const body: GeminiGenerateContentBody = { contents };
  if (system.length > 0) body.systemInstruction = { parts: system };
  const config = generationConfig(request, extensions);
  if (Object.keys(config).length > 0) body.generationConfig = config;
  addTools(request, body);
  return { body, stream: request.stream, includeUsage: request.includeUsage };
}

/** The chat messages as Gemini's system instruction parts and contents (user and model turns, merged when consecutive). */
function geminiContents(request: ChatRequest): { system: GeminiPart[]; contents: GeminiContent[] } {
  const system: GeminiPart[] = [];
  const contents: GeminiContent[] = [];
  // Gemini's functionResponse names the function; chat completions names only the call id.
  const callNames = new Map<string, string>();
  const push = (role: GeminiContent['role'], parts: GeminiPart[]) => {
    if (parts.length === 0) return;
    const last = contents[contents.length - 1];
    if (last && last.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        if (message.text !== '') system.push({ text: message.text });
        break;
      case 'user':
        push('user', message.content.map(userPart));
        break;
      case 'assistant': {
        const parts: GeminiPart[] = [];
        if (message.text !== '') parts.push({ text: message.text });
        message.toolCalls.forEach((call, j) => {
          if (!isRecord(call.input)) {
            throw invalidParameter(`messages[${message.index}].tool_calls[${j}].function.arguments`, 'Gemini function call arguments must be a JSON object');
          }
          callNames.set(call.id, call.name);
          parts.push({ functionCall: { name: call.name, args: call.input } });
        });
        push('model', parts);
        break;
      }
      case 'tool': {
        const id = message.toolCallId;
        const name = callNames.get(id);
        if (name === undefined) {
          throw invalidParameter(`messages[${message.index}].tool_call_id`, `messages[${message.index}].tool_call_id ${JSON.stringify(id)} answers no earlier assistant tool call`);
        }
        push('user', [{ functionResponse: { name, response: functionResponse(message.text) } }]);
        break;
      }
    }
  }
  return { system, contents };
}

/** One part of a user message as Gemini's: text, inline base64 data, or a file by URL of a type its extension names. */
function userPart(part: ChatContentPart): GeminiPart {
  if (part.type === 'text') return { text: part.text };
  if (part.source.kind === 'base64') return { inlineData: { mimeType: part.source.mediaType, data: part.source.data } };
  const mimeType = imageMimeType(part.source.url);
  if (mimeType === undefined) {
    throw unsupportedParameter(part.param, `${part.param}: Gemini needs the image type; use a URL ending in .png, .jpg, .jpeg, .webp, .gif, .heic or .heif, or a data: URL`);
  }
  return { fileData: { mimeType, fileUri: part.source.url } };
}

/** generationConfig: limits and sampling, thinking, and the JSON response format. */
function generationConfig(request: ChatRequest, extensions: ChatExtensions | undefined): GeminiGenerationConfig {
  const config = samplingConfig(request);
  if (request.reasoningEffort !== undefined) config.thinkingConfig = { thinkingBudget: THINKING_BUDGET[request.reasoningEffort] };
  const reasoning = extensions?.reasoning;
  if (reasoning !== undefined) {
    // -1 is Gemini's dynamic thinking; thought summaries come back only when asked for.
    const budget = reasoning.budget === 'dynamic' ? -1 : reasoning.budget;
    config.thinkingConfig = { thinkingBudget: budget, ...(reasoning.summaries && budget !== 0 ? { includeThoughts: true } : {}) };
  }
  const format = request.responseFormat;
  if (format.kind !== 'text') {
    config.responseMimeType = 'application/json';
    if (format.kind === 'json_schema') config.responseJsonSchema = format.schema;
  }
  return config;
}

/** maxOutputTokens, stop sequences, temperature, topP, candidateCount, the penalties and the seed. */
function samplingConfig(request: ChatRequest): GeminiGenerationConfig {
  const config: GeminiGenerationConfig = {};
  if (request.maxTokens !== undefined) config.maxOutputTokens = request.maxTokens;
  if (request.stop) config.stopSequences = request.stop;
  if (request.temperature !== undefined) config.temperature = request.temperature;
  if (request.topP !== undefined) config.topP = request.topP;
  if (request.n !== undefined && request.n !== 1) config.candidateCount = request.n;
  if (request.presencePenalty !== undefined) config.presencePenalty = request.presencePenalty;
  if (request.frequencyPenalty !== undefined) config.frequencyPenalty = request.frequencyPenalty;
  if (request.seed !== undefined) config.seed = request.seed;
  return config;
}

/** Function declarations and the function-calling mode. */
function addTools(request: ChatRequest, body: GeminiGenerateContentBody): void {
  const { tools, toolChoice: choice } = request;
  if (tools.length > 0) {
    body.tools = [
      {
        functionDeclarations: tools.map((t) => ({
          name: t.name,
          ...(t.description !== undefined ? { description: t.description } : {}),
          ...(t.parameters !== undefined ? { parametersJsonSchema: t.parameters } : {}),
        })),
      },
    ];
    if (choice !== undefined) {
      const mode = choice.kind === 'auto' ? 'AUTO' : choice.kind === 'none' ? 'NONE' : 'ANY';
      body.toolConfig = { functionCallingConfig: { mode, ...(choice.kind === 'function' ? { allowedFunctionNames: [choice.name] } : {}) } };
    }
  } else if (choice !== undefined && choice.kind !== 'none') {
    throw invalidParameter('tool_choice', 'tool_choice needs tools');
  }
}

/** A tool result as functionResponse.response, which must be an object: a JSON object as is, anything else wrapped. */
function functionResponse(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed)) return parsed;
  } catch {
    // plain text
  }
  return { content: text };
}

export function geminiFinishReason(reason: unknown, calledFunctions: boolean): FinishReason {
  switch (reason) {
    case 'MAX_TOKENS':
      return 'length';
    case 'SAFETY':
    case 'RECITATION':
    case 'BLOCKLIST':
    case 'PROHIBITED_CONTENT':
    case 'SPII':
    case 'IMAGE_SAFETY':
      return 'content_filter';
    default:
      return calledFunctions ? 'tool_calls' : 'stop'; // STOP, MALFORMED_FUNCTION_CALL, OTHER
  }
}

/** What a reader of Gemini's answer keeps beyond the text and calls (ChatExtensions). */
export interface GeminiShaping {
  /** Keep thought summaries; hidden otherwise, as OpenAI hides its reasoning. */
  reasoning: boolean;
  /** Keep only the first function call: Gemini cannot be told to make at most one. */
  singleToolCall: boolean;
}

const PLAIN: GeminiShaping = { reasoning: false, singleToolCall: false };

export interface GeminiResponseContext extends Partial<GeminiShaping> {
  model: string;
  created: number;
  /** New tool-call ids (Gemini's function calls carry none). */
  newId: () => string;
}

interface CandidateContent {
  text: string;
  calls: ChatToolCall[];
  thought: string;
}

function candidateContent(candidate: Record<string, unknown>, newId: () => string, shaping: GeminiShaping, callsBefore = 0): CandidateContent {
  let text = '';
  let thought = '';
  const calls: ChatToolCall[] = [];
  const content = isRecord(candidate.content) ? candidate.content : {};
  for (const part of Array.isArray(content.parts) ? content.parts : []) {
    if (!isRecord(part)) continue;
    if (part.thought === true) {
      if (shaping.reasoning && typeof part.text === 'string') thought += part.text;
    } else if (typeof part.text === 'string') text += part.text;
    else if (isRecord(part.functionCall) && !(shaping.singleToolCall && callsBefore + calls.length > 0)) {
      const call = part.functionCall;
      calls.push({ id: newId(), type: 'function', function: { name: String(call.name), arguments: JSON.stringify(call.args ?? {}) } });
    }
  }
  return { text, calls, thought };
}

/** A generateContent response as a chat.completion: one choice per candidate. */
export function fromGeminiResponse(response: Record<string, unknown>, ctx: GeminiResponseContext): ChatCompletion {
  const candidates = Array.isArray(response.candidates) ? response.candidates.filter(isRecord) : [];
  const shaping: GeminiShaping = { reasoning: ctx.reasoning ?? false, singleToolCall: ctx.singleToolCall ?? false };
  const choices: ChatCompletionChoice[] = candidates.map((candidate, position) => {
    const { text, calls, thought } = candidateContent(candidate, ctx.newId, shaping);
    return {
      index: typeof candidate.index === 'number' ? candidate.index : position,
      message: {
        role: 'assistant',
        content: text === '' && calls.length > 0 ? null : text,
        refusal: null,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        ...(thought !== '' ? { thinking: [{ kind: 'thinking' as const, thinking: thought, signature: '' }] } : {}),
      },
      logprobs: null,
      finish_reason: geminiFinishReason(candidate.finishReason, calls.length > 0),
    };
  });
  if (choices.length === 0) {
    // A blocked prompt: promptFeedback.blockReason and no candidate.
    choices.push({ index: 0, message: { role: 'assistant', content: null, refusal: null }, logprobs: null, finish_reason: 'content_filter' });
  }
  const usage = normaliseGeminiUsage(response.usageMetadata);
  const out: ChatCompletion = {
    id: typeof response.responseId === 'string' ? response.responseId : ctx.newId(),
    object: 'chat.completion',
    created: ctx.created,
    model: typeof response.modelVersion === 'string' ? response.modelVersion : ctx.model,
    choices,
    system_fingerprint: null,
  };
  if (usage) out.usage = chatUsage(usage);
  return out;
}

/**
 * streamGenerateContent chunks → OpenAI chunks. Each chunk carries a piece of every candidate; a candidate's
 * function call arrives whole and becomes one tool-call delta; usageMetadata is cumulative, the last one counts.
 */
export class GeminiChunkTranslator {
  readonly #identity: ChunkIdentity;
  readonly #newId: () => string;
  readonly #shaping: GeminiShaping;
  readonly #started = new Set<number>();
  readonly #finished = new Set<number>();
  readonly #toolCounts = new Map<number, number>();
  #usage: unknown;
  #blocked = false;
  #identified = false;

  constructor(identity: ChunkIdentity, newId: () => string, shaping: GeminiShaping = PLAIN) {
    this.#identity = { ...identity };
    this.#newId = newId;
    this.#shaping = shaping;
  }

  /** One SSE data payload. */
  event(json: string): StreamStep {
    let response: unknown;
    try {
      response = JSON.parse(json);
    } catch {
      return { chunks: [], error: { message: 'malformed JSON in an upstream stream chunk', code: 'upstream_stream_error' } };
    }
    if (!isRecord(response)) return { chunks: [] };
    if (isRecord(response.error)) {
      const error = response.error;
      return {
        chunks: [],
        error: {
          message: typeof error.message === 'string' ? error.message : 'upstream stream error',
          code: typeof error.status === 'string' ? error.status.toLowerCase() : null,
        },
      };
    }
    if (!this.#identified) {
      this.#identified = true;
      if (typeof response.responseId === 'string') this.#identity.id = response.responseId;
      if (typeof response.modelVersion === 'string') this.#identity.model = response.modelVersion;
    }
    if (response.usageMetadata !== undefined) this.#usage = response.usageMetadata;
    if (isRecord(response.promptFeedback) && response.promptFeedback.blockReason !== undefined) this.#blocked = true;
    const chunks: ChatChunk[] = [];
    const candidates = Array.isArray(response.candidates) ? response.candidates.filter(isRecord) : [];
    candidates.forEach((candidate, position) => {
      const index = typeof candidate.index === 'number' ? candidate.index : position;
      const { text, calls, thought } = candidateContent(candidate, this.#newId, this.#shaping, this.#toolCounts.get(index) ?? 0);
      if (!this.#started.has(index)) {
        this.#started.add(index);
        chunks.push(chunk(this.#identity, index, { role: 'assistant', content: '' }));
      }
      if (thought !== '') chunks.push(chunk(this.#identity, index, { thinking: { block: 0, text: thought } }));
      if (text !== '') chunks.push(chunk(this.#identity, index, { content: text }));
      for (const call of calls) {
        const toolIndex = this.#toolCounts.get(index) ?? 0;
        this.#toolCounts.set(index, toolIndex + 1);
        chunks.push(chunk(this.#identity, index, { tool_calls: [{ index: toolIndex, id: call.id, type: 'function', function: call.function }] }));
      }
      if (candidate.finishReason !== undefined && !this.#finished.has(index)) {
        this.#finished.add(index);
        chunks.push(chunk(this.#identity, index, {}, geminiFinishReason(candidate.finishReason, (this.#toolCounts.get(index) ?? 0) > 0)));
      }
    });
    return { chunks };
  }

  end(cut?: string): StreamStep {
    const unfinished = [...this.#started].some((index) => !this.#finished.has(index));
    if (cut !== undefined || unfinished || (this.#started.size === 0 && !this.#blocked)) {
      return { chunks: [], error: { message: cut ?? 'stream ended before a finishReason', code: 'upstream_stream_error' } };
    }
    const chunks: ChatChunk[] = [];
    if (this.#started.size === 0) {
      chunks.push(chunk(this.#identity, 0, { role: 'assistant', content: '' }));
      chunks.push(chunk(this.#identity, 0, {}, 'content_filter'));
    }
    const usage = normaliseGeminiUsage(this.#usage);
    if (this.#identity.includeUsage && usage) chunks.push(usageChunk(this.#identity, chatUsage(usage)));
    return { chunks };
  }
}
