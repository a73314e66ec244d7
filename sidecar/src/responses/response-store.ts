// `previous_response_id` for the responses Tollgate makes itself (the Responses API translated to every
// provider but OpenAI, which keeps its own): the conversation behind each stored response, held in memory,
// bounded by count and by bytes. The oldest go first when either bound is passed, and each eviction is
// counted (tollgate_responses_evicted_total): a later previous_response_id naming it is answered with a 400
// that says so. A response is found only by the user it was made for. One store per process, shared by the
// proxy port and the LM Studio-compatible port; it does not survive a restart (ADR 0901).

import type { ResponseItem } from '../translate/responses-request.ts';

export interface ResponseStoreLimits {
  maxResponses: number;
  /** Bytes of the stored conversations, as JSON. */
  maxBytes: number;
}

/** A thousand conversations, 16 MiB: a sidecar's memory request leaves room for it (ADR 0005). */
export const DEFAULT_RESPONSE_STORE_LIMITS: ResponseStoreLimits = { maxResponses: 1000, maxBytes: 16 * 1024 * 1024 };

export interface ResponseStoreStats {
  stored: number;
  bytes: number;
  /** Responses dropped to keep within the limits, or never kept because one alone exceeded them. */
  evicted: number;
}

interface Entry {
  user: string | null;
  /** The conversation as JSON: its size is what is held, and no caller can change it after it is stored. */
  json: string;
  bytes: number;
}

export class ResponseStore {
  readonly limits: ResponseStoreLimits;
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;
  #evicted = 0;

  constructor(limits: ResponseStoreLimits = DEFAULT_RESPONSE_STORE_LIMITS) {
    this.limits = limits;
  }

  /** Keeps a response's conversation (its input items, then its output items). */
  put(id: string, user: string | null, items: readonly ResponseItem[]): void {
    const json = JSON.stringify(items);
    const bytes = Buffer.byteLength(json);
    if (bytes > this.limits.maxBytes) {
      this.#evicted += 1;
      return;
    }
    this.#entries.set(id, { user, json, bytes });
    this.#bytes += bytes;
    // Map iteration is insertion order: the first key is the oldest response.
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= this.limits.maxResponses && this.#bytes <= this.limits.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= entry.bytes;
      this.#evicted += 1;
    }
  }

  /** The conversation of a stored response made for `user`, or undefined. */
  get(id: string, user: string | null): ResponseItem[] | undefined {
    const entry = this.#entries.get(id);
    if (entry === undefined || entry.user !== user) return undefined;
    return JSON.parse(entry.json) as ResponseItem[];
  }

  has(id: string): boolean {
    return this.#entries.has(id);
  }

  stats(): ResponseStoreStats {
    return { stored: this.#entries.size, bytes: this.#bytes, evicted: this.#evicted };
  }
}
