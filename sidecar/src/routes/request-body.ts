// Request bodies the proxy must read (model in the body, a rewrite, a signature) are read whole but
// bounded; bodies it passes through are counted on the way so the same limit holds without buffering.

import type { IncomingMessage } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { ProxyError } from '../errors.ts';

function tooLarge(limit: number): ProxyError {
  return new ProxyError('body_too_large', `request body exceeds the limit of ${limit} bytes (server.bodyLimitBytes)`);
}

/** Refuses early when the caller announced a body larger than the limit. */
export function checkDeclaredLength(req: IncomingMessage, limit: number): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit);
}

export function hasBody(req: IncomingMessage): boolean {
  const declared = req.headers['content-length'];
  if (declared !== undefined) return declared !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

export async function readBoundedBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  checkDeclaredLength(req, limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume(); // drain the rest so the connection can answer 413
      throw tooLarge(limit);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

/** Passes chunks through untouched, failing the stream once more than `limit` bytes went by. */
export class BodyLimit extends Transform {
  #remaining: number;
  readonly #limit: number;
  constructor(limit: number) {
    super();
    this.#remaining = limit;
    this.#limit = limit;
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#remaining -= chunk.length;
    if (this.#remaining < 0) callback(tooLarge(this.#limit));
    else callback(null, chunk);
  }
}
