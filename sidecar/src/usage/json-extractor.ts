// Usage extraction for a non-streaming JSON response: the body is held within a fixed budget
// (BoundedJsonBody) and read once at the end by a format-specific reader.

import type { UsageExtractor } from './usage-extractor.ts';
import { NO_BYTES, withStreamError } from './usage-extractor.ts';
import { BoundedJsonBody, type JsonFieldSpec } from './json-body.ts';
import type { UsageResult } from './usage.ts';

export type JsonUsageReader = (document: Record<string, unknown>) => UsageResult;

export class JsonUsageExtractor implements UsageExtractor {
  readonly #body: BoundedJsonBody;
  readonly #fields: JsonFieldSpec;
  readonly #read: JsonUsageReader;
  readonly #fallback: (() => UsageResult) | undefined;
  /** A single JSON body is whole only at its end. */
  readonly sawEnd = false;

  constructor(fields: JsonFieldSpec, read: JsonUsageReader, options: { fallback?: () => UsageResult; maxBytes?: number } = {}) {
    this.#fields = fields;
    this.#read = read;
    this.#fallback = options.fallback;
    this.#body = new BoundedJsonBody(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes });
  }

  write(chunk: Buffer): Buffer {
    this.#body.write(chunk);
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    const document = this.#body.document(this.#fields);
    let result: UsageResult = document === undefined ? { usage: null } : this.#read(document);
    if (result.usage === null && this.#fallback !== undefined) {
      const fallback = this.#fallback();
      result = { ...fallback, ...(result.responseModel === undefined ? {} : { responseModel: result.responseModel }) };
    }
    return withStreamError(result, streamError);
  }
}
