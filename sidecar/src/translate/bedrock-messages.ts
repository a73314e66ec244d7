// Claude on Bedrock streams the Messages API's events inside AWS's event stream; a /v1/messages caller reads
// them as Anthropic's SSE. Each event is re-framed as it arrives (its JSON is not parsed): `event: <type>` and
// `data: <the event>`. An exception frame, a corrupt frame or an end before message_stop becomes one `error`
// event, which the Anthropic SDKs raise, and nothing after it is sent. An exception met on the way is told to
// the caller in fixed words (chat-stream.ts's translationFailure) and kept for the log, never quoted.

import { leadingEventType } from '../formats/bedrock-stream.ts';
import { anthropicStreamErrorEvent } from './anthropic-error.ts';
import { bedrockSource, translationFailure, type ChatStreamTranslator, type TranslationFault } from './chat-stream.ts';

export class BedrockMessagesStream implements ChatStreamTranslator {
  readonly #route: string;
  readonly #source: ReturnType<typeof bedrockSource>;
  #out = '';
  #failure: string | undefined;
  #fault: TranslationFault | undefined;
  #events = 0;
  #stopped = false;

  constructor(route: string) {
    this.#route = route;
    this.#source = bedrockSource((type, data) => this.#event(type, data));
  }

  get failure(): string | undefined {
    return this.#failure;
  }

  get fault(): TranslationFault | undefined {
    return this.#fault;
  }

  write(chunk: Buffer): string {
    if (this.#failure !== undefined) return this.#take();
    try {
      this.#source.push(chunk);
    } catch (error) {
      this.#broken(error);
    }
    return this.#take();
  }

  end(cut?: string): string {
    if (this.#failure !== undefined) return this.#take();
    try {
      const framing = this.#source.end();
      const problem = cut ?? framing ?? (this.#stopped ? undefined : 'stream ended before message_stop');
      if (problem !== undefined) this.#fail(problem);
    } catch (error) {
      this.#broken(error);
    }
    return this.#take();
  }

  #event(type: string, data: string): void {
    if (this.#failure !== undefined) return;
    this.#events++;
    const kind = type !== '' ? type : leadingEventType(data);
    if (kind === 'error') {
      let message = 'upstream stream error';
      try {
        const parsed = JSON.parse(data) as { error?: { message?: unknown } };
        if (typeof parsed.error?.message === 'string') message = parsed.error.message;
      } catch {
        // keep the generic message
      }
      this.#fail(message);
      return;
    }
    if (kind === 'message_stop') this.#stopped = true;
    this.#out += `event: ${kind}\ndata: ${data}\n\n`;
  }

  #broken(error: unknown): void {
    if (this.#failure !== undefined) return;
    this.#fault = { error, event: this.#events, eventType: undefined };
    this.#fail(translationFailure(this.#fault));
  }

  #fail(message: string): void {
    this.#failure = message;
    this.#out += anthropicStreamErrorEvent(this.#route, message);
  }

  #take(): string {
    const out = this.#out;
    this.#out = '';
    return out;
  }
}
