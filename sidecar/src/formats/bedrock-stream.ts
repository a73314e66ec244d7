// Bedrock's two event streams, told apart by each frame's `:event-type`:
// - InvokeModelWithResponseStream: `chunk` frames carry `{"bytes": "<base64>", "p": "<padding>"}`, and the bytes
//   are one Anthropic stream event.
// - ConverseStream: the frame's payload is the member itself, named by its event type (messageStart,
//   contentBlockDelta, …, messageStop, then metadata with the usage).
// Frames of `:message-type` `exception` or `error` end the stream with a named failure.

import type { Message, MessageHeaders } from '@smithy/eventstream-codec';
import { AwsEventStreamDecoder } from './aws-eventstream.ts';

/**
 * Receives one Anthropic stream event: its `type` (message_start, content_block_delta, …) and its JSON text.
 * The JSON is not parsed here: most events are content deltas the caller may not need to parse.
 */
export type AnthropicEventHandler = (type: string, json: string) => void;

// Anthropic writes `type` first; when it does not, the caller gets type '' and parses the JSON itself.
const LEADING_TYPE = /^\s*\{\s*"type"\s*:\s*"([a-z_]+)"/;

export function leadingEventType(json: string): string {
  const match = LEADING_TYPE.exec(json);
  return match ? match[1]! : '';
}

function headerString(headers: MessageHeaders, name: string): string | undefined {
  const header = headers[name];
  return header && header.type === 'string' ? header.value : undefined;
}

function payloadMessage(body: Uint8Array): string | undefined {
  if (body.byteLength === 0) return undefined;
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  try {
    const parsed = JSON.parse(text) as { message?: unknown; Message?: unknown };
    const message = parsed.message ?? parsed.Message;
    if (typeof message === 'string') return message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/** Receives one ConverseStream member: its event type and the frame's payload (JSON text, unparsed). */
export type ConverseEventHandler = (type: string, json: string) => void;

/** ConverseStream's members; a frame of any other event type carries no model output. */
const CONVERSE_EVENTS = new Set(['messageStart', 'contentBlockStart', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata']);

export class BedrockStreamDecoder {
  /** First failure: a corrupt or truncated frame, an exception/error frame, or an undecodable chunk. */
  error: string | undefined;

  readonly #frames: AwsEventStreamDecoder;
  readonly #onEvent: AnthropicEventHandler;
  readonly #onConverse: ConverseEventHandler | undefined;

  constructor(onEvent: AnthropicEventHandler, options: { maxFrameBytes?: number; onConverse?: ConverseEventHandler } = {}) {
    this.#onEvent = onEvent;
    this.#onConverse = options.onConverse;
    this.#frames = new AwsEventStreamDecoder((message) => this.#message(message), options.maxFrameBytes === undefined ? {} : { maxFrameBytes: options.maxFrameBytes });
  }

  push(chunk: Buffer): void {
    if (this.error !== undefined) return;
    this.#frames.push(chunk);
    if (this.#frames.error !== undefined && this.error === undefined) this.error = this.#frames.error;
  }

  end(): string | undefined {
    const framing = this.#frames.end();
    if (this.error === undefined) this.error = framing;
    return this.error;
  }

  #message(message: Message): void {
    if (this.error !== undefined) return;
    const headers = message.headers;
    const messageType = headerString(headers, ':message-type');
    if (messageType === 'exception') {
      const kind = headerString(headers, ':exception-type') ?? 'exception';
      const detail = payloadMessage(message.body);
      this.error = detail ? `${kind}: ${detail}` : kind;
      return;
    }
    if (messageType === 'error') {
      const code = headerString(headers, ':error-code') ?? 'error';
      const detail = headerString(headers, ':error-message') ?? payloadMessage(message.body);
      this.error = detail ? `${code}: ${detail}` : code;
      return;
    }
    const eventType = headerString(headers, ':event-type');
    const body = message.body;
    if (eventType !== undefined && this.#onConverse !== undefined && CONVERSE_EVENTS.has(eventType)) {
      this.#onConverse(eventType, Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
      return;
    }
    if (eventType !== 'chunk') return; // other event types carry no model output
    let bytes: unknown;
    try {
      bytes = (JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')) as { bytes?: unknown }).bytes;
    } catch {
      this.error = 'chunk frame payload is not JSON';
      return;
    }
    if (typeof bytes !== 'string') {
      this.error = 'chunk frame payload has no "bytes" field';
      return;
    }
    const json = Buffer.from(bytes, 'base64').toString('utf8');
    this.#onEvent(leadingEventType(json), json);
  }
}
