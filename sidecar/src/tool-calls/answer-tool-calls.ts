// Where each answer format the sidecar meters puts its tool calls (docs/provenance.md#tool-calls-on-the-span).
// The shapes do not overlap, so one reader serves every format: a whole answer's document, and a stream's
// events, whichever provider or caller API they come in.
//
// Whole answers: OpenAI chat `choices[].message.tool_calls[]`, OpenAI Responses `output[]` items
// (`function_call`, `custom_tool_call`, `local_shell_call`, `shell_call`), Anthropic Messages `content[]` `tool_use` blocks, Gemini
// `candidates[].content.parts[].functionCall`, Bedrock Converse `output.message.content[].toolUse`.
// Streams: chat `delta.tool_calls[]` by index, Responses `response.output_item.*` and argument (or custom tool
// input) deltas, Anthropic
// `content_block_start` + `input_json_delta`, Gemini chunks (each a whole call), ConverseStream
// `contentBlockStart` + `contentBlockDelta`.

import { isRecord } from '../../../contracts/json-record.ts';
import type { ToolCallCollector } from './tool-call-collector.ts';

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function idOf(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** A stream's index (of a choice, a block, an output item) as a key part; absent reads as 0. */
function indexOf(value: unknown): string {
  return typeof value === 'number' || typeof value === 'string' ? String(value) : '0';
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

/** Reads the tool calls of one whole answer (or one Gemini stream chunk) in any of the formats. */
export function readAnswerDocument(document: Record<string, unknown>, calls: ToolCallCollector): void {
  for (const choice of records(document.choices)) {
    const message = isRecord(choice.message) ? choice.message : {};
    for (const call of records(message.tool_calls)) {
      const fn = isRecord(call.function) ? call.function : {};
      calls.whole(idOf(call.id), text(fn.name), text(fn.arguments));
    }
  }
  if (Array.isArray(document.output)) {
    for (const item of records(document.output)) readResponsesItem(item, calls, null);
  } else if (isRecord(document.output) && isRecord(document.output.message)) {
    for (const block of records(document.output.message.content)) {
      const use = block.toolUse;
      if (isRecord(use)) calls.whole(idOf(use.toolUseId), text(use.name), use.input);
    }
  }
  for (const block of records(document.content)) {
    if (block.type === 'tool_use') calls.whole(idOf(block.id), text(block.name), block.input);
  }
  for (const candidate of records(document.candidates)) {
    const content = isRecord(candidate.content) ? candidate.content : {};
    for (const part of records(content.parts)) {
      const fn = part.functionCall;
      if (isRecord(fn)) calls.whole(idOf(fn.id), text(fn.name), fn.args);
    }
  }
}

/** The tool a Responses shell item calls: `local_shell_call` and `shell_call` carry no name of their own. */
function shellToolName(type: 'local_shell_call' | 'shell_call'): string {
  return type === 'local_shell_call' ? 'local_shell' : 'shell';
}

/** A Responses output item that is a tool call; `key` set when it closes a streamed one. */
function readResponsesItem(item: Record<string, unknown>, calls: ToolCallCollector, key: string | null): void {
  // The caller's tool output echoes call_id, not the item's id.
  const id = idOf(item.call_id) ?? idOf(item.id);
  let name: string;
  let args: unknown;
  if (item.type === 'function_call') {
    name = text(item.name);
    args = text(item.arguments);
  } else if (item.type === 'custom_tool_call') {
    // A custom tool's input is free text (a grammar's output, code), hashed as any argument text is.
    name = text(item.name);
    args = text(item.input);
  } else if (item.type === 'local_shell_call' || item.type === 'shell_call') {
    name = shellToolName(item.type);
    args = item.action;
  } else return;
  if (key === null) calls.whole(id, name, args);
  else calls.complete(key, id, name, args);
}

// Events that can carry a tool call: only these are parsed. A quote inside a string value is escaped, so these
// match keys and type names only.
const TOOL_EVENT =
  /"(?:tool_calls|tool_use|input_json_delta|functionCall|toolUse)"|"response\.(?:output_item\.(?:added|done)|function_call_arguments\.delta|custom_tool_call_input\.delta)"/;

/** Reads a stream's events (SSE data, a Bedrock chunk's Anthropic event, a ConverseStream member) for tool calls. */
export class ToolCallStreamReader {
  readonly #calls: ToolCallCollector;

  constructor(calls: ToolCallCollector) {
    this.#calls = calls;
  }

  /** One event's JSON text; `converseType` is the ConverseStream member's name, when it is one. */
  event(json: string, converseType?: string): void {
    if (!TOOL_EVENT.test(json)) return;
    let document: unknown;
    try {
      document = JSON.parse(json);
    } catch {
      return; // a cut or malformed event: its usage reader reports the stream's state
    }
    if (!isRecord(document)) return;
    if (converseType !== undefined) this.#converse(converseType, document);
    else if (typeof document.type === 'string' && document.type !== '') this.#typed(document.type, document);
    else if (Array.isArray(document.choices)) this.#chatChunk(document.choices);
    else readAnswerDocument(document, this.#calls);
  }

  #typed(type: string, event: Record<string, unknown>): void {
    const calls = this.#calls;
    switch (type) {
      case 'content_block_start': {
        const block = event.content_block;
        if (isRecord(block) && block.type === 'tool_use') calls.start(`a${indexOf(event.index)}`, idOf(block.id), text(block.name), block.input ?? {});
        return;
      }
      case 'content_block_delta': {
        const delta = event.delta;
        if (isRecord(delta) && delta.type === 'input_json_delta') calls.piece(`a${indexOf(event.index)}`, text(delta.partial_json));
        return;
      }
      case 'response.output_item.added': {
        const item = event.item;
        if (!isRecord(item)) return;
        const key = `r${indexOf(event.output_index)}`;
        const id = idOf(item.call_id) ?? idOf(item.id);
        if (item.type === 'function_call' || item.type === 'custom_tool_call') calls.start(key, id, text(item.name));
        else if (item.type === 'local_shell_call' || item.type === 'shell_call') calls.start(key, id, shellToolName(item.type));
        return;
      }
      case 'response.function_call_arguments.delta':
      case 'response.custom_tool_call_input.delta':
        calls.piece(`r${indexOf(event.output_index)}`, text(event.delta));
        return;
      case 'response.output_item.done':
        if (isRecord(event.item)) readResponsesItem(event.item, calls, `r${indexOf(event.output_index)}`);
        return;
    }
  }

  /** A chat completion chunk: each tool call's first fragment names it, later ones carry argument pieces. */
  #chatChunk(choices: unknown[]): void {
    for (const choice of records(choices)) {
      const delta = isRecord(choice.delta) ? choice.delta : {};
      for (const fragment of records(delta.tool_calls)) {
        const key = `c${indexOf(choice.index)}:${indexOf(fragment.index)}`;
        const fn = isRecord(fragment.function) ? fragment.function : {};
        const id = idOf(fragment.id);
        if (id !== null || text(fn.name) !== '') this.#calls.start(key, id, text(fn.name));
        this.#calls.piece(key, text(fn.arguments));
      }
    }
  }

  #converse(type: string, event: Record<string, unknown>): void {
    const key = `b${indexOf(event.contentBlockIndex)}`;
    if (type === 'contentBlockStart') {
      const use = isRecord(event.start) ? event.start.toolUse : undefined;
      if (isRecord(use)) this.#calls.start(key, idOf(use.toolUseId), text(use.name), {});
    } else if (type === 'contentBlockDelta') {
      const use = isRecord(event.delta) ? event.delta.toolUse : undefined;
      if (isRecord(use)) this.#calls.piece(key, text(use.input));
    }
  }
}
