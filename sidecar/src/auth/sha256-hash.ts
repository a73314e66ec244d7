// SHA-256 and HMAC-SHA-256 from node:crypto in the shape @smithy/signature-v4 expects (its Checksum
// interface). Native hashing keeps payload hashing of large Bedrock bodies off the JavaScript heap loop.

import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';

type SourceData = string | ArrayBuffer | ArrayBufferView;

function toBuffer(data: SourceData): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

export class Sha256Hash {
  readonly #secret: Buffer | undefined;
  #hash: Hash | Hmac;

  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : toBuffer(secret);
    this.#hash = this.#fresh();
  }

  update(data: Uint8Array): void {
    this.#hash.update(data);
  }

  async digest(): Promise<Uint8Array> {
    return this.#hash.digest();
  }

  reset(): void {
    this.#hash = this.#fresh();
  }

  #fresh(): Hash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
}
