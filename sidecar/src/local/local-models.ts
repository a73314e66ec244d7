// Which models the local runtime has, for /v1/models and for routing a /v1 call whose model has no price
// entry. The runtime is asked at most once per `ttlMs` (concurrent callers share one request), so a busy
// /v1/models or a stream of calls does not become a stream of /api/tags requests; a pull invalidates it.

import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { ROUTES } from '../../../contracts/routes.ts';
import type { OllamaApi, RuntimeModel } from './ollama-api.ts';

/** The provider of the local runtime's models: its route's, in the route table. */
const LOCAL_PROVIDER = ROUTES.local.provider;

/**
 * Where a /v1 call for a runtime model without a price entry goes: provider `local`, free (its facts in
 * contracts/routes.ts); a price entry of the same name wins (ADR 1402).
 */
export function localTarget(model: string): { entry: PriceEntry; provider: string } {
  return { entry: { provider: LOCAL_PROVIDER, model, input_per_million: 0, output_per_million: 0 }, provider: LOCAL_PROVIDER };
}

/** A runtime model as /v1/models lists it: owned by the local runtime, created when the runtime last changed it. */
export function localModelObject(model: RuntimeModel): { id: string; object: 'model'; created: number; owned_by: string } {
  const modified = model.modifiedAt === null ? NaN : Date.parse(model.modifiedAt);
  return { id: model.name, object: 'model', created: Number.isNaN(modified) ? 0 : Math.floor(modified / 1000), owned_by: LOCAL_PROVIDER };
}

export interface ModelListing {
  /** Empty when the runtime did not answer. */
  models: RuntimeModel[];
  /** Why the runtime gave no list (unreachable, a bad answer); null when it answered. */
  problem: string | null;
}

export interface LocalModelCatalogOptions {
  api: OllamaApi;
  /** The runtime's base URL under the live config. */
  baseUrl: () => string;
  ttlMs?: number;
  now?: () => number;
}

/** `llama3.2` and `llama3.2:latest` name the same model (Ollama's tag defaults to latest); names ignore case. */
export function sameModelName(requested: string, runtimeName: string): boolean {
  const a = requested.toLowerCase();
  const b = runtimeName.toLowerCase();
  return a === b || `${a}:latest` === b || a === `${b}:latest`;
}

export class LocalModelCatalog {
  readonly #opts: Required<Omit<LocalModelCatalogOptions, 'ttlMs' | 'now'>> & { ttlMs: number; now: () => number };
  #cached: { listing: ModelListing; at: number; baseUrl: string } | null = null;
  #pending: Promise<ModelListing> | null = null;

  constructor(opts: LocalModelCatalogOptions) {
    this.#opts = { ttlMs: 2_000, now: Date.now, ...opts };
  }

  /** The runtime's models, at most `ttlMs` old. Never throws: a runtime that does not answer lists none. */
  async listing(): Promise<ModelListing> {
    const baseUrl = this.#opts.baseUrl();
    const cached = this.#cached;
    if (cached && cached.baseUrl === baseUrl && this.#opts.now() - cached.at < this.#opts.ttlMs) return cached.listing;
    this.#pending ??= this.#fetch(baseUrl).finally(() => (this.#pending = null));
    return this.#pending;
  }

  /** The runtime's model a requested id names, or undefined (with why, when the runtime did not answer). */
  async find(requested: string): Promise<{ model: RuntimeModel | undefined; problem: string | null }> {
    const listing = await this.listing();
    return { model: listing.models.find((model) => sameModelName(requested, model.name)), problem: listing.problem };
  }

  /** Forget the cached list (a model was just pulled). */
  invalidate(): void {
    this.#cached = null;
  }

  async #fetch(baseUrl: string): Promise<ModelListing> {
    let listing: ModelListing;
    try {
      listing = { models: await this.#opts.api.models(baseUrl), problem: null };
    } catch (error) {
      listing = { models: [], problem: `the local runtime at ${baseUrl} did not list its models: ${(error as Error).message}` };
    }
    this.#cached = { listing, at: this.#opts.now(), baseUrl };
    return listing;
  }
}
