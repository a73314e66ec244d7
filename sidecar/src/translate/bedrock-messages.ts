// Claude on Bedrock streams the Messages API's events inside AWS's event stream; a /v1/messages caller reads
// them as Anthropic's SSE. Each event is re-framed as it arrives (its JSON is not parsed): `event: <type>` and
// `data: <the event>`. An exception frame, a corrupt frame or an end before message_stop becomes one `error`
// event, which the Anthropic SDKs raise, and nothing after it is sent.

import { leadingEventType } from '../formats/bedrock-stream.ts';
import { anthropicStreamErrorEvent } from './anthropic-error.ts';
import { bedrockSource, type ChatStreamTranslator } from './chat-stream.ts';

export class BedrockMessagesStream implements ChatStreamTranslator {
  readonly #route: string;
  readonly #source: ReturnType<typeof bedrockSource>;
  #out = '';
  #failure: string | undefined;
  #stopped = false;

  constructor(route: string) {
    this.#route = route;
    this.#source = bedrockSource((type, data) => this.#event(type, data));
  }

  get failure(): string | undefined {
    return this.#failure;
  }

  write(chunk: Buffer): string {
    if (this.#failure === undefined) this.#source.push(chunk);
    return this.#take();
  }

  end(cut?: string): string {
    if (this.#failure !== undefined) return this.#take();
    const framing = this.#source.end();
    const problem = cut ?? framing ?? (this.#stopped ? undefined : 'stream ended before message_stop');
    if (problem !== undefined) this.#fail(problem);
    return this.#take();
  }

  #event(type: string, data: string): void {
    if (this.#failure !== undefined) return;
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
