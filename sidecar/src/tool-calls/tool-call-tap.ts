// Reads the bytes a caller receives for the tool calls in them (ADR 1603). It sits beside the usage extractor
// in the relay, only while provenance is on, and reads what the caller got: the upstream's bytes on a pass-through,
// the translation on a /v1 call translated from another provider, so a span's tool call ids are the ones the
// caller will echo. The body's framing comes from the Content-Type the caller is sent, as the usage extractor's
// does from the upstream's.

import { BedrockStreamDecoder } from '../formats/bedrock-stream.ts';
import { JsonArrayStreamParser } from '../formats/json-array-stream.ts';
import { SseDecoder } from '../formats/sse.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { bodyKindOf, sniffBodyKind, type BodyKind } from '../usage/body-kind.ts';
import { BoundedJsonBody } from '../usage/json-body.ts';
import { readAnswerDocument, ToolCallStreamReader } from './answer-tool-calls.ts';
import { type AnswerToolCalls, ToolCallCollector } from './tool-call-collector.ts';

/** One framing's decoder, fed the caller's bytes. */
interface BodyReader {
  push(chunk: Buffer): void;
  end(): void;
}

const NO_FIELDS = { head: [], tail: [] } as const;

export class ToolCallTap {
  readonly #calls = new ToolCallCollector();
  readonly #stream = new ToolCallStreamReader(this.#calls);
  readonly #kind: BodyKind;
  #reader: BodyReader | null = null;

  constructor(contentType: string | undefined) {
    this.#kind = bodyKindOf(contentType);
  }

  /** Bytes on their way to the caller (a translation's text included). */
  write(bytes: Buffer | string): void {
    if (bytes.length === 0) return;
    const chunk = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    this.#reader ??= this.#choose(chunk);
    this.#reader?.push(chunk);
  }

  /** The answer ended (or was cut): the calls seen, a cut one with the arguments that came. */
  end(): AnswerToolCalls {
    this.#reader?.end();
    this.#reader = null;
    return this.#calls.result();
  }

  #choose(chunk: Buffer): BodyReader | null {
    let kind = this.#kind;
    let i = 0;
    while (i < chunk.length && (chunk[i] === 0x20 || chunk[i] === 0x0a || chunk[i] === 0x0d || chunk[i] === 0x09)) i++;
    if (kind === 'unknown') {
      if (i === chunk.length) return null;
      kind = sniffBodyKind(chunk[i]!);
    }
    switch (kind) {
      case 'sse': {
        const decoder = new SseDecoder((_type, data) => this.#stream.event(data));
        return { push: (c) => decoder.push(c), end: () => decoder.end() };
      }
      case 'aws-eventstream': {
        const decoder = new BedrockStreamDecoder((_type, json) => this.#stream.event(json), { onConverse: (type, json) => this.#stream.event(json, type) });
        return { push: (c) => decoder.push(c), end: () => decoder.end() };
      }
      case 'json':
        // Gemini's streamGenerateContent without alt=sse writes an array of chunks as they come.
        return chunk[i] === 0x5b ? this.#array() : this.#whole();
      default:
        return null;
    }
  }

  #array(): BodyReader {
    const parser = new JsonArrayStreamParser((element) => this.#document(element.toString('utf8')));
    return { push: (c) => parser.push(c), end: () => parser.end() };
  }

  /** A whole JSON answer, held within the usage extractor's bound; one past it is not read for tool calls. */
  #whole(): BodyReader {
    const body = new BoundedJsonBody();
    return {
      push: (c) => body.write(c),
      end: () => {
        if (body.overflowed) return;
        const document = body.document(NO_FIELDS);
        if (document !== undefined) readAnswerDocument(document, this.#calls);
      },
    };
  }

  #document(json: string): void {
    let document: unknown;
    try {
      document = JSON.parse(json);
    } catch {
      return;
    }
    if (isRecord(document)) readAnswerDocument(document, this.#calls);
  }
}

/** The tool calls of an answer the gateway built whole (a translated JSON answer, in the caller's API). */
export function toolCallsOfAnswer(answer: unknown): AnswerToolCalls {
  const calls = new ToolCallCollector();
  if (isRecord(answer)) readAnswerDocument(answer, calls);
  return calls.result();
}
