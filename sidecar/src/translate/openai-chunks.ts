// OpenAI chat completions read back as the gateway's chat objects, for a caller of another API (Responses,
// Messages) whose call went to a route that speaks OpenAI's format (alpha-compat, local, beta for Messages).
// The completion and the chunks already are the pivot, so reading them is checking their shape and, when the
// caller asked for the answer's thinking, taking it from the field OpenAI-compatible runtimes put it in
// (`reasoning_content`, or Ollama's `reasoning`): OpenAI itself returns none in chat completions.

import { isRecord } from '../../../contracts/json-record.ts';
import { normaliseOpenAiUsage } from '../wire-formats/openai/usage.ts';
import { chatUsage, type ChatChunk, type ChatCompletion, type ChatUsage } from './openai-chat.ts';
import type { StreamStep } from './openai-anthropic.ts';

function reasoningText(message: object): string | undefined {
  const fields = message as { reasoning_content?: unknown; reasoning?: unknown };
  const text = fields.reasoning_content ?? fields.reasoning;
  return typeof text === 'string' && text !== '' ? text : undefined;
}

/** A usage block as the pivot has it (every detail present): OpenAI-compatible runtimes leave details out. */
function pivotUsage(usage: unknown): ChatUsage | undefined {
  const normalised = normaliseOpenAiUsage(usage);
  return normalised === null ? undefined : chatUsage(normalised);
}

/** A chat.completion document, its choices and usage checked; its thinking, when asked for, as one unsigned block. */
export function fromOpenAiCompletion(document: Record<string, unknown>, returnReasoning: boolean): ChatCompletion {
  const completion = document as unknown as ChatCompletion;
  if (!Array.isArray(completion.choices)) completion.choices = [];
  const usage = pivotUsage(document.usage);
  if (usage === undefined) delete completion.usage;
  else completion.usage = usage;
  for (const choice of completion.choices) {
    if (!isRecord(choice.message)) choice.message = { role: 'assistant', content: null, refusal: null };
    const thinking = returnReasoning ? reasoningText(choice.message) : undefined;
    if (thinking !== undefined) choice.message.thinking = [{ kind: 'thinking', thinking, signature: '' }];
  }
  return completion;
}

/** The data of an OpenAI chat SSE stream, event by event. */
export class OpenAiChunkReader {
  readonly #returnReasoning: boolean;
  #done = false;

  constructor(returnReasoning: boolean) {
    this.#returnReasoning = returnReasoning;
  }

  event(data: string): StreamStep {
    if (data === '[DONE]') {
      this.#done = true;
      return { chunks: [] };
    }
    let document: unknown;
    try {
      document = JSON.parse(data);
    } catch {
      return { chunks: [], error: { message: 'malformed JSON in an upstream stream chunk', code: 'upstream_stream_error' } };
    }
    if (!isRecord(document)) return { chunks: [] };
    if (isRecord(document.error)) {
      const error = document.error;
      return {
        chunks: [],
        error: { message: typeof error.message === 'string' ? error.message : 'upstream stream error', code: typeof error.code === 'string' ? error.code : null },
      };
    }
    const chunk = document as unknown as ChatChunk;
    if (!Array.isArray(chunk.choices)) chunk.choices = [];
    if (chunk.usage) chunk.usage = pivotUsage(chunk.usage) ?? null;
    for (const choice of chunk.choices) {
      if (!isRecord(choice.delta)) choice.delta = {};
      const thinking = this.#returnReasoning ? reasoningText(choice.delta) : undefined;
      if (thinking !== undefined) choice.delta.thinking = { block: 0, text: thinking };
    }
    return { chunks: [chunk] };
  }

  end(cut?: string): StreamStep {
    if (cut !== undefined || !this.#done) return { chunks: [], error: { message: cut ?? 'stream ended before data: [DONE]', code: 'upstream_stream_error' } };
    return { chunks: [] };
  }
}
