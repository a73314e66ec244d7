// Byte level of the streaming translations: upstream bytes (Anthropic SSE, Bedrock's AWS event stream, Gemini
// SSE) are decoded with the shared wire-format decoders, handed event by event to a chunk translator, and the
// chunks come back as OpenAI SSE text. A failure inside the stream becomes one `data: {"error": …}` event
// (OpenAI SDKs raise it as an APIError) and the stream ends without `data: [DONE]`, so no caller mistakes a
// cut answer for a whole one.

import { BedrockStreamDecoder } from '../formats/bedrock-stream.ts';
import { SseDecoder } from '../formats/sse.ts';
import type { AnthropicChunkTranslator, StreamStep } from './openai-anthropic.ts';
import type { GeminiChunkTranslator } from './openai-gemini.ts';
import { SSE_DONE, sseData } from './openai-chat.ts';
import { streamErrorBody } from './openai-error.ts';

export interface ChatStreamTranslator {
  /** Upstream bytes in, OpenAI SSE text out (often empty: an event may span several reads). */
  write(chunk: Buffer): string;
  /** The upstream ended (`cut` names why, when it ended badly): the last chunks and `[DONE]`, or the error event. */
  end(cut?: string): string;
  /** The in-stream failure sent to the caller, if any. */
  readonly failure: string | undefined;
}

type EventSource = (onEvent: (type: string, data: string) => void) => { push(chunk: Buffer): void; end(): string | undefined };

class SseChatStream implements ChatStreamTranslator {
  readonly #route: string;
  readonly #step: (type: string, data: string) => StreamStep;
  readonly #finish: (cut?: string) => StreamStep;
  readonly #source: ReturnType<EventSource>;
  #out = '';
  #failure: string | undefined;

  constructor(route: string, source: EventSource, step: (type: string, data: string) => StreamStep, finish: (cut?: string) => StreamStep) {
    this.#route = route;
    this.#step = step;
    this.#finish = finish;
    this.#source = source((type, data) => {
      if (this.#failure === undefined) this.#emit(this.#step(type, data));
    });
  }

  get failure(): string | undefined {
    return this.#failure;
  }

  write(chunk: Buffer): string {
    if (this.#failure !== undefined) return '';
    this.#source.push(chunk);
    return this.#take();
  }

  end(cut?: string): string {
    if (this.#failure !== undefined) return this.#take();
    const framing = this.#source.end();
    this.#emit(this.#finish(cut ?? framing));
    if (this.#failure === undefined) this.#out += SSE_DONE;
    return this.#take();
  }

  #emit(step: StreamStep): void {
    for (const c of step.chunks) this.#out += sseData(c);
    if (step.error && this.#failure === undefined) {
      this.#failure = step.error.message;
      this.#out += sseData(streamErrorBody(this.#route, step.error.message, step.error.code));
    }
  }

  #take(): string {
    const out = this.#out;
    this.#out = '';
    return out;
  }
}

const sseSource: EventSource = (onEvent) => {
  const decoder = new SseDecoder(onEvent);
  return {
    push: (chunk) => decoder.push(chunk),
    end: () => (decoder.end() ? 'stream ended mid-event' : undefined),
  };
};

/** Route gamma-direct and gamma: Anthropic's SSE. */
export function anthropicSseChatStream(route: string, translator: AnthropicChunkTranslator): ChatStreamTranslator {
  return new SseChatStream(
    route,
    sseSource,
    (type, data) => translator.event(type, data),
    (cut) => translator.end(cut),
  );
}

/** Route gamma-cloudb: Anthropic events inside Bedrock's AWS event stream; exception frames end it. */
export function bedrockChatStream(route: string, translator: AnthropicChunkTranslator): ChatStreamTranslator {
  return new SseChatStream(
    route,
    (onEvent) => {
      const decoder = new BedrockStreamDecoder(onEvent);
      let reported = false;
      return {
        push: (chunk) => {
          decoder.push(chunk);
          if (decoder.error !== undefined && !reported) {
            reported = true;
            onEvent('error', JSON.stringify({ type: 'error', error: { type: 'bedrock_stream_error', message: decoder.error } }));
          }
        },
        end: () => decoder.end(),
      };
    },
    (type, data) => translator.event(type, data),
    (cut) => translator.end(cut),
  );
}

/** Route alpha: Gemini's SSE (?alt=sse); the event type is unused. */
export function geminiSseChatStream(route: string, translator: GeminiChunkTranslator): ChatStreamTranslator {
  return new SseChatStream(
    route,
    sseSource,
    (_type, data) => translator.event(data),
    (cut) => translator.end(cut),
  );
}
