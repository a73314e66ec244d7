// The price table the engine costs calls with: built-in defaults merged with overrides, indexed by every id
// a model has on any route. Rebuilt (not mutated) when the runtime config changes, so a lookup never sees a
// half-applied update.

import type { Provider, WireFormat } from '../../../contracts/routes.ts';
import { costsNothing } from './provider-pricing.ts';
import type { TokenUsage } from '../usage/usage.ts';
import { costUsd } from './cost.ts';
import { DEFAULT_CACHE_SETTINGS } from './default-cache.ts';
import { normaliseModelId } from './model-id.ts';
import type { CacheSettings, PriceEntry } from '../../../contracts/price-entry.ts';

export { PriceEntryError } from '../../../contracts/price-entry-error.ts';
export { parsePriceEntry } from '../../../contracts/parse-price-entry.ts';

function ids(entry: PriceEntry): string[] {
  return [entry.model, ...(entry.aliases ?? [])];
}

function keysOf(provider: string, id: string): string[] {
  const exact = `${provider}\u0000${id.trim().toLowerCase()}`;
  const normalised = `${provider}\u0000${normaliseModelId(id)}`;
  return exact === normalised ? [exact] : [exact, normalised];
}

function copyEntry(entry: PriceEntry): PriceEntry {
  const copy: PriceEntry = { ...entry };
  if (entry.aliases) copy.aliases = [...entry.aliases];
  if (entry.long_context) copy.long_context = { ...entry.long_context };
  if (entry.image_prices) copy.image_prices = entry.image_prices.map((image) => ({ ...image }));
  return copy;
}

function union(...lists: (readonly string[] | undefined)[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const list of lists) {
    for (const id of list ?? []) {
      const key = id.toLowerCase();
      if (!seen.has(key)) {
        seen.add(key);
        out.push(id);
      }
    }
  }
  return out;
}

/**
 * Applies overrides to the defaults, matching by provider and normalised model id (or any alias). An override
 * replaces the matched entry's prices as a whole (a half-inherited price list would mix two price sheets) but
 * keeps its canonical id and its aliases, adding its own; `disabled: true` keeps the entry but hides it.
 * Unmatched overrides are added. Later overrides win. See docs/decisions/0202-price-resolution.md.
 */
export function mergePriceEntries(defaults: readonly PriceEntry[], overrides: readonly PriceEntry[]): PriceEntry[] {
  const merged = defaults.map(copyEntry);
  const index = new Map<string, number>();
  const indexEntry = (entry: PriceEntry, at: number): void => {
    for (const id of ids(entry)) for (const key of keysOf(entry.provider, id)) if (!index.has(key)) index.set(key, at);
  };
  merged.forEach(indexEntry);
  for (const override of overrides) {
    let at: number | undefined;
    for (const id of ids(override)) {
      for (const key of keysOf(override.provider, id)) {
        at = index.get(key);
        if (at !== undefined) break;
      }
      if (at !== undefined) break;
    }
    if (at === undefined) {
      merged.push(copyEntry(override));
      indexEntry(override, merged.length - 1);
      continue;
    }
    const base = merged[at]!;
    const aliases = union(base.aliases, override.model === base.model ? [] : [override.model], override.aliases);
    const next: PriceEntry = override.disabled === true ? { ...copyEntry(base), disabled: true } : { ...copyEntry(override), model: base.model };
    if (override.disabled !== true) delete next.disabled;
    // No empty list where there were no aliases: restating an entry must leave it exactly as it was.
    if (aliases.length > 0) next.aliases = aliases;
    else delete next.aliases;
    merged[at] = next;
    indexEntry(next, at);
  }
  return merged;
}

/** A configured route's provider: cached reads at the input price unless its entries name a cached price. */
const NO_CACHE_DISCOUNT: CacheSettings = { ttl_seconds: 0, cached_multiplier: 1 };

export class PriceTable {
  readonly #entries: readonly PriceEntry[];
  readonly #index = new Map<string, PriceEntry>();
  readonly #cache: Record<Provider, CacheSettings>;
  readonly #wire: ReadonlyMap<string, WireFormat>;

  /** `wire`: the usage format of each configured route's provider, which picks its cost formula. */
  constructor(entries: readonly PriceEntry[], cache: Record<Provider, CacheSettings>, wire: ReadonlyMap<string, WireFormat> = new Map()) {
    this.#entries = entries.map(copyEntry);
    this.#cache = cache;
    this.#wire = wire;
    // Exact ids first, so an alias listed verbatim wins over another entry's normalised id.
    for (const entry of this.#entries) {
      for (const id of ids(entry)) this.#index.set(`${entry.provider}\u0000${id.trim().toLowerCase()}`, entry);
    }
    for (const entry of this.#entries) {
      for (const id of ids(entry)) {
        const key = `${entry.provider}\u0000${normaliseModelId(id)}`;
        if (!this.#index.has(key)) this.#index.set(key, entry);
      }
    }
  }

  /** The entry pricing `model` on `provider`'s routes; undefined when unknown or disabled. */
  resolve(provider: string, model: string): PriceEntry | undefined {
    if (typeof model !== 'string' || model.trim() === '') return undefined;
    const entry = this.#index.get(`${provider}\u0000${model.trim().toLowerCase()}`) ?? this.#index.get(`${provider}\u0000${normaliseModelId(model)}`);
    return entry === undefined || entry.disabled === true ? undefined : entry;
  }

  /** Cost of one call. A free provider's (costsNothing) counts as priced; an unknown model costs 0, unpriced. */
  /**
   * `model` is the entry's canonical id when one priced the call (the metrics' bounded model label); `problem`
   * says why a model with an entry is still unpriced (an image size it has no price for, ADR 0910).
   */
  cost(provider: string, model: string, usage: TokenUsage): { costUsd: number; priced: boolean; model?: string; problem?: string } {
    if (costsNothing(provider)) return { costUsd: 0, priced: true };
    const entry = this.resolve(provider, model);
    if (entry === undefined) return { costUsd: 0, priced: false };
    const cache = this.#cache[provider as Provider] ?? DEFAULT_CACHE_SETTINGS[provider as Provider] ?? NO_CACHE_DISCOUNT;
    const cost = costUsd(provider, entry, usage, cache, this.#wire.get(provider));
    if ('problem' in cost) return { costUsd: 0, priced: false, model: entry.model, problem: cost.problem };
    return { costUsd: cost.usd, priced: true, model: entry.model };
  }

  /** Enabled entries, for GET /v1/models. */
  models(): PriceEntry[] {
    return this.#entries.filter((entry) => entry.disabled !== true).map(copyEntry);
  }
}
