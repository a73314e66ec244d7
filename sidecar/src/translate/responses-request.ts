// The Responses API (POST /v1/responses) as a chat-completions request, for every provider that does not
// serve it itself: input items become chat messages, its parameters chat's, and what chat cannot say
// (thinking with a budget, Claude's signed thinking of earlier turns, at most one tool call) goes beside it as
// ChatExtensions (ADR 0901). Every parameter is in one table (RESPONSES_PARAMETERS): mapped, ignored with the
// reason, or refused with a 400 naming it, as for chat completions. Pure: tested without I/O.

import { isRecord } from '../../../contracts/json-record.ts';
import { checkParameters, ignore, isFalse, isZero, map, reject, type Handling } from './chat-parameters.ts';
import { EFFORT_BUDGETS, REASONING_EFFORTS, type ChatExtensions, type ReasoningEffort, type ThinkingBlock } from './chat-extensions.ts';
import type { ChatAssistantJson, ChatContentPartJson, ChatMessageJson, ChatRequestJson, ChatResponseFormatJson, ChatToolChoiceJson, ChatToolJson } from './chat-request-json.ts';
import { GatewayError, invalidParameter, unsupportedParameter } from './openai-error.ts';

export type ResponseItem = Record<string, unknown>;

export const RESPONSES_PARAMETERS: Readonly<Record<string, Handling>> = {
  model: map("picks the price entry, its provider and the route, as for chat completions; the route's own id goes upstream"),
  input: map('a string is one user message; items become chat turns (messages, function calls and their outputs, reasoning)'),
  instructions: map('a system message before the conversation; not carried over by `previous_response_id`, as at OpenAI'),
  previous_response_id: map("the stored conversation of a response this Tollgate made goes before `input`; another id is a 400 (OpenAI's own ids pass through to OpenAI)"),
  store: map('true (the default) keeps the response for `previous_response_id` in a bounded memory store; false keeps nothing'),
  include: map("`reasoning.encrypted_content` returns Claude's signed thinking in reasoning items, to send back without a store; other values are refused"),
  max_output_tokens: map('`max_completion_tokens` (thinking counts against it, as at OpenAI)'),
  temperature: map('`temperature`'),
  top_p: map('`top_p`'),
  tools: map('function tools → chat function tools; other tool types (web search, file search, custom, MCP …) are refused'),
  tool_choice: map('auto / none / required / {type: function, name} as in chat completions; other choices are refused'),
  parallel_tool_calls: map('false → at most one call: Claude and OpenAI-format upstreams are told, for Gemini the gateway keeps the first call'),
  text: map('`format` json_object / json_schema → `response_format`; `verbosity` medium only'),
  reasoning: map('`effort` → a thinking budget (Claude, Gemini) or the effort (OpenAI-format upstreams); `summary` returns the thinking as summary text'),
  stream: map('the Responses event stream, from response.created to response.completed with its usage'),
  stream_options: map('`include_obfuscation` is accepted and has no effect (nothing is padded)'),
  user: map("the span's user when no X-Tollgate-User header is sent; Claude's `metadata.user_id`"),
  safety_identifier: map("the span's user when neither X-Tollgate-User nor `user` is sent"),
  metadata: ignore("tags for OpenAI's dashboard; echoed in the response, never sent to another provider"),
  prompt_cache_key: ignore("a routing hint for OpenAI's prompt cache; it never changes the output"),
  prompt_cache_retention: ignore("OpenAI's prompt-cache lifetime; it never changes the output"),
  service_tier: reject('only OpenAI offers flex, scale and priority tiers', (v) => v === 'auto' || v === 'default'),
  truncation: reject('the gateway never drops input items to fit a context window: a conversation too long for the model is refused upstream', (v) => v === 'disabled'),
  background: reject('background responses are polled from OpenAI, which holds them', isFalse),
  top_logprobs: reject('log probabilities are not translated', isZero),
  max_tool_calls: reject('no other provider caps built-in tool calls'),
  conversation: reject('conversations are stored at OpenAI: use `previous_response_id` or send the items'),
  prompt: reject('reusable prompts are stored at OpenAI'),
  context_management: reject("OpenAI's server-side compaction is not translated"),
};

/** Where the stored conversation ends and `input` starts, for refusals that name the item. */
const HISTORY = 'previous_response_id';
/** Prefix of reasoning items' encrypted_content that Tollgate wrote: Claude's thinking, to be sent back. */
const THINKING_PREFIX = 'tollgate.thinking.v1.';

export interface ResponsesChatRequest {
  /** The chat-completions request. */
  chat: ChatRequestJson;
  extensions: ChatExtensions;
  /** The conversation as input items: the stored one, then this request's input (what the store keeps). */
  items: ResponseItem[];
  /** For each chat message, the request field it came from (`input[2]`), to name it in a refusal. */
  origins: string[];
}

/** Claude's thinking as a reasoning item's encrypted_content: opaque to the caller, read back by itself. */
export function encodeThinking(block: ThinkingBlock): string {
  const payload = block.kind === 'thinking' ? { t: block.thinking, s: block.signature } : { r: block.data };
  return THINKING_PREFIX + Buffer.from(JSON.stringify(payload)).toString('base64url');
}

/** The thinking in encrypted_content Tollgate wrote; undefined for any other (OpenAI's own cannot be read). */
export function decodeThinking(encrypted: unknown): ThinkingBlock | undefined {
  if (typeof encrypted !== 'string' || !encrypted.startsWith(THINKING_PREFIX)) return undefined;
  try {
    const payload: unknown = JSON.parse(Buffer.from(encrypted.slice(THINKING_PREFIX.length), 'base64url').toString('utf8'));
    if (!isRecord(payload)) return undefined;
    if (typeof payload.r === 'string') return { kind: 'redacted', data: payload.r };
    if (typeof payload.t === 'string' && typeof payload.s === 'string' && payload.s !== '') return { kind: 'thinking', thinking: payload.t, signature: payload.s };
  } catch {
    // not ours after all
  }
  return undefined;
}

/** Whether a reasoning item carries Tollgate's encoding (OpenAI cannot read it: it is dropped before OpenAI). */
export function isTollgateReasoning(item: ResponseItem): boolean {
  return item.type === 'reasoning' && typeof item.encrypted_content === 'string' && item.encrypted_content.startsWith(THINKING_PREFIX);
}

/** The request's `input` as items: a string is one user message. */
export function inputItems(request: Record<string, unknown>): ResponseItem[] {
  const input = request.input;
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  if (!Array.isArray(input)) throw new GatewayError(400, "Missing required parameter: 'input'.", { param: 'input', code: 'missing_required_parameter' });
  return input.map((item, i) => {
    if (!isRecord(item)) throw invalidParameter(`input[${i}]`, `input[${i}] must be an object`);
    return item;
  });
}

export function responsesToChat(request: Record<string, unknown>, history: readonly ResponseItem[]): ResponsesChatRequest {
  checkParameters(request, (name) => RESPONSES_PARAMETERS[name], 'through this gateway for models other than OpenAI');
  const input = inputItems(request);
  const items = [...history, ...input];
  const conversation = new Conversation();
  const instructions = request.instructions;
  if (typeof instructions === 'string' && instructions !== '') conversation.push({ role: 'system', content: instructions }, 'instructions');
  items.forEach((item, i) => conversation.item(item, i < history.length ? HISTORY : `input[${i - history.length}]`));
  const chat: ChatRequestJson = { model: request.model, messages: conversation.finish() };
  if (request.max_output_tokens !== undefined && request.max_output_tokens !== null) chat.max_completion_tokens = request.max_output_tokens;
  for (const name of ['temperature', 'top_p', 'user', 'safety_identifier', 'service_tier'] as const) {
    if (request[name] !== undefined && request[name] !== null) chat[name] = request[name];
  }
  const tools = functionTools(request.tools);
  if (tools.length > 0) chat.tools = tools;
  const choice = toolChoice(request.tool_choice);
  if (choice !== undefined) chat.tool_choice = choice;
  const format = responseFormat(request.text);
  if (format !== undefined) chat.response_format = format;
  if (request.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  includes(request.include);
  const reasoning = reasoningRequest(request.reasoning);
  return {
    chat,
    extensions: {
      reasoning,
      thinking: conversation.thinking,
      returnReasoning: reasoning !== undefined && reasoning.budget !== 0,
      singleToolCall: request.parallel_tool_calls === false,
    },
    items,
    origins: conversation.origins,
  };
}

/** The `include` values the gateway honours; the others ask for what only OpenAI's tools produce. */
function includes(include: unknown): void {
  if (include === undefined || include === null) return;
  if (!Array.isArray(include)) throw invalidParameter('include', 'include must be an array of strings');
  include.forEach((value, i) => {
    if (value !== 'reasoning.encrypted_content') {
      throw unsupportedParameter(
        `include[${i}]`,
        `include ${JSON.stringify(value)} is not supported through this gateway for models other than OpenAI: only reasoning.encrypted_content is`,
      );
    }
  });
}

export function includesEncryptedReasoning(request: Record<string, unknown>): boolean {
  return Array.isArray(request.include) && request.include.includes('reasoning.encrypted_content');
}

function reasoningRequest(reasoning: unknown): ChatExtensions['reasoning'] {
  if (reasoning === undefined || reasoning === null) return undefined;
  if (!isRecord(reasoning)) throw invalidParameter('reasoning', 'reasoning must be an object');
  const effort = reasoning.effort ?? 'medium';
  if (typeof effort !== 'string' || !(REASONING_EFFORTS as readonly string[]).includes(effort)) {
    throw invalidParameter('reasoning.effort', `reasoning.effort must be one of ${REASONING_EFFORTS.join(', ')}`);
  }
  const summary = reasoning.summary ?? reasoning.generate_summary;
  if (summary !== undefined && summary !== null && summary !== 'auto' && summary !== 'concise' && summary !== 'detailed') {
    throw invalidParameter('reasoning.summary', 'reasoning.summary must be auto, concise or detailed');
  }
  const typed = effort as ReasoningEffort;
  return { budget: EFFORT_BUDGETS[typed], effort: typed, summaries: summary !== undefined && summary !== null };
}

function functionTools(tools: unknown): ChatToolJson[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalidParameter('tools', 'tools must be an array');
  return tools.map((tool, i) => {
    if (!isRecord(tool)) throw invalidParameter(`tools[${i}]`, `tools[${i}] must be an object`);
    if (tool.type !== 'function') {
      throw unsupportedParameter(`tools[${i}].type`, `tools[${i}].type ${JSON.stringify(tool.type)}: only function tools are translated for models other than OpenAI`);
    }
    if (typeof tool.name !== 'string' || tool.name === '') throw invalidParameter(`tools[${i}].name`, `tools[${i}].name is required`);
    const fn: ChatToolJson['function'] = { name: tool.name };
    if (typeof tool.description === 'string') fn.description = tool.description;
    if (tool.parameters !== undefined && tool.parameters !== null) fn.parameters = tool.parameters;
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict;
    return { type: 'function', function: fn };
  });
}

function toolChoice(choice: unknown): ChatToolChoiceJson | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  throw unsupportedParameter('tool_choice', 'tool_choice must be "auto", "none", "required" or {"type": "function", "name": …} for models other than OpenAI');
}

function responseFormat(text: unknown): ChatResponseFormatJson | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isRecord(text)) throw invalidParameter('text', 'text must be an object');
  if (text.verbosity !== undefined && text.verbosity !== null && text.verbosity !== 'medium') {
    throw unsupportedParameter('text.verbosity', 'text.verbosity is not supported for models other than OpenAI: only OpenAI reasoning models take a verbosity');
  }
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isRecord(format)) throw invalidParameter('text.format', 'text.format must be an object');
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'json_schema') {
    if (!isRecord(format.schema)) throw invalidParameter('text.format.schema', 'text.format.schema must be a JSON Schema object');
    const spec: Extract<ChatResponseFormatJson, { type: 'json_schema' }>['json_schema'] = {
      name: typeof format.name === 'string' ? format.name : 'response',
      schema: format.schema,
    };
    if (typeof format.description === 'string') spec.description = format.description;
    if (typeof format.strict === 'boolean') spec.strict = format.strict;
    return { type: 'json_schema', json_schema: spec };
  }
  throw unsupportedParameter('text.format.type', `text.format.type ${JSON.stringify(format.type)} is not supported: use text, json_object or json_schema`);
}

/**
 * Builds the chat messages from items in order. A model turn is the items between two user-side items: its
 * reasoning, text and function calls become one assistant message (text and tool_calls), its reasoning the
 * thinking beside that message; function_call_output items become tool messages, and any images in them a
 * user message right after the tool messages (chat's tool messages hold text only).
 */
class Conversation {
  readonly messages: ChatMessageJson[] = [];
  readonly origins: string[] = [];
  readonly thinking = new Map<number, ThinkingBlock[]>();
  #assistant: ChatAssistantJson | null = null;
  #assistantOrigin = '';
  #pendingThinking: ThinkingBlock[] = [];
  #toolImages: ChatContentPartJson[] = [];
  #toolImagesOrigin = '';

  push(message: ChatMessageJson, origin: string): void {
    this.messages.push(message);
    this.origins.push(origin);
  }

  item(item: ResponseItem, at: string): void {
    const type = item.type ?? (typeof item.role === 'string' ? 'message' : undefined);
    switch (type) {
      case 'message':
        return this.#message(item, at);
      case 'function_call':
        return this.#functionCall(item, at);
      case 'function_call_output':
        return this.#functionOutput(item, at);
      case 'reasoning': {
        // Reasoning opens a model turn; text or calls already in one end it.
        if (this.#assistant !== null) this.#closeAssistant();
        this.#flushToolImages();
        const block = decodeThinking(item.encrypted_content);
        if (block !== undefined) this.#pendingThinking.push(block);
        return; // a summary without Claude's signed thinking cannot be sent back to any provider
      }
      default:
        throw unsupportedParameter(
          `${at}.type`,
          `${at}.type ${JSON.stringify(type)} is not supported for models other than OpenAI: send messages, function_call, function_call_output and reasoning items`,
        );
    }
  }

  finish(): ChatMessageJson[] {
    this.#closeAssistant();
    this.#flushToolImages();
    if (this.messages.length === 0) throw invalidParameter('input', 'input must hold at least one message');
    return this.messages;
  }

  #message(item: ResponseItem, at: string): void {
    const role = item.role;
    if (role === 'assistant') {
      this.#flushToolImages();
      // An assistant message starts a new turn's text; the function calls after it join that turn.
      this.#openAssistant(at).content = assistantText(item.content, at);
      return;
    }
    this.#endModelTurn();
    this.#flushToolImages();
    if (role === 'user') return this.push({ role: 'user', content: userContent(item.content, at) }, at);
    if (role === 'system' || role === 'developer') return this.push({ role: 'system', content: plainText(item.content, `${at}.content`, ['input_text']) }, at);
    throw invalidParameter(`${at}.role`, `${at}.role must be one of user, assistant, system, developer`);
  }

  #functionCall(item: ResponseItem, at: string): void {
    if (typeof item.call_id !== 'string' || item.call_id === '' || typeof item.name !== 'string') {
      throw invalidParameter(at, `${at}: a function_call needs a call_id and a name`);
    }
    this.#flushToolImages();
    const assistant = this.#assistant ?? this.#openAssistant(at);
    (assistant.tool_calls ??= []).push({
      id: item.call_id,
      type: 'function',
      function: { name: item.name, arguments: typeof item.arguments === 'string' ? item.arguments : '{}' },
    });
  }

  #functionOutput(item: ResponseItem, at: string): void {
    if (typeof item.call_id !== 'string' || item.call_id === '') throw invalidParameter(`${at}.call_id`, `${at}.call_id is required`);
    this.#endModelTurn();
    const output = item.output;
    let text: string;
    if (typeof output === 'string') text = output;
    else if (Array.isArray(output)) {
      const parts = userParts(output, `${at}.output`);
      text = parts
        .filter((part) => part.type === 'text')
        .map((part) => part.text)
        .join('');
      const images = parts.filter((part) => part.type === 'image_url');
      if (images.length > 0) {
        if (this.#toolImages.length === 0) this.#toolImagesOrigin = at;
        this.#toolImages.push(...images);
      }
    } else throw invalidParameter(`${at}.output`, `${at}.output must be a string or an array of content parts`);
    this.push({ role: 'tool', tool_call_id: item.call_id, content: text }, at);
  }

  #openAssistant(at: string): ChatAssistantJson {
    this.#closeAssistant();
    this.#assistant = { role: 'assistant', content: null };
    this.#assistantOrigin = at;
    return this.#assistant;
  }

  /** A user-side item ends the model's turn; thinking that no model output followed is dropped. */
  #endModelTurn(): void {
    this.#closeAssistant();
    this.#pendingThinking = [];
  }

  #closeAssistant(): void {
    const assistant = this.#assistant;
    if (assistant === null) return;
    this.#assistant = null;
    if (this.#pendingThinking.length > 0) {
      this.thinking.set(this.messages.length, this.#pendingThinking);
      this.#pendingThinking = [];
    }
    this.push(assistant, this.#assistantOrigin);
  }

  #flushToolImages(): void {
    if (this.#toolImages.length === 0) return;
    this.push({ role: 'user', content: this.#toolImages }, this.#toolImagesOrigin);
    this.#toolImages = [];
  }
}

/** A user message's content: a string, or input_text / input_image parts. */
function userContent(content: unknown, at: string): string | ChatContentPartJson[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidParameter(`${at}.content`, `${at}.content must be a string or an array of content parts`);
  return userParts(content, `${at}.content`);
}

function userParts(parts: unknown[], at: string): ChatContentPartJson[] {
  return parts.map((part, j) => {
    const where = `${at}[${j}]`;
    if (!isRecord(part)) throw invalidParameter(where, `${where} must be an object`);
    if ((part.type === 'input_text' || part.type === 'output_text') && typeof part.text === 'string') return { type: 'text', text: part.text };
    if (part.type === 'input_image') {
      if (typeof part.image_url !== 'string') {
        throw unsupportedParameter(`${where}.image_url`, `${where}: images are translated from image_url (a data: or https URL); file_id names a file stored at OpenAI`);
      }
      return { type: 'image_url', image_url: { url: part.image_url, ...(typeof part.detail === 'string' ? { detail: part.detail } : {}) } };
    }
    throw unsupportedParameter(`${where}.type`, `${where}.type ${JSON.stringify(part.type)} is not supported for models other than OpenAI: send input_text and input_image parts`);
  });
}

/** The text of an assistant message: output_text (and refusal) parts, or a string. */
function assistantText(content: unknown, at: string): string {
  return plainText(content, `${at}.content`, ['output_text', 'input_text', 'refusal']);
}

function plainText(content: unknown, at: string, types: readonly string[]): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidParameter(at, `${at} must be a string or an array of content parts`);
  return content
    .map((part, j) => {
      if (isRecord(part) && typeof part.type === 'string' && types.includes(part.type)) {
        const text = part.type === 'refusal' ? part.refusal : part.text;
        if (typeof text === 'string') return text;
      }
      throw unsupportedParameter(`${at}[${j}]`, `${at}[${j}]: only ${types.join(', ')} parts are accepted here`);
    })
    .join('');
}
