// An upstream answer's body as undici's parser hands it over (ADR 1700): this object is the dispatch handler
// passed to the agent's dispatch(), as undici's own stream() does, and the body its one reader reads. Bytes go
// from the parser to the reader's onAnswerData with no Readable in between (the Readable, its state, its
// listeners and request()'s handler were ~4 KB of a call's allocations, bench/allocations.ts, and garbage
// collection the largest stage of its CPU); backpressure is the reader's pause() and resume(),
// which are undici's controller's; destroy() aborts the exchange.
//
// The client returns the answer once its headers arrived, before anyone reads it: bytes that come before the
// reader attaches are held, and the upstream paused meanwhile, so at most one socket read is held.

import type { Dispatcher } from 'undici';
import type { CallAbort } from './call-abort.ts';

/** The body's one reader: every chunk, then its end or its error (never both; nothing after destroy()). */
export interface AnswerReader {
  onAnswerData(chunk: Buffer): void;
  onAnswerEnd(): void;
  onAnswerError(error: Error): void;
}

/** Passed to destroy()'s abort: the reader dropped the answer, nobody hears of it. */
class AnswerDropped extends Error {
  constructor() {
    super('the answer was dropped by its reader');
  }
}

const NO_CHUNKS: readonly Buffer[] = [];
const EMPTY: Record<string, string | string[] | undefined> = Object.freeze({});

export class AnswerBody implements Dispatcher.DispatchHandler {
  /** The answer's status and headers, once started was called. */
  statusCode = 0;
  headers: Record<string, string | string[] | undefined> = EMPTY;
  #controller: Dispatcher.DispatchController | null = null;
  #reader: AnswerReader | null = null;
  /** Chunks that came before the reader attached. */
  #held: Buffer[] | readonly Buffer[] = NO_CHUNKS;
  /** The end (true) or the error that came before the reader attached; null while the body goes on. */
  #over: true | Error | null = null;
  #done = false;
  #destroyed = false;
  /** The reader asked for no more bytes for now. */
  #paused = false;
  #started: ((body: AnswerBody) => void) | null;
  #failed: ((error: Error) => void) | null;
  readonly #signal: CallAbort | null;
  readonly #onAbort = (): void => {
    this.#controller?.abort(this.#signal!.reason as Error);
  };

  /**
   * `started` is called once the headers arrived, `failed` when the exchange fails before they did; `signal`
   * ends the exchange, before or after the headers (undici's request() listens to it the same way).
   */
  constructor(signal: CallAbort | null, started: (body: AnswerBody) => void, failed: (error: Error) => void) {
    this.#signal = signal;
    this.#started = started;
    this.#failed = failed;
    signal?.once('abort', this.#onAbort);
  }

  /** A body whose bytes are all here already (an error answer read whole and scrubbed). */
  static of(bytes: Buffer): AnswerBody {
    const body = new AnswerBody(null, noop, noop);
    body.#done = true;
    if (bytes.length > 0) body.#held = [bytes];
    body.#over = true;
    return body;
  }

  get destroyed(): boolean {
    return this.#destroyed;
  }

  /** Attaches the one reader; what came before it is handed over at once. */
  read(reader: AnswerReader): void {
    if (this.#reader !== null) throw new Error('an answer body has one reader');
    this.#reader = reader;
    if (this.#destroyed) return;
    const held = this.#held;
    this.#held = NO_CHUNKS;
    for (let i = 0; i < held.length && !this.#destroyed; i++) reader.onAnswerData(held[i]!);
    const over = this.#over;
    if (over !== null && !this.#destroyed) {
      this.#over = null;
      if (over === true) reader.onAnswerEnd();
      else reader.onAnswerError(over);
    } else if (!this.#paused) this.#controller?.resume();
  }

  pause(): void {
    this.#paused = true;
    this.#controller?.pause();
  }

  resume(): void {
    this.#paused = false;
    // Never after the end: the connection may be serving another exchange, whose parser this would resume.
    if (this.#reader !== null && !this.#done && !this.#destroyed) this.#controller?.resume();
  }

  /** Drops the answer: the exchange is aborted (its connection closed) and the reader hears nothing more. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#held = NO_CHUNKS;
    if (!this.#done) this.#controller?.abort(new AnswerDropped());
    this.#finish();
  }

  /** Reads the body to its end and throws it away: the connection stays usable. */
  discard(): void {
    this.read(DISCARD);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#signal?.ended) controller.abort(this.#signal.reason as Error);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: AnswerBody['headers']): void {
    if (statusCode < 200) return; // 100 Continue, 103 Early Hints: the answer is still to come
    const started = this.#started;
    this.#started = this.#failed = null;
    this.statusCode = statusCode;
    this.headers = headers;
    // Held until a reader attaches; undici delivers what it has parsed already.
    controller.pause();
    started?.(this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#destroyed) return;
    const reader = this.#reader;
    if (reader === null) {
      if (this.#held === NO_CHUNKS) this.#held = [chunk];
      else (this.#held as Buffer[]).push(chunk);
      controller.pause();
      return;
    }
    reader.onAnswerData(chunk);
  }

  onResponseEnd(): void {
    this.#done = true;
    if (this.#destroyed) return;
    const reader = this.#reader;
    this.#finish();
    if (reader === null) this.#over = true;
    else reader.onAnswerEnd();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#done = true;
    const failed = this.#failed;
    if (failed !== null) {
      this.#started = this.#failed = null;
      this.#finish();
      failed(error);
      return;
    }
    if (this.#destroyed) return;
    const reader = this.#reader;
    this.#finish();
    if (reader === null) this.#over = error;
    else reader.onAnswerError(error);
  }

  #finish(): void {
    this.#signal?.removeListener('abort', this.#onAbort);
  }
}

function noop(): void {}

const DISCARD: AnswerReader = { onAnswerData: noop, onAnswerEnd: noop, onAnswerError: noop };

/** A body read whole: `cut` when it was longer than the limit, and `bytes` then its first `limit` bytes. */
export interface WholeBody {
  bytes: Buffer;
  cut: boolean;
}

/** Reads a body whole, at most `limit` bytes: past it the answer is dropped. Rejects with the body's error. */
export function readAnswerWhole(body: AnswerBody, limit: number): Promise<WholeBody> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.read({
      onAnswerData(chunk) {
        if (size + chunk.length > limit) {
          chunks.push(chunk.subarray(0, limit - size));
          body.destroy();
          resolve({ bytes: Buffer.concat(chunks, limit), cut: true });
          return;
        }
        size += chunk.length;
        chunks.push(chunk);
      },
      onAnswerEnd: () => resolve({ bytes: Buffer.concat(chunks, size), cut: false }),
      onAnswerError: reject,
    });
  });
}

/** Hands each chunk of a body to `each` as it comes; resolves at its end, rejects with its error. */
export function readAnswerChunks(body: AnswerBody, each: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    body.read({ onAnswerData: each, onAnswerEnd: resolve, onAnswerError: reject });
  });
}
