// Reading an OpenAI chat-completions request into the typed pivot (chat-pivot.ts) the same way for every target:
// the message list, text content (a string or text parts), user content parts (text and images), tool calls
// and their JSON arguments, tools and the other parameters. Anything a translator cannot carry is refused here
// with the JSON path of the offending field as `param`.

import { isRecord } from '../../../contracts/json-record.ts';
import { checkChatParameters, type TranslatedTarget } from './chat-parameters.ts';
import type { ChatContentPart, ChatMessage, ChatReasoningEffort, ChatRequest, ChatTool, ChatToolCallIn, ChatToolChoice, JsonMode } from './chat-pivot.ts';
import { GatewayError, invalidParameter, unsupportedParameter } from './openai-error.ts';

/** A message whose role is known, before its content is read. */
interface RawMessage {
  role: ChatMessage['role'];
  index: number;
  raw: Record<string, unknown>;
}

/**
 * The caller's chat-completions JSON read into the pivot a translator to `target` takes, once: the parameter
 * table first (a parameter `target` cannot honour is refused, `provider` names it), then each field; a field that
 * cannot be read is refused with a 400 naming its JSON path.
 */
export function readChatRequest(body: Record<string, unknown>, target: TranslatedTarget, provider: string): ChatRequest {
  checkChatParameters(body, target, provider);
  const messages = chatMessages(body).map(readMessage);
  const maxTokens = maxTokensOf(body);
  const stop = stopSequences(body);
  const temperature = numberParam(body, 'temperature', 0, 2);
  const topP = numberParam(body, 'top_p', 0, 1);
  const n = numberParam(body, 'n', 1, 8);
  if (n !== undefined && !Number.isInteger(n)) throw invalidParameter('n', 'n must be an integer');
  const presencePenalty = numberParam(body, 'presence_penalty', -2, 2);
  const frequencyPenalty = numberParam(body, 'frequency_penalty', -2, 2);
  const seed = seedOf(body);
  const reasoningEffort = reasoningEffortOf(body);
  const tools = functionTools(body);
  return {
    messages,
    tools,
    toolChoice: toolChoice(body, tools),
    parallelToolCalls: body.parallel_tool_calls !== false,
    maxTokens,
    stop,
    temperature,
    topP,
    n,
    presencePenalty,
    frequencyPenalty,
    seed,
    reasoningEffort,
    responseFormat: responseFormat(body),
    stream: body.stream === true,
    includeUsage: includeUsage(body),
    user: typeof body.user === 'string' && body.user !== '' ? body.user : undefined,
  };
}

function readMessage(message: RawMessage): ChatMessage {
  const { role, index } = message;
  switch (role) {
    case 'system':
      return { role, index, text: textContent(message) };
    case 'user':
      return { role, index, content: userParts(message) };
    case 'assistant': {
      const text = textContent(message);
      return { role, index, text, toolCalls: toolCalls(message) };
    }
    case 'tool': {
      const toolCallId = toolCallIdOf(message);
      return { role, index, toolCallId, text: textContent(message) };
    }
  }
}

/** The request's messages, checked for shape; `developer` is read as `system` (OpenAI's newer name for it). */
function chatMessages(body: Record<string, unknown>): RawMessage[] {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new GatewayError(400, "Missing required parameter: 'messages'.", { param: 'messages', code: 'missing_required_parameter' });
  }
  return messages.map((raw, index) => {
    if (!isRecord(raw)) throw invalidParameter(`messages[${index}]`, `messages[${index}] must be an object`);
    const role = raw.role;
    switch (role) {
      case 'system':
      case 'developer':
        return { role: 'system', index, raw };
      case 'user':
      case 'assistant':
      case 'tool':
        return { role, index, raw };
      case 'function':
        throw unsupportedParameter(`messages[${index}].role`, "messages with role 'function' are deprecated by OpenAI: send role 'tool' with a tool_call_id");
      default:
        throw invalidParameter(`messages[${index}].role`, `messages[${index}].role must be one of system, developer, user, assistant, tool`);
    }
  });
}

/** Text of a system, assistant or tool message: a string, or an array of text (and refusal) parts. */
function textContent(message: RawMessage): string {
  const content = message.raw.content;
  const param = `messages[${message.index}].content`;
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidParameter(param, `${param} must be a string or an array of content parts`);
  return content
    .map((part, j) => {
      if (isRecord(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
      if (isRecord(part) && part.type === 'refusal' && typeof part.refusal === 'string') return part.refusal;
      throw unsupportedParameter(`${param}[${j}]`, `${param}[${j}]: only text parts are accepted in ${String(message.raw.role)} messages`);
    })
    .join('');
}

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s;

/** Content of a user message: text parts and images (data URLs decoded, http(s) URLs kept as URLs). */
function userParts(message: RawMessage): ChatContentPart[] {
  const content = message.raw.content;
  const param = `messages[${message.index}].content`;
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalidParameter(param, `${param} must be a string or an array of content parts`);
  return content.map((part, j): ChatContentPart => {
    const at = `${param}[${j}]`;
    if (!isRecord(part)) throw invalidParameter(at, `${at} must be an object`);
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw invalidParameter(`${at}.text`, `${at}.text must be a string`);
      return { type: 'text', text: part.text };
    }
    if (part.type === 'image_url') {
      const image = part.image_url;
      const url = isRecord(image) ? image.url : undefined;
      if (typeof url !== 'string') throw invalidParameter(`${at}.image_url.url`, `${at}.image_url.url must be a string`);
      // `detail` is a resolution hint for OpenAI's vision pricing; the other providers pick their own.
      const data = DATA_URL.exec(url);
      if (data) return { type: 'image', source: { kind: 'base64', mediaType: data[1]!.toLowerCase(), data: data[2]! }, param: `${at}.image_url.url` };
      if (url.startsWith('data:')) {
        throw invalidParameter(`${at}.image_url.url`, `${at}.image_url.url: a data URL must be base64 (data:<media type>;base64,<data>)`);
      }
      if (/^https?:\/\//i.test(url)) return { type: 'image', source: { kind: 'url', url }, param: `${at}.image_url.url` };
      throw invalidParameter(`${at}.image_url.url`, `${at}.image_url.url must be a data: URL or an http(s) URL`);
    }
    throw unsupportedParameter(`${at}.type`, `${at}.type ${JSON.stringify(part.type)} is not supported through this gateway: send text and image_url parts`);
  });
}

/** An assistant message's tool calls, arguments parsed. */
function toolCalls(message: RawMessage): ChatToolCallIn[] {
  const calls = message.raw.tool_calls;
  if (calls === undefined || calls === null) return [];
  const param = `messages[${message.index}].tool_calls`;
  if (!Array.isArray(calls)) throw invalidParameter(param, `${param} must be an array`);
  return calls.map((call, j) => {
    const at = `${param}[${j}]`;
    if (!isRecord(call) || !isRecord(call.function) || typeof call.id !== 'string' || typeof call.function.name !== 'string') {
      throw invalidParameter(at, `${at} must have an id and a function with a name`);
    }
    if (call.type !== undefined && call.type !== 'function') throw unsupportedParameter(`${at}.type`, `${at}.type: only function tool calls are supported`);
    const args = call.function.arguments;
    let input: unknown = {};
    if (typeof args === 'string' && args.trim() !== '') {
      try {
        input = JSON.parse(args);
      } catch {
        throw invalidParameter(`${at}.function.arguments`, `${at}.function.arguments is not valid JSON`);
      }
    }
    return { id: call.id, name: call.function.name, input };
  });
}

function toolCallIdOf(message: RawMessage): string {
  const id = message.raw.tool_call_id;
  if (typeof id !== 'string' || id === '') {
    throw invalidParameter(`messages[${message.index}].tool_call_id`, `messages[${message.index}].tool_call_id is required for role 'tool'`);
  }
  return id;
}

/** The request's tools; only `function` tools translate. */
function functionTools(body: Record<string, unknown>): ChatTool[] {
  const tools = body.tools;
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalidParameter('tools', 'tools must be an array');
  return tools.map((tool, i) => {
    if (!isRecord(tool)) throw invalidParameter(`tools[${i}]`, `tools[${i}] must be an object`);
    if (tool.type !== 'function') throw unsupportedParameter(`tools[${i}].type`, `tools[${i}].type ${JSON.stringify(tool.type)}: only function tools are supported`);
    const fn = tool.function;
    if (!isRecord(fn) || typeof fn.name !== 'string' || fn.name === '') throw invalidParameter(`tools[${i}].function.name`, `tools[${i}].function.name is required`);
    if (fn.parameters !== undefined && !isRecord(fn.parameters)) {
      throw invalidParameter(`tools[${i}].function.parameters`, `tools[${i}].function.parameters must be a JSON Schema object`);
    }
    return {
      name: fn.name,
      description: typeof fn.description === 'string' ? fn.description : undefined,
      parameters: fn.parameters,
    };
  });
}

function toolChoice(body: Record<string, unknown>, tools: readonly ChatTool[]): ChatToolChoice | undefined {
  const choice = body.tool_choice;
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return { kind: choice };
  if (isRecord(choice) && choice.type === 'function' && isRecord(choice.function) && typeof choice.function.name === 'string') {
    const name = choice.function.name;
    if (!tools.some((t) => t.name === name)) {
      throw invalidParameter('tool_choice', `tool_choice names function ${JSON.stringify(name)}, which is not in tools`);
    }
    return { kind: 'function', name };
  }
  throw unsupportedParameter('tool_choice', 'tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":…}}');
}

/** max_completion_tokens wins over the older max_tokens; both must be positive integers. */
function maxTokensOf(body: Record<string, unknown>): number | undefined {
  for (const name of ['max_completion_tokens', 'max_tokens'] as const) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw invalidParameter(name, `${name} must be a positive integer`);
    return value;
  }
  return undefined;
}

function stopSequences(body: Record<string, unknown>): string[] | undefined {
  const stop = body.stop;
  if (stop === undefined || stop === null) return undefined;
  if (typeof stop === 'string') return [stop];
  if (Array.isArray(stop) && stop.every((s) => typeof s === 'string')) return stop;
  throw invalidParameter('stop', 'stop must be a string or an array of strings');
}

function numberParam(body: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw invalidParameter(name, `${name} must be a number from ${min} to ${max}`);
  }
  return value;
}

function responseFormat(body: Record<string, unknown>): JsonMode {
  const format = body.response_format;
  if (format === undefined || format === null) return { kind: 'text' };
  if (!isRecord(format)) throw invalidParameter('response_format', 'response_format must be an object');
  if (format.type === 'text') return { kind: 'text' };
  if (format.type === 'json_object') return { kind: 'json_object' };
  if (format.type === 'json_schema') {
    const spec = format.json_schema;
    if (!isRecord(spec) || !isRecord(spec.schema)) {
      throw invalidParameter('response_format.json_schema.schema', 'response_format.json_schema.schema must be a JSON Schema object');
    }
    return { kind: 'json_schema', name: typeof spec.name === 'string' ? spec.name : 'response', schema: spec.schema };
  }
  throw unsupportedParameter('response_format.type', `response_format.type ${JSON.stringify(format.type)} is not supported: use text, json_object or json_schema`);
}

function includeUsage(body: Record<string, unknown>): boolean {
  return body.stream === true && isRecord(body.stream_options) && body.stream_options.include_usage === true;
}

/** Gemini's sampling seed (the parameter table refuses it elsewhere). */
function seedOf(body: Record<string, unknown>): number | undefined {
  const seed = body.seed;
  if (seed === undefined || seed === null) return undefined;
  if (typeof seed !== 'number' || !Number.isInteger(seed)) throw invalidParameter('seed', 'seed must be an integer');
  return seed;
}

const REASONING_EFFORTS: ReadonlySet<unknown> = new Set<ChatReasoningEffort>(['none', 'minimal', 'low', 'medium', 'high']);
const isReasoningEffort = (value: unknown): value is ChatReasoningEffort => REASONING_EFFORTS.has(value);

function reasoningEffortOf(body: Record<string, unknown>): ChatReasoningEffort | undefined {
  const effort = body.reasoning_effort;
  if (effort === undefined || effort === null) return undefined;
  if (!isReasoningEffort(effort)) throw invalidParameter('reasoning_effort', 'reasoning_effort must be one of none, minimal, low, medium, high');
  return effort;
}
