// Request bodies the proxy must read (model in the body, a rewrite, a signature) are read whole but
// bounded; bodies it passes through are counted on the way so the same limit holds without buffering.
// Both are bounded in time too: a caller that trickles its body is answered 408 `client_timeout` once
// server.requestTimeoutMs has passed, and one that leaves mid-body is recorded as `client_aborted`, never as
// an upstream fault (ADR 1002).

import type { IncomingMessage } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { ProxyError } from '../errors.ts';

function tooLarge(limit: number): ProxyError {
  return new ProxyError('body_too_large', `request body exceeds the limit of ${limit} bytes (server.bodyLimitBytes)`);
}

export function bodyTimeout(ms: number): ProxyError {
  return new ProxyError('client_timeout', `request body not received within ${ms} ms (server.requestTimeoutMs)`);
}

export function callerLeft(): ProxyError {
  return new ProxyError('client_aborted', 'the caller closed the connection before the call was complete');
}

/** Refuses early when the caller announced a body larger than the limit. */
export function checkDeclaredLength(req: IncomingMessage, limit: number): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit);
}

export function hasBody(req: IncomingMessage): boolean {
  const declared = req.headers['content-length'];
  if (declared !== undefined) return declared !== '0';
  // HTTP/2 frames bodies itself: a request without one ends its stream with its headers.
  const http2Stream = (req as unknown as { stream?: { endAfterHeaders: boolean } }).stream;
  if (http2Stream !== undefined) return !http2Stream.endAfterHeaders;
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * Reads the whole body, at most `limit` bytes within `timeoutMs`. Over the limit, the rest is drained so the
 * caller can read the 413; past the deadline, reading stops (draining would let a trickle hold on) and the
 * connection should close after the 408.
 */
export function readBoundedBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  checkDeclaredLength(req, limit);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (error: ProxyError | null) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onClose);
      if (error === null) resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      else reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        settle(tooLarge(limit));
        req.resume(); // drain the rest so the connection can answer 413
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(null);
    const onClose = () => settle(callerLeft());
    const timer = setTimeout(() => {
      req.pause();
      settle(bodyTimeout(timeoutMs));
    }, timeoutMs).unref();
    // `on`, not `once`: settle takes all four off, and `once` wraps each listener in objects of its own per call.
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.on('error', onClose);
  });
}

/**
 * Passes chunks through untouched, failing the stream once more than `limit` bytes went by, or when the
 * body has not ended `timeoutMs` after the stream was made.
 */
export class BodyLimit extends Transform {
  #remaining: number;
  readonly #limit: number;
  /** Bytes passed through so far. */
  bytes = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(limit: number, timeoutMs: number) {
    super();
    this.#remaining = limit;
    this.#limit = limit;
    this.#timer = setTimeout(() => this.destroy(bodyTimeout(timeoutMs)), timeoutMs).unref();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#remaining -= chunk.length;
    this.bytes += chunk.length;
    if (this.#remaining < 0) callback(tooLarge(this.#limit));
    else callback(null, chunk);
  }

  /** The call ended (answered early, or the upstream failed): its body no longer has a deadline to keep. */
  stopDeadline(): void {
    clearTimeout(this.#timer);
  }

  override _flush(callback: TransformCallback): void {
    clearTimeout(this.#timer);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearTimeout(this.#timer);
    callback(error);
  }
}
