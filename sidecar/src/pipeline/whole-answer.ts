// An upstream answer read whole before the caller gets any of it (a non-streamed answer translated into the
// caller's API). At most MAX_TRANSLATED_BODY_BYTES; and once the caller has left, read on for the usage the
// provider bills within the bounds a stream has (ADR 1305): READ_AFTER_LEAVING_MS and READ_AFTER_LEAVING_BYTES
// more, and a place among LEAVING_READS. Before ADR 1700 such an answer was read to its end however long it took.

import type { ServerResponse } from 'node:http';
import { ProxyError } from '../errors.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import { LEAVING_READS } from '../metering/leaving-reads.ts';
import type { AnswerBody, AnswerReader } from '../upstream/answer-body.ts';
import type { UsageExtractor } from '../usage/usage-extractor.ts';
import { MAX_TRANSLATED_BODY_BYTES, READ_AFTER_LEAVING_BYTES, READ_AFTER_LEAVING_MS } from './answer-bounds.ts';
import { onCallerLeaving } from './caller-connection.ts';
import type { ReadAfterLeaving } from './call-outcome.ts';

/** The body read to its end (`callerLeft`: meanwhile the caller went away), or cut after the caller left. */
export type WholeAnswer = { kind: 'read'; body: Buffer; callerLeft: boolean } | { kind: 'cut'; why: string; afterLeaving: ReadAfterLeaving };

export interface WholeAnswerSource {
  body: AnswerBody;
  res: ServerResponse;
  call: MeteredCall;
  /** Sees every chunk first (its usage, the credential scrubbed) and returns the bytes to keep. */
  extractor: UsageExtractor;
}

/** Reads `body` whole through `extractor`. Rejects with ProxyError past MAX_TRANSLATED_BODY_BYTES, or with the body's error. */
export function readWholeAnswer(source: WholeAnswerSource): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => new WholeAnswerRead(source, resolve, reject).start());
}

class WholeAnswerRead implements AnswerReader {
  readonly #s: WholeAnswerSource;
  readonly #resolve: (answer: WholeAnswer) => void;
  readonly #reject: (error: Error) => void;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  /** Bytes read when the caller left; -1 while it is there. */
  #leftAt = -1;
  #settled = false;
  #timer: NodeJS.Timeout | undefined;
  #release: (() => void) | undefined;
  /**
   * Whose reads after leaving this call counts among: its user, else its address. Taken while the socket is
   * open: once the caller has gone its socket no longer knows the address, and every such caller would share one.
   */
  readonly #caller: string;

  constructor(source: WholeAnswerSource, resolve: (answer: WholeAnswer) => void, reject: (error: Error) => void) {
    this.#s = source;
    this.#caller = source.call.call.userId ?? source.res.socket?.remoteAddress ?? 'unknown';
    this.#resolve = resolve;
    this.#reject = reject;
  }

  start(): void {
    onCallerLeaving(this.#s.res, () => this.#onCallerLeft());
    // Last: what the upstream sent meanwhile is handed over at once.
    this.#s.body.read(this);
  }

  onAnswerEnd(): void {
    this.#settle(() => this.#resolve({ kind: 'read', body: Buffer.concat(this.#chunks), callerLeft: this.#leftAt !== -1 }));
  }

  onAnswerError(error: Error): void {
    this.#settle(() => this.#reject(error));
  }

  onAnswerData(chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > MAX_TRANSLATED_BODY_BYTES) {
      this.#s.body.destroy();
      const error = new ProxyError('upstream_stream_error', `upstream response exceeds ${MAX_TRANSLATED_BODY_BYTES} bytes, the most the gateway translates`);
      return this.#settle(() => this.#reject(error));
    }
    this.#chunks.push(this.#s.extractor.write(chunk));
    if (this.#leftAt !== -1 && this.#size - this.#leftAt > READ_AFTER_LEAVING_BYTES) {
      this.#cut(`client went away; the upstream sent ${READ_AFTER_LEAVING_BYTES} more bytes without its usage`);
    }
  }

  #onCallerLeft(): void {
    if (this.#settled || this.#leftAt !== -1) return;
    this.#leftAt = this.#size;
    const { call } = this.#s;
    // Shutdown cut the connection and waits for this call: nothing to read on for.
    if (call.cutByShutdown) return this.#cut('client went away');
    const slot = LEAVING_READS.take(this.#caller);
    if ('refusal' in slot) return this.#cut(`client went away; not read on for its usage: ${slot.refusal}`);
    this.#release = slot.release;
    call.noteCallerLeft();
    this.#timer = setTimeout(() => this.#cut(`client went away; the upstream's usage did not arrive within ${READ_AFTER_LEAVING_MS} ms`), READ_AFTER_LEAVING_MS);
    this.#timer.unref();
  }

  #cut(why: string): void {
    const bytes = this.#size - this.#leftAt;
    this.#s.body.destroy();
    this.#settle(() => this.#resolve({ kind: 'cut', why, afterLeaving: { bytes, complete: false, answerWithheld: true } }));
  }

  #settle(then: () => void): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#release?.();
    then();
  }
}
