// Fake Bedrock Converse and ConverseStream (POST /model/{id}/converse, /converse-stream), for any model id: Claude
// called natively, and Nova, Llama, Mistral … that /v1 reaches through Converse (ADR 0914). It checks the body
// the way Bedrock's validation does (the roles alternate and start with a user turn, each content block is one
// known member, a tool block needs the tools declared, inferenceConfig and toolConfig hold only their fields) and
// answers with text or, for `toolCall`, a toolUse block, in Converse's JSON or as ConverseStream members in AWS's
// event stream (frames with their CRCs). The SigV4 check is llm-bedrock.ts's, before this runs.

import { anthropicReply } from './llm-anthropic.ts';
import { converseFrame, exceptionFrame } from './llm-bedrock.ts';
import { sendBedrockError, sendBehaviourError } from './llm-errors.ts';
import { splitText } from './llm-reply-content.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeBehaviour, FakeExchange } from './llm-upstream.ts';

const fakeLatencyMs = 412;
const defaultText = 'Hello from the fake Converse upstream.';
const TOP_LEVEL = new Set([
  'messages',
  'system',
  'inferenceConfig',
  'toolConfig',
  'guardrailConfig',
  'additionalModelRequestFields',
  'additionalModelResponseFieldPaths',
  'promptVariables',
  'requestMetadata',
  'performanceConfig',
]);
const INFERENCE_FIELDS = new Set(['maxTokens', 'temperature', 'topP', 'stopSequences']);
const BLOCK_MEMBERS = new Set(['text', 'image', 'document', 'video', 'toolUse', 'toolResult', 'guardContent', 'cachePoint', 'reasoningContent']);
const IMAGE_FORMATS = new Set(['png', 'jpeg', 'gif', 'webp']);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const invalid = (detail: string) => `1 validation error detected: ${detail}`;

/** One content block: exactly one member, and the members this fake reads in their documented shape. */
function blockProblem(block: unknown, at: string, toolUseIds: Set<string>): string | undefined {
  const b = jsonObject(block);
  const members = b === null ? [] : Object.keys(b);
  if (b === null || members.length !== 1 || !BLOCK_MEMBERS.has(members[0]!)) return invalid(`Value at '${at}' must have exactly one known member`);
  if (b.text !== undefined) {
    if (typeof b.text !== 'string' || b.text.trim() === '') return `The text field in the ContentBlock object at ${at} is blank. Add text to the text field, and try again.`;
  }
  const image = jsonObject(b.image);
  if (b.image !== undefined) {
    const bytes = jsonObject(image?.source)?.bytes;
    if (image === null || !IMAGE_FORMATS.has(String(image.format)) || typeof bytes !== 'string' || !BASE64.test(bytes))
      return invalid(`Value at '${at}.image' is not a valid image`);
  }
  const use = jsonObject(b.toolUse);
  if (b.toolUse !== undefined) {
    if (use === null || typeof use.toolUseId !== 'string' || typeof use.name !== 'string' || use.input === undefined) return invalid(`Value at '${at}.toolUse' is not valid`);
    toolUseIds.add(use.toolUseId);
  }
  const result = jsonObject(b.toolResult);
  if (b.toolResult !== undefined) {
    if (result === null || typeof result.toolUseId !== 'string' || !Array.isArray(result.content)) return invalid(`Value at '${at}.toolResult' is not valid`);
    if (!toolUseIds.has(result.toolUseId)) return `The toolUseId ${result.toolUseId} at ${at} does not match a toolUse block of an earlier turn.`;
  }
  return undefined;
}

function messagesProblem(messages: unknown): { problem?: string; toolBlocks: boolean } {
  if (!Array.isArray(messages) || messages.length === 0)
    return { problem: invalid("Value at 'messages' failed to satisfy constraint: Member must not be null"), toolBlocks: false };
  const toolUseIds = new Set<string>();
  let toolBlocks = false;
  for (const [i, message] of messages.entries()) {
    const m = jsonObject(message);
    if (m === null || (m.role !== 'user' && m.role !== 'assistant') || !Array.isArray(m.content) || m.content.length === 0) {
      return { problem: `messages.${i} must have a role of user or assistant and a content list`, toolBlocks };
    }
    if (i === 0 && m.role !== 'user')
      return { problem: 'A conversation must start with a user message. Try again with a conversation that starts with a user message.', toolBlocks };
    if (i > 0 && jsonObject(messages[i - 1])?.role === m.role) {
      return {
        problem: 'A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.',
        toolBlocks,
      };
    }
    for (const [j, block] of m.content.entries()) {
      const problem = blockProblem(block, `messages.${i}.content.${j}`, toolUseIds);
      if (problem !== undefined) return { problem, toolBlocks };
      const b = jsonObject(block);
      toolBlocks ||= b?.toolUse !== undefined || b?.toolResult !== undefined;
    }
  }
  return { toolBlocks };
}

function configProblem(body: Record<string, unknown>): string | undefined {
  const system = body.system;
  if (system !== undefined && (!Array.isArray(system) || system.some((s) => typeof jsonObject(s)?.text !== 'string')))
    return invalid("Value at 'system' is not a list of text blocks");
  const inference = body.inferenceConfig;
  if (inference !== undefined) {
    const config = jsonObject(inference);
    const unknown = config === null ? 'inferenceConfig' : Object.keys(config).find((key) => !INFERENCE_FIELDS.has(key));
    if (unknown !== undefined) return `extraneous key [${unknown}] is not permitted`;
    const max = config!.maxTokens;
    if (max !== undefined && (typeof max !== 'number' || !Number.isInteger(max) || max < 1))
      return invalid("Value at 'inferenceConfig.maxTokens' must be an integer of at least 1");
    for (const key of ['temperature', 'topP'] as const) {
      const v = config![key];
      if (v !== undefined && (typeof v !== 'number' || v < 0 || v > 1)) return invalid(`Value at 'inferenceConfig.${key}' must be from 0 to 1`);
    }
  }
  const toolConfig = body.toolConfig;
  if (toolConfig === undefined) return undefined;
  const tools = jsonObject(toolConfig)?.tools;
  if (!Array.isArray(tools) || tools.length === 0) return invalid("Value at 'toolConfig.tools' must have at least 1 member");
  for (const [i, tool] of tools.entries()) {
    const spec = jsonObject(jsonObject(tool)?.toolSpec);
    if (spec === null || typeof spec.name !== 'string' || jsonObject(jsonObject(spec.inputSchema)?.json) === null)
      return invalid(`Value at 'toolConfig.tools.${i}.toolSpec' is not valid`);
  }
  const choice = jsonObject(jsonObject(toolConfig)?.toolChoice);
  if (jsonObject(toolConfig)?.toolChoice !== undefined) {
    const kinds = choice === null ? [] : Object.keys(choice);
    if (kinds.length !== 1 || !['auto', 'any', 'tool'].includes(kinds[0]!)) return invalid("Value at 'toolConfig.toolChoice' must be one of auto, any or tool");
    if (choice!.tool !== undefined && typeof jsonObject(choice!.tool)?.name !== 'string') return invalid("Value at 'toolConfig.toolChoice.tool.name' must not be null");
  }
  return undefined;
}

/** What Bedrock's validation refuses in a Converse request; undefined for a request it takes. */
export function converseProblem(body: Record<string, unknown> | null): string | undefined {
  if (body === null) return 'The request body is not a JSON object.';
  const extraneous = Object.keys(body).find((key) => !TOP_LEVEL.has(key));
  if (extraneous !== undefined) return `extraneous key [${extraneous}] is not permitted`;
  const { problem, toolBlocks } = messagesProblem(body.messages);
  if (problem !== undefined) return problem;
  if (toolBlocks && body.toolConfig === undefined) return 'The toolConfig field must be defined when using toolUse and toolResult content blocks.';
  return configProblem(body);
}

/** The answer's content blocks: a toolUse for `toolCall`, else the text. */
function replyBlocks(b: FakeBehaviour): Record<string, unknown>[] {
  if (b.toolCall !== undefined) return [{ toolUse: { toolUseId: `tooluse_${crypto.randomUUID().slice(0, 22)}`, name: b.toolCall.name, input: b.toolCall.arguments } }];
  return [{ text: b.text ?? defaultText }];
}

/** ConverseStream's members for the answer: the text in `chunkCount` deltas (one by default), a toolUse's input in two. */
function streamMembers(b: FakeBehaviour, blocks: Record<string, unknown>[], stopReason: string, usage: Record<string, number>): [string, unknown][] {
  const members: [string, unknown][] = [['messageStart', { role: 'assistant' }]];
  const use = jsonObject(blocks[0]?.toolUse);
  if (use !== null) {
    const input = JSON.stringify(use.input);
    const half = Math.ceil(input.length / 2);
    members.push(['contentBlockStart', { contentBlockIndex: 0, start: { toolUse: { toolUseId: use.toolUseId, name: use.name } } }]);
    for (const piece of [input.slice(0, half), input.slice(half)]) members.push(['contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: piece } } }]);
  } else {
    const text = String(blocks[0]?.text);
    for (const piece of b.chunkCount === undefined ? [text] : splitText(text, b.chunkCount)) members.push(['contentBlockDelta', { contentBlockIndex: 0, delta: { text: piece } }]);
  }
  members.push(['contentBlockStop', { contentBlockIndex: 0 }], ['messageStop', { stopReason }], ['metadata', { usage, metrics: { latencyMs: fakeLatencyMs } }]);
  return members;
}

export function handleConverse(x: FakeExchange, modelId: string, stream: boolean): void {
  const problem = converseProblem(jsonObject(x.json));
  if (problem !== undefined) return sendBedrockError(x.res, 400, problem, 'ValidationException');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'bedrock');
  const u = anthropicReply(x.behaviour, modelId).usage;
  // Converse's inputTokens, like Anthropic's input_tokens, excludes cache reads and writes.
  const usage = {
    inputTokens: u.input,
    outputTokens: u.output + u.reasoning,
    totalTokens: u.input + u.cacheRead + u.cacheWrite + u.cacheWrite1h + u.output + u.reasoning,
    ...(u.cacheRead ? { cacheReadInputTokens: u.cacheRead } : {}),
    ...(u.cacheWrite + u.cacheWrite1h ? { cacheWriteInputTokens: u.cacheWrite + u.cacheWrite1h } : {}),
  };
  const blocks = replyBlocks(x.behaviour);
  const stopReason = x.behaviour.toolCall !== undefined ? 'tool_use' : 'end_turn';
  const requestId = { 'x-amzn-requestid': crypto.randomUUID() };
  if (!stream) {
    const body = { output: { message: { role: 'assistant', content: blocks } }, stopReason, usage, metrics: { latencyMs: fakeLatencyMs } };
    x.res.writeHead(200, { 'content-type': 'application/json', ...requestId });
    x.res.end(JSON.stringify(body));
    return;
  }
  x.res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', ...requestId });
  const members = streamMembers(x.behaviour, blocks, stopReason, usage);
  // truncateStream: the content, then the end as if the connection closed cleanly; streamError: an exception instead.
  const cut = x.behaviour.truncateStream === true || x.behaviour.streamError === true ? members.length - 3 : members.length;
  for (const [type, payload] of members.slice(0, cut)) x.res.write(converseFrame(type, payload));
  if (x.behaviour.streamError === true) x.res.write(exceptionFrame('modelStreamErrorException', 'The model encountered an error while streaming.'));
  x.res.end();
}
