// Splits an AWS event stream (application/vnd.amazon.eventstream) into frames and decodes each one with
// @smithy/eventstream-codec, which checks the prelude and message CRC32s and parses the typed headers.
//
// The codec decodes exactly one whole frame per call and keeps no bytes between calls, so the framing is ours:
// a frame split across reads is assembled in one buffer sized from its prelude; several frames in one read are
// decoded from views of that read without copying. Errors (bad length, checksum mismatch) never throw: they
// stop decoding and are reported through `error`, since after a corrupt frame the stream cannot be resynced.

import { createRequire } from 'node:module';
import type { EventStreamCodec, Message } from '@smithy/eventstream-codec';

/** UTF-8 conversions the codec needs for header names and string values (Node's Buffer does both). */
function toUtf8(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}
function fromUtf8(text: string): Uint8Array {
  return Buffer.from(text, 'utf8');
}

let codec: EventStreamCodec | undefined;

/**
 * One codec for the process: it holds no per-stream state when only decode() is used. Loaded with the first
 * Bedrock stream (a CommonJS package, so synchronously): an engine that never sees one does not pay for it (ADR 0003).
 */
function eventStreamCodec(): EventStreamCodec {
  if (codec === undefined) {
    const { EventStreamCodec: Codec } = createRequire(import.meta.url)('@smithy/eventstream-codec') as typeof import('@smithy/eventstream-codec');
    codec = new Codec(toUtf8, fromUtf8);
  }
  return codec;
}

/** Prelude (12 bytes) plus message CRC (4 bytes): the smallest possible frame. */
const MIN_FRAME_BYTES = 16;
/** Bedrock frames are small (one model event each); anything near this is corruption, not data. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

export type EventStreamMessageHandler = (message: Message) => void;

export class AwsEventStreamDecoder {
  /** First problem found (bad length, checksum mismatch, truncation); decoding stops there. */
  error: string | undefined;
  frames = 0;

  readonly #onMessage: EventStreamMessageHandler;
  readonly #maxFrameBytes: number;
  /** The first bytes of a frame whose length prefix was split across reads. */
  #prefix: Buffer | null = null;
  /** A frame being assembled across reads, allocated at its full length. */
  #frame: Buffer | null = null;
  #filled = 0;
  #offset = 0;

  constructor(onMessage: EventStreamMessageHandler, options: { maxFrameBytes?: number } = {}) {
    this.#onMessage = onMessage;
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  push(chunk: Buffer): void {
    if (this.error !== undefined) return;
    let pos = 0;
    const length = chunk.length;
    if (this.#prefix !== null) {
      const need = 4 - this.#prefix.length;
      if (length < need) {
        this.#prefix = Buffer.concat([this.#prefix, chunk]);
        this.#offset += length;
        return;
      }
      const prefix = Buffer.concat([this.#prefix, chunk.subarray(0, need)]);
      this.#prefix = null;
      if (!this.#startFrame(prefix.readUInt32BE(0), this.#offset - (4 - need))) return;
      prefix.copy(this.#frame!, 0);
      this.#filled = 4;
      pos = need;
    }
    if (this.#frame !== null) {
      const frame = this.#frame;
      const take = Math.min(frame.length - this.#filled, length - pos);
      chunk.copy(frame, this.#filled, pos, pos + take);
      this.#filled += take;
      pos += take;
      if (this.#filled < frame.length) {
        this.#offset += length;
        return;
      }
      this.#frame = null;
      if (!this.#decode(frame)) return;
    }
    while (pos < length) {
      if (length - pos < 4) {
        this.#prefix = Buffer.from(chunk.subarray(pos));
        break;
      }
      const total = chunk.readUInt32BE(pos);
      if (!this.#checkLength(total, this.#offset + pos)) return;
      if (length - pos >= total) {
        if (!this.#decode(chunk.subarray(pos, pos + total))) return;
        pos += total;
      } else {
        this.#startFrame(total, this.#offset + pos);
        chunk.copy(this.#frame!, 0, pos);
        this.#filled = length - pos;
        break;
      }
    }
    this.#offset += length;
  }

  /** Called at end of stream; returns the error, including a frame cut short. */
  end(): string | undefined {
    if (this.error === undefined && (this.#prefix !== null || this.#frame !== null)) {
      const have = this.#prefix?.length ?? this.#filled;
      const want = this.#frame?.length;
      this.error = `event stream ended inside a frame (${have}${want === undefined ? '' : ` of ${want}`} bytes received)`;
    }
    this.#prefix = null;
    this.#frame = null;
    return this.error;
  }

  #checkLength(total: number, at: number): boolean {
    if (total < MIN_FRAME_BYTES || total > this.#maxFrameBytes) {
      this.error = `invalid event stream frame length ${total} at byte ${at}`;
      return false;
    }
    return true;
  }

  #startFrame(total: number, at: number): boolean {
    if (!this.#checkLength(total, at)) return false;
    this.#frame = Buffer.allocUnsafe(total);
    this.#filled = 0;
    return true;
  }

  #decode(frame: Uint8Array): boolean {
    let message: Message;
    try {
      message = eventStreamCodec().decode(frame);
    } catch (error) {
      this.error = `event stream frame ${this.frames + 1} rejected: ${(error as Error).message}`;
      return false;
    }
    this.frames++;
    this.#onMessage(message);
    return true;
  }
}
