// The local model runtime's own HTTP API (Ollama's): which version answers, which models are on disk, which
// are loaded, and pulling a new one. Chat calls do not come through here: they are route `local`'s, through
// the relay like every other call. Every request has a deadline, so a runtime that hangs never holds up a
// health view or a /v1/models listing for long.

import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { isRecord } from '../../../contracts/json-record.ts';
import { Agent, request } from '../upstream/undici-agent.ts';

/** A model on the runtime's disk, as GET /api/tags describes it. */
export interface RuntimeModel {
  /** `llama3.2:latest`: the id callers use (`llama3.2` names the same, its tag defaulting to latest). */
  name: string;
  /** ISO time of the last change, when the runtime says. */
  modifiedAt: string | null;
  sizeBytes: number | null;
  family: string | null;
  parameterSize: string | null;
  quantization: string | null;
}

/** The runtime answered, but not with what its API promises (or with an error of its own). */
export class RuntimeAnswerError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'RuntimeAnswerError';
    this.statusCode = statusCode;
  }
}

const PROBE_TIMEOUT_MS = 2_000;
const MAX_LISTING_BYTES = 4 * 1024 * 1024;

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function toRuntimeModel(raw: unknown): RuntimeModel | null {
  if (!isRecord(raw)) return null;
  const name = stringOrNull(raw.name) ?? stringOrNull(raw.model);
  if (name === null) return null;
  const details = isRecord(raw.details) ? raw.details : {};
  return {
    name,
    modifiedAt: stringOrNull(raw.modified_at),
    sizeBytes: typeof raw.size === 'number' && Number.isFinite(raw.size) ? raw.size : null,
    family: stringOrNull(details.family),
    parameterSize: stringOrNull(details.parameter_size),
    quantization: stringOrNull(details.quantization_level),
  };
}

/** `{"error":"…"}`, Ollama's error body, or OpenAI's `{"error":{"message":…}}`; else the text itself, cut short. */
export function runtimeErrorMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isRecord(parsed)) {
      if (typeof parsed.error === 'string') return parsed.error;
      if (isRecord(parsed.error) && typeof parsed.error.message === 'string') return parsed.error.message;
    }
  } catch {
    // not JSON: the text says it
  }
  const text = body.trim();
  return text.length > 300 ? `${text.slice(0, 300)}…` : text || '(no body)';
}

/** The whole body as text, refusing one larger than `limit` bytes (a listing is kilobytes). */
async function boundedText(body: Readable, limit: number, path: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new RuntimeAnswerError(200, `GET ${path} answered more than the ${limit} bytes read`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

export class OllamaApi {
  readonly #agent: Agent;

  constructor(agent: Agent = new Agent({ connections: 8, connect: { timeout: PROBE_TIMEOUT_MS } })) {
    this.#agent = agent;
  }

  /** GET /api/version: the version string of a runtime that answers; throws when none does. */
  async version(baseUrl: string): Promise<string> {
    const body = await this.#getJson(baseUrl, '/api/version');
    if (!isRecord(body) || typeof body.version !== 'string') throw new RuntimeAnswerError(200, 'GET /api/version did not name a version');
    return body.version;
  }

  /** GET /api/tags: the models on the runtime's disk. */
  async models(baseUrl: string): Promise<RuntimeModel[]> {
    return this.#modelList(baseUrl, '/api/tags');
  }

  /** GET /api/ps: the models loaded in memory now. */
  async loadedModels(baseUrl: string): Promise<RuntimeModel[]> {
    return this.#modelList(baseUrl, '/api/ps');
  }

  /**
   * POST /api/pull: the runtime's progress stream (NDJSON, one status object a line; a failure after the
   * stream started is an `{"error": …}` line). A refusal before it started throws RuntimeAnswerError.
   */
  async pull(baseUrl: string, model: string, signal: AbortSignal): Promise<Readable> {
    const url = new URL(`${baseUrl}/api/pull`);
    const response = await request(this.#agent, {
      origin: url.origin,
      path: url.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ model, stream: true }),
      signal,
      headersTimeout: 30_000,
      // a layer can take minutes between progress lines only if the runtime is stuck; it reports every few hundred ms
      bodyTimeout: 300_000,
    });
    if (response.statusCode >= 400) {
      const text = await response.body.text();
      throw new RuntimeAnswerError(response.statusCode, runtimeErrorMessage(text));
    }
    return response.body;
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  async #modelList(baseUrl: string, path: string): Promise<RuntimeModel[]> {
    const body = await this.#getJson(baseUrl, path);
    if (!isRecord(body) || !Array.isArray(body.models)) throw new RuntimeAnswerError(200, `GET ${path} did not list models`);
    return body.models.map(toRuntimeModel).filter((model): model is RuntimeModel => model !== null);
  }

  async #getJson(baseUrl: string, path: string): Promise<unknown> {
    const url = new URL(baseUrl + path);
    const response: Dispatcher.ResponseData = await request(this.#agent, {
      origin: url.origin,
      path: url.pathname,
      method: 'GET',
      headersTimeout: PROBE_TIMEOUT_MS,
      bodyTimeout: PROBE_TIMEOUT_MS,
    });
    const text = await boundedText(response.body, MAX_LISTING_BYTES, path);
    if (response.statusCode >= 400) throw new RuntimeAnswerError(response.statusCode, `GET ${path} answered ${response.statusCode}: ${runtimeErrorMessage(text)}`);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new RuntimeAnswerError(response.statusCode, `GET ${path} answered with a body that is not JSON`);
    }
  }
}
