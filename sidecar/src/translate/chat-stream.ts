// Byte level of the streaming translations: upstream bytes (Anthropic SSE, Bedrock's AWS event stream, Gemini
// SSE, OpenAI chat SSE) are decoded with the shared wire-format decoders, handed event by event to a chunk
// translator, and the chunks are encoded for the caller: as OpenAI chat SSE for a chat-completions caller, as
// the Responses or Messages events for theirs (ChunkEncoder). A failure inside the stream becomes the caller's
// error event (for chat, one `data: {"error": …}`, which OpenAI SDKs raise as an APIError, and no
// `data: [DONE]`), so no caller mistakes a cut answer for a whole one.
//
// An exception thrown while an upstream event is translated (a shape no provider documents: a tool call
// without its function, a choice that is null) is the upstream's fault, but its message describes the
// gateway's code (`Cannot read properties of undefined (reading 'name')`). The caller gets a fixed sentence
// naming the event instead, and the exception itself is kept as the stream's `fault`, for the log only.

import { BedrockStreamDecoder } from '../formats/bedrock-stream.ts';
import { SseDecoder } from '../formats/sse.ts';
import type { AnthropicChunkTranslator, StreamStep } from './openai-anthropic.ts';
import type { ConverseChunkTranslator } from './openai-converse.ts';
import type { GeminiChunkTranslator } from './openai-gemini.ts';
import type { OpenAiChunkReader } from './openai-chunks.ts';
import { SSE_DONE, sseData, type ChatChunk } from './openai-chat.ts';
import { streamErrorBody } from './openai-error.ts';

/** How chat chunks become the caller's stream. Called once per chunk, in order; `end` or `fail` once, last. */
export interface ChunkEncoder {
  chunk(chunk: ChatChunk): string;
  /** The upstream ended whole: the stream's last events. */
  end(): string;
  /** The stream failed (`route` answered badly, or the encoder gave up): the caller's error event. */
  fail(route: string, message: string, code: string | null): string;
  /** Set when the encoder cannot go on (an answer larger than it holds); the stream then fails with it. */
  readonly failure?: string | undefined;
}

/** OpenAI chat SSE, for /v1/chat/completions callers. */
export const CHAT_SSE_ENCODER: ChunkEncoder = {
  chunk: (chunk) => sseData(chunk),
  end: () => SSE_DONE,
  fail: (route, message, code) => sseData(streamErrorBody(route, message, code)),
};

export interface ChatStreamTranslator {
  /** Upstream bytes in, OpenAI SSE text out (often empty: an event may span several reads). */
  write(chunk: Buffer): string;
  /** The upstream ended (`cut` names why, when it ended badly): the last chunks and `[DONE]`, or the error event. */
  end(cut?: string): string;
  /** The in-stream failure sent to the caller, if any. */
  readonly failure: string | undefined;
  /** The exception the translation met, if it met one: for the operator's log, never for the caller. */
  readonly fault?: TranslationFault | undefined;
}

/** An exception met while translating an upstream's stream, and where in the stream it was met. */
export interface TranslationFault {
  readonly error: unknown;
  /** How many upstream events had been read (the one being translated included). */
  readonly event: number;
  /** The event's type ('' when the stream names none); undefined when it was met outside any one event. */
  readonly eventType: string | undefined;
}

/** The caller's words for a fault: fixed, naming the event; never the exception's own message. */
export function translationFailure(fault: TranslationFault): string {
  if (fault.eventType === undefined) return `the upstream's stream could not be translated after its event ${fault.event}; the answer ends here`;
  const kind = fault.eventType === '' ? 'event' : `${fault.eventType} event`;
  return `the upstream sent a malformed ${kind} (event ${fault.event} of its stream) that could not be translated; the answer ends here`;
}

export type EventSource = (onEvent: (type: string, data: string) => void) => { push(chunk: Buffer): void; end(): string | undefined };

class SseChatStream implements ChatStreamTranslator {
  readonly #route: string;
  readonly #step: (type: string, data: string) => StreamStep;
  readonly #finish: (cut?: string) => StreamStep;
  readonly #source: ReturnType<EventSource>;
  readonly #encoder: ChunkEncoder;
  #out = '';
  #failure: string | undefined;
  #fault: TranslationFault | undefined;
  #events = 0;

  constructor(route: string, source: EventSource, step: (type: string, data: string) => StreamStep, finish: (cut?: string) => StreamStep, encoder: ChunkEncoder) {
    this.#route = route;
    this.#step = step;
    this.#finish = finish;
    this.#encoder = encoder;
    this.#source = source((type, data) => {
      if (this.#failure !== undefined) return;
      this.#events++;
      try {
        this.#emit(this.#step(type, data));
      } catch (error) {
        this.#broken(error, type);
      }
    });
  }

  get failure(): string | undefined {
    return this.#failure;
  }

  get fault(): TranslationFault | undefined {
    return this.#fault;
  }

  write(chunk: Buffer): string {
    if (this.#failure !== undefined) return '';
    try {
      this.#source.push(chunk);
    } catch (error) {
      this.#broken(error, undefined);
    }
    return this.#take();
  }

  end(cut?: string): string {
    if (this.#failure !== undefined) return this.#take();
    try {
      const framing = this.#source.end();
      this.#emit(this.#finish(cut ?? framing));
      if (this.#failure === undefined) this.#out += this.#encoder.end();
    } catch (error) {
      this.#broken(error, undefined);
    }
    return this.#take();
  }

  /**
   * An upstream event the translation could not handle: the caller's stream fails with a fixed sentence naming
   * the event, rather than the process (this runs inside the upstream body's event handlers); the exception is
   * kept for the log.
   */
  #broken(error: unknown, eventType: string | undefined): void {
    if (this.#failure !== undefined) return;
    this.#fault = { error, event: this.#events, eventType };
    this.#failure = translationFailure(this.#fault);
    this.#out += this.#encoder.fail(this.#route, this.#failure, 'upstream_stream_error');
  }

  #emit(step: StreamStep): void {
    for (const c of step.chunks) {
      this.#out += this.#encoder.chunk(c);
      const gaveUp = this.#encoder.failure;
      if (gaveUp !== undefined) {
        this.#failure = gaveUp;
        this.#out += this.#encoder.fail(this.#route, gaveUp, 'response_too_large');
        return;
      }
    }
    if (step.error && this.#failure === undefined) {
      this.#failure = step.error.message;
      this.#out += this.#encoder.fail(this.#route, step.error.message, step.error.code);
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
export function anthropicSseChatStream(route: string, translator: AnthropicChunkTranslator, encoder: ChunkEncoder = CHAT_SSE_ENCODER): ChatStreamTranslator {
  return new SseChatStream(
    route,
    sseSource,
    (type, data) => translator.event(type, data),
    (cut) => translator.end(cut),
    encoder,
  );
}

/** Anthropic events inside Bedrock's AWS event stream; an exception frame becomes an Anthropic `error` event. */
export const bedrockSource: EventSource = (onEvent) => {
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
};

/** Route gamma-cloudb: Anthropic events inside Bedrock's AWS event stream; exception frames end it. */
export function bedrockChatStream(route: string, translator: AnthropicChunkTranslator, encoder: ChunkEncoder = CHAT_SSE_ENCODER): ChatStreamTranslator {
  return new SseChatStream(
    route,
    bedrockSource,
    (type, data) => translator.event(type, data),
    (cut) => translator.end(cut),
    encoder,
  );
}

/** ConverseStream's members, each named by its frame's event type; an exception frame becomes an `error` member. */
const converseSource: EventSource = (onEvent) => {
  const decoder = new BedrockStreamDecoder(() => undefined, { onConverse: onEvent });
  let reported = false;
  return {
    push: (chunk) => {
      decoder.push(chunk);
      if (decoder.error !== undefined && !reported) {
        reported = true;
        onEvent('error', JSON.stringify({ message: decoder.error }));
      }
    },
    end: () => decoder.end(),
  };
};

/** Bedrock's models other than Claude (ConverseStream, ADR 0914): Converse's members inside AWS's event stream. */
export function converseChatStream(route: string, translator: ConverseChunkTranslator, encoder: ChunkEncoder = CHAT_SSE_ENCODER): ChatStreamTranslator {
  return new SseChatStream(
    route,
    converseSource,
    (type, data) => translator.event(type, data),
    (cut) => translator.end(cut),
    encoder,
  );
}

/** Route alpha: Gemini's SSE (?alt=sse); the event type is unused. */
export function geminiSseChatStream(route: string, translator: GeminiChunkTranslator, encoder: ChunkEncoder = CHAT_SSE_ENCODER): ChatStreamTranslator {
  return new SseChatStream(
    route,
    sseSource,
    (_type, data) => translator.event(data),
    (cut) => translator.end(cut),
    encoder,
  );
}

/** Routes that answer in OpenAI's chat format, read for a caller of another API: the chunks as they come. */
export function openAiSseChatStream(route: string, reader: OpenAiChunkReader, encoder: ChunkEncoder): ChatStreamTranslator {
  return new SseChatStream(
    route,
    sseSource,
    (_type, data) => reader.event(data),
    (cut) => reader.end(cut),
    encoder,
  );
}
