// The Anthropic Messages API (POST /v1/messages) as a chat-completions request, for the providers that do
// not speak it (OpenAI, Gemini, a local runtime): system blocks become system messages, content blocks chat
// content, tool_use and tool_result the tool calls and tool messages, and what chat cannot say (a thinking
// budget, at most one tool call) goes beside it as ChatExtensions (ADR 0901). Every parameter is in one table
// (MESSAGES_PARAMETERS): mapped, ignored with the reason, or refused with a 400 naming it. Pure.

import { isRecord } from '../../../contracts/json-record.ts';
import { checkParameters, ignore, map, reject, type Handling } from './chat-parameters.ts';
import { EFFORT_BUDGETS, effortForBudget, REASONING_EFFORTS, type ChatExtensions, type ReasoningEffort, type ReasoningRequest } from './chat-extensions.ts';
import type { ChatContentPartJson, ChatMessageJson, ChatRequestJson, ChatResponseFormatJson, ChatToolChoiceJson, ChatToolJson } from './chat-request-json.ts';
import type { ChatToolCall } from './openai-chat.ts';
import { invalidParameter, unsupportedParameter } from './openai-error.ts';

export const MESSAGES_PARAMETERS: Readonly<Record<string, Handling>> = {
  model: map("picks the price entry, its provider and the route, as for chat completions; the route's own id goes upstream"),
  max_tokens: map('`max_completion_tokens` (Gemini: `maxOutputTokens`)'),
  messages: map('user and assistant turns; tool_use → tool calls, tool_result → tool messages; thinking blocks of earlier turns are dropped'),
  system: map('a system message per text block'),
  stop_sequences: map('`stop`'),
  temperature: map('`temperature`'),
  top_p: map('`top_p`'),
  stream: map('the Messages event stream, from message_start to message_stop, usage in message_delta'),
  tools: map('custom tools → function tools (`input_schema` → `parameters`); server tools (web search, code execution, …) are refused'),
  tool_choice: map('auto → auto, any → required, tool → that function, none → none; `disable_parallel_tool_use` → at most one call'),
  metadata: map("`user_id` is the span's user when no X-Tollgate-User header is sent, and chat's `user`"),
  thinking: map(
    'enabled → a thinking budget (Gemini) or the nearest effort (OpenAI-format upstreams); adaptive → the model decides; the thinking comes back as thinking blocks where the provider returns it',
  ),
  output_config: map('`effort` → the reasoning effort; `format` (json_schema) → `response_format`'),
  service_tier: ignore('Anthropic capacity tiers; every other provider serves its standard tier'),
  cache_control: ignore("Anthropic's prompt-cache breakpoint; the other providers cache on their own terms and it never changes the output"),
  top_k: reject('chat completions has no top-k sampling'),
  container: reject("containers run Anthropic's code-execution tool"),
  mcp_servers: reject("MCP servers are called by Anthropic's API"),
  context_management: reject("Anthropic's server-side context editing is not translated"),
  inference_geo: reject('where Anthropic runs inference does not apply to another provider'),
  speed: reject("Anthropic's fast mode is not translated"),
  diagnostics: reject("Anthropic's diagnostics are not translated"),
};

export interface MessagesChatRequest {
  chat: ChatRequestJson;
  extensions: ChatExtensions;
  /** For each chat message, the request field it came from (`messages[2]`), to name it in a refusal. */
  origins: string[];
}

const ANTHROPIC_IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

export function messagesToChat(request: Record<string, unknown>): MessagesChatRequest {
  checkParameters(request, (name) => MESSAGES_PARAMETERS[name], 'through this gateway for models other than Claude');
  const messages: ChatMessageJson[] = [];
  const origins: string[] = [];
  const push = (message: ChatMessageJson, origin: string) => {
    messages.push(message);
    origins.push(origin);
  };
  systemMessages(request.system).forEach((text, i) => push({ role: 'system', content: text }, `system[${i}]`));
  if (!Array.isArray(request.messages) || request.messages.length === 0) throw invalidParameter('messages', 'messages: Field required');
  request.messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    if (!isRecord(message)) throw invalidParameter(at, `${at} must be an object`);
    if (message.role === 'user') for (const out of userTurn(message.content, at)) push(out, at);
    else if (message.role === 'assistant') push(assistantTurn(message.content, at), at);
    else throw invalidParameter(`${at}.role`, `${at}.role: Input should be 'user' or 'assistant'`);
  });

  const chat: ChatRequestJson = { model: request.model, messages };
  const max = request.max_tokens;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1) throw invalidParameter('max_tokens', 'max_tokens: a positive integer is required');
  chat.max_completion_tokens = max;
  if (request.stop_sequences !== undefined && request.stop_sequences !== null) chat.stop = request.stop_sequences;
  for (const name of ['temperature', 'top_p'] as const) if (request[name] !== undefined && request[name] !== null) chat[name] = request[name];
  const user = isRecord(request.metadata) ? request.metadata.user_id : undefined;
  if (typeof user === 'string' && user !== '') chat.user = user;
  const tools = functionTools(request.tools);
  if (tools.length > 0) chat.tools = tools;
  const choice = isRecord(request.tool_choice) ? request.tool_choice : undefined;
  if (request.tool_choice !== undefined && request.tool_choice !== null && choice === undefined) throw invalidParameter('tool_choice', 'tool_choice must be an object');
  if (choice !== undefined) chat.tool_choice = toolChoice(choice);
  const output = isRecord(request.output_config) ? request.output_config : {};
  if (isRecord(output.format)) chat.response_format = responseFormat(output.format);
  if (request.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  const reasoning = reasoningRequest(request.thinking, output.effort);
  return {
    chat,
    extensions: {
      reasoning,
      returnReasoning: reasoning !== undefined && reasoning.budget !== 0,
      singleToolCall: choice?.disable_parallel_tool_use === true,
    },
    origins,
  };
}

function systemMessages(system: unknown): string[] {
  if (system === undefined || system === null) return [];
  if (typeof system === 'string') return system === '' ? [] : [system];
  if (!Array.isArray(system)) throw invalidParameter('system', 'system must be a string or an array of text blocks');
  return system.map((block, i) => {
    if (isRecord(block) && block.type === 'text' && typeof block.text === 'string') return block.text;
    throw invalidParameter(`system[${i}]`, `system[${i}] must be a text block`);
  });
}

function blocksOf(content: unknown, at: string): unknown[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalidParameter(`${at}.content`, `${at}.content must be a string or an array of content blocks`);
  return content;
}

/**
 * A user turn: its tool_result blocks first, as tool messages (chat wants them right after the assistant's
 * calls), the images some results hold in a user message after them, then the rest of the turn.
 */
function userTurn(content: unknown, at: string): ChatMessageJson[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const tools: ChatMessageJson[] = [];
  const toolImages: ChatContentPartJson[] = [];
  const parts: ChatContentPartJson[] = [];
  blocksOf(content, at).forEach((block, j) => {
    const where = `${at}.content[${j}]`;
    if (!isRecord(block)) throw invalidParameter(where, `${where} must be an object`);
    if (block.type === 'tool_result') {
      if (typeof block.tool_use_id !== 'string' || block.tool_use_id === '') throw invalidParameter(`${where}.tool_use_id`, `${where}.tool_use_id is required`);
      const result = blocksOf(block.content ?? '', where).map((inner, k) => contentPart(inner, `${where}.content[${k}]`));
      const text = result
        .filter((part) => part.type === 'text')
        .map((part) => part.text)
        .join('');
      toolImages.push(...result.filter((part) => part.type === 'image_url'));
      // Chat has no error flag on a tool result: the model is told in the text.
      tools.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${text}` : text });
      return;
    }
    parts.push(contentPart(block, where));
  });
  const out: ChatMessageJson[] = [...tools];
  if (toolImages.length > 0) out.push({ role: 'user', content: toolImages });
  if (parts.length > 0) out.push({ role: 'user', content: parts });
  return out;
}

/** A text or image block as a chat content part. */
function contentPart(block: unknown, where: string): ChatContentPartJson {
  if (!isRecord(block)) throw invalidParameter(where, `${where} must be an object`);
  if (block.type === 'text' && typeof block.text === 'string') return { type: 'text', text: block.text };
  if (block.type === 'image') {
    const source = isRecord(block.source) ? block.source : {};
    if (source.type === 'base64' && typeof source.data === 'string' && typeof source.media_type === 'string') {
      if (!ANTHROPIC_IMAGE_TYPES.has(source.media_type))
        throw invalidParameter(`${where}.source.media_type`, `${where}.source.media_type must be image/jpeg, image/png, image/gif or image/webp`);
      return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } };
    }
    if (source.type === 'url' && typeof source.url === 'string') return { type: 'image_url', image_url: { url: source.url } };
    throw unsupportedParameter(`${where}.source`, `${where}.source: images are translated from base64 data or a URL; a file id names a file stored at Anthropic`);
  }
  throw unsupportedParameter(
    `${where}.type`,
    `${where}.type ${JSON.stringify(block.type)} is not supported for models other than Claude: send text, image, tool_use and tool_result blocks`,
  );
}

/** An assistant turn: its text and tool calls; thinking of earlier turns is the model's own and not sent back. */
function assistantTurn(content: unknown, at: string): ChatMessageJson {
  let text = '';
  const calls: ChatToolCall[] = [];
  blocksOf(content, at).forEach((block, j) => {
    const where = `${at}.content[${j}]`;
    if (!isRecord(block)) throw invalidParameter(where, `${where} must be an object`);
    if (block.type === 'text' && typeof block.text === 'string') text += block.text;
    else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalidParameter(where, `${where}: a tool_use block needs an id and a name`);
      calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    } else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      throw unsupportedParameter(`${where}.type`, `${where}.type ${JSON.stringify(block.type)} is not supported for models other than Claude`);
    }
  });
  return { role: 'assistant', content: text === '' && calls.length > 0 ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
}

function functionTools(tools: unknown): ChatToolJson[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalidParameter('tools', 'tools: Input should be a valid list');
  return tools.map((tool, i) => {
    if (!isRecord(tool)) throw invalidParameter(`tools[${i}]`, `tools[${i}] must be an object`);
    if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom') {
      throw unsupportedParameter(`tools[${i}].type`, `tools[${i}].type ${JSON.stringify(tool.type)}: Anthropic's server tools run only at Anthropic`);
    }
    if (typeof tool.name !== 'string' || tool.name === '') throw invalidParameter(`tools[${i}].name`, `tools[${i}].name: Field required`);
    if (!isRecord(tool.input_schema)) throw invalidParameter(`tools[${i}].input_schema`, `tools[${i}].input_schema: Field required`);
    return {
      type: 'function',
      function: { name: tool.name, ...(typeof tool.description === 'string' ? { description: tool.description } : {}), parameters: tool.input_schema },
    };
  });
}

function toolChoice(choice: Record<string, unknown>): ChatToolChoiceJson {
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      if (typeof choice.name !== 'string') throw invalidParameter('tool_choice.name', 'tool_choice.name: Field required');
      return { type: 'function', function: { name: choice.name } };
    default:
      throw invalidParameter('tool_choice.type', "tool_choice.type must be one of 'auto', 'any', 'tool', 'none'");
  }
}

function responseFormat(format: Record<string, unknown>): ChatResponseFormatJson {
  if (format.type !== 'json_schema' || !isRecord(format.schema)) {
    throw invalidParameter('output_config.format', 'output_config.format must be {"type": "json_schema", "schema": {…}}');
  }
  return { type: 'json_schema', json_schema: { name: 'response', schema: format.schema } };
}

function reasoningRequest(thinking: unknown, effort: unknown): ReasoningRequest | undefined {
  let named: ReasoningEffort | null = null;
  if (effort !== undefined && effort !== null) {
    if (typeof effort !== 'string' || !(REASONING_EFFORTS as readonly string[]).includes(effort)) {
      throw invalidParameter('output_config.effort', 'output_config.effort must be one of low, medium, high, xhigh, max');
    }
    named = effort as ReasoningEffort;
  }
  if (thinking === undefined || thinking === null) return named === null ? undefined : { budget: EFFORT_BUDGETS[named], effort: named, summaries: true };
  if (!isRecord(thinking)) throw invalidParameter('thinking', 'thinking must be an object');
  switch (thinking.type) {
    case 'enabled': {
      const budget = thinking.budget_tokens;
      if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < 1)
        throw invalidParameter('thinking.budget_tokens', 'thinking.budget_tokens must be a positive integer');
      return { budget, effort: named ?? effortForBudget(budget), summaries: true };
    }
    case 'adaptive':
      return { budget: 'dynamic', effort: named, summaries: true };
    case 'disabled':
      return { budget: 0, effort: null, summaries: false };
    default:
      throw invalidParameter('thinking.type', "thinking.type must be 'enabled', 'adaptive' or 'disabled'");
  }
}
