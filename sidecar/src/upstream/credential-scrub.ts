// The proxy's credential taken out of a successful answer as its bytes pass, streamed or whole
// (credential-echo.ts does it for error answers, which are read whole). An upstream that quotes the request
// (a debug echo, a self-hosted server that returns its headers, a model told to repeat its prompt by a caller
// who controls the upstream) must not hand the caller the key the proxy attached.
//
// The answer is never collected: each chunk is searched as it passes (one Buffer.indexOf per secret) and goes
// on as the same Buffer when it holds no secret, which is every chunk of an ordinary answer. A secret split
// over two chunks is caught by holding back the end of a chunk that could begin one (at most the secret's
// length less one byte, and only when those bytes are the start of a secret), so nothing else is delayed:
// an SSE event ending in `\n\n` is never held. Each occurrence is replaced by a marker of the same length, so
// a declared Content-Length stays true and JSON stays JSON.

import type { UsageExtractor } from '../usage/usage-extractor.ts';
import { REDACTED } from './credential-echo.ts';

const NO_BYTES = Buffer.alloc(0);

interface Needle {
  bytes: Buffer;
  /** Same length as `bytes`: REDACTED padded with `*`, or only `*` for a secret shorter than REDACTED. */
  marker: Buffer;
}

function markerFor(length: number): Buffer {
  return Buffer.from((length >= REDACTED.length ? REDACTED : '').padEnd(length, '*'));
}

/** The needles of a credential's secrets, by the (shared) array credentialSecrets gave: built once per credential. */
const NEEDLES_OF = new WeakMap<readonly string[], readonly Needle[]>();

/** True when `data` from `at` to its end is the beginning of `needle`. */
function beginsNeedle(data: Buffer, at: number, needle: Buffer): boolean {
  for (let i = at + 1, j = 1; i < data.length; i++, j++) if (data[i] !== needle[j]) return false;
  return true;
}

/** Scrubs one answer's bytes in order; `end()` returns what was held back when the answer ended. */
export class CredentialScrub {
  readonly #needles: readonly Needle[];
  #held: Buffer | null = null;

  /** The scrub for the secrets of the credential headers the proxy sent (credentialSecrets); undefined for none. */
  static of(secrets: readonly string[]): CredentialScrub | undefined {
    let needles = NEEDLES_OF.get(secrets);
    if (needles === undefined) {
      // `Bearer <token>` holds `<token>`: finding the token is enough, and it is replaced wherever it appears.
      needles = secrets
        .filter((secret) => !secrets.some((other) => other !== secret && secret.includes(other)))
        .map((secret) => {
          const bytes = Buffer.from(secret);
          return { bytes, marker: markerFor(bytes.length) };
        });
      NEEDLES_OF.set(secrets, needles);
    }
    return needles.length === 0 ? undefined : new CredentialScrub(needles);
  }

  private constructor(needles: readonly Needle[]) {
    this.#needles = needles;
  }

  /** The chunk to pass on: the same Buffer when it holds no secret and ends in nothing that could begin one. */
  write(chunk: Buffer): Buffer {
    let data = chunk;
    if (this.#held !== null) {
      data = Buffer.concat([this.#held, chunk]);
      this.#held = null;
    }
    data = this.#replaced(data);
    const keep = this.#unfinishedAtEnd(data);
    if (keep === 0) return data;
    this.#held = Buffer.from(data.subarray(data.length - keep));
    return data.subarray(0, data.length - keep);
  }

  /** The bytes held back at the answer's end: the beginning of a secret that never finished. */
  end(): Buffer {
    const held = this.#held ?? NO_BYTES;
    this.#held = null;
    return held;
  }

  #replaced(data: Buffer): Buffer {
    let out = data;
    for (const { bytes, marker } of this.#needles) {
      let at = out.indexOf(bytes);
      if (at === -1) continue;
      // The upstream's buffer is not the proxy's to write into (the usage extractor may hold a view of it).
      if (out === data) out = Buffer.from(data);
      for (; at !== -1; at = out.indexOf(bytes, at + bytes.length)) marker.copy(out, at);
    }
    return out;
  }

  /** How many bytes at the end of `data` are the beginning of a secret (the longest such run). */
  #unfinishedAtEnd(data: Buffer): number {
    let keep = 0;
    for (const { bytes } of this.#needles) {
      const first = bytes[0]!;
      for (let at = data.indexOf(first, Math.max(0, data.length - bytes.length + 1)); at !== -1; at = data.indexOf(first, at + 1)) {
        if (data.length - at <= keep) break;
        if (beginsNeedle(data, at, bytes)) {
          keep = data.length - at;
          break;
        }
      }
    }
    return keep;
  }
}

/** The usage extractor of an answer whose bytes are scrubbed first: what it reads and forwards is scrubbed. */
export function scrubbingExtractor(inner: UsageExtractor, scrub: CredentialScrub): UsageExtractor {
  return {
    write: (chunk) => inner.write(scrub.write(chunk)),
    flush: () => {
      const rest = scrub.end();
      const last = rest.length === 0 ? NO_BYTES : inner.write(rest);
      const held = inner.flush();
      return last.length === 0 ? held : held.length === 0 ? last : Buffer.concat([last, held]);
    },
    end: (streamError) => inner.end(streamError),
    get sawEnd() {
      return inner.sawEnd;
    },
  };
}
