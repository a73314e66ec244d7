// The live runtime config. Three layers, later ones winning field by field: the config file (with built-in
// defaults under it), the operator's pushed snapshot, and changes made through POST /_local/api/config.
// Readers call get() per request and keep what they got for the whole call, so swapping the config never
// changes a request that is already in flight.

import { isDeepStrictEqual } from 'node:util';
import { defaultBudgetsConfig } from '../../../contracts/budget-config.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { DEFAULT_PRICES } from '../pricing/default-prices.ts';
import { mergePriceEntries, PriceTable } from '../pricing/price-table.ts';
import { defaultV1Route, type Provider, type RouteName } from '../../../contracts/routes.ts';
import type { RuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import type { RouteEntry, RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { routeCatalog, wireFormat } from '../routes/route-catalog.ts';
import { checkAliasRoutes } from '../fallback/configured-aliases.ts';
import { defaultServerAuth } from '../../../contracts/server-auth-config.ts';

export type ConfigLayer = 'file' | 'operator' | 'api';
const LAYER_ORDER: readonly ConfigLayer[] = ['file', 'operator', 'api'];

export function defaultRuntimeConfig(): RuntimeConfig {
  return {
    mode: 'proxy',
    server: {
      host: '127.0.0.1',
      port: 8181,
      bodyLimitBytes: 32 * 1024 * 1024,
      allowedHosts: [],
      allowedOrigins: [],
      requestTimeoutMs: 60_000,
      drainTimeoutMs: 30_000,
      auth: defaultServerAuth(),
    },
    upstreams: {},
    routes: [],
    pricing: { models: [] },
    cache: structuredClone(DEFAULT_CACHE_SETTINGS),
    credentials: {},
    breaker: { consecutiveFailures: 5, failureRatio: 0.5, minimumRequests: 20, windowMs: 30_000, openMs: 10_000 },
    storage: { kind: 'sqlite', path: 'tollgate.db', bufferSize: 10_000, batchSize: 200, flushIntervalMs: 200, maxSpans: 0 },
    gateway: { anthropicRoute: defaultV1Route('anthropic')!, googleRoute: defaultV1Route('google')! },
    local: { enabled: true, lmstudioPort: 1234, runtime: { baseUrl: 'http://127.0.0.1:11434', command: ['ollama', 'serve'], startTimeoutMs: 30_000 } },
    budgets: defaultBudgetsConfig(),
    metrics: { perUser: { enabled: false, maxUsers: 100 } },
    models: {},
  };
}

/** Applies one patch over a config, returning a new config (the input is not modified). */
export function applyPatch(base: RuntimeConfig, patch: RuntimeConfigPatch): RuntimeConfig {
  const next = structuredClone(base);
  if (patch.mode) next.mode = patch.mode;
  if (patch.server) {
    const { auth, ...server } = patch.server;
    Object.assign(next.server, server);
    if (auth) next.server.auth = { ...next.server.auth, ...structuredClone(auth) };
  }
  if (patch.upstreams) {
    for (const [route, upstream] of Object.entries(patch.upstreams) as [RouteName, object][]) {
      next.upstreams[route] = { ...next.upstreams[route], ...upstream };
    }
  }
  if (patch.routes) next.routes = mergeRoutes(next.routes, patch.routes);
  if (patch.pricing) next.pricing.models = mergePriceEntries(next.pricing.models, patch.pricing.models);
  if (patch.cache) {
    for (const [provider, settings] of Object.entries(patch.cache) as [Provider, object][]) {
      next.cache[provider] = { ...next.cache[provider], ...settings };
    }
  }
  if (patch.credentials) Object.assign(next.credentials, patch.credentials);
  if (patch.breaker) Object.assign(next.breaker, patch.breaker);
  if (patch.storage) {
    Object.assign(next.storage, patch.storage);
    // A batch size nobody set follows a smaller buffer (an explicit one larger than its buffer is refused).
    if (patch.storage.batchSize === undefined && next.storage.batchSize > next.storage.bufferSize) next.storage.batchSize = next.storage.bufferSize;
  }
  if (patch.gateway) Object.assign(next.gateway, patch.gateway);
  if (patch.local) {
    const { runtime, ...local } = patch.local;
    Object.assign(next.local, local);
    if (runtime) Object.assign(next.local.runtime, structuredClone(runtime));
  }
  if (patch.audit) next.audit = structuredClone(patch.audit);
  if (patch.provenance) next.provenance = structuredClone(patch.provenance);
  if (patch.budgets?.ledger) next.budgets.ledger = structuredClone(patch.budgets.ledger);
  if (patch.budgets?.unreachable) next.budgets.unreachable = patch.budgets.unreachable;
  if (patch.budgets?.policies) next.budgets.policies = structuredClone(patch.budgets.policies);
  if (patch.metrics?.perUser) Object.assign(next.metrics.perUser, patch.metrics.perUser);
  if (patch.tracing) next.tracing = structuredClone(patch.tracing);
  if (patch.models) next.models = { ...next.models, ...structuredClone(patch.models) };
  return next;
}

export interface ConfigSnapshot {
  readonly config: RuntimeConfig;
  /** Built-in prices merged with every override: what calls are costed with. */
  readonly prices: PriceTable;
  /** Increases with every change; reported by the config API. */
  readonly revision: number;
}

export type ConfigListener = (snapshot: ConfigSnapshot) => void;

export class ConfigStore {
  #layers = new Map<ConfigLayer, RuntimeConfigPatch>();
  #snapshot: ConfigSnapshot;
  #listeners = new Set<ConfigListener>();

  constructor(filePatch: RuntimeConfigPatch = {}) {
    this.#layers.set('file', filePatch);
    this.#snapshot = this.#build(0);
    // The file's aliases are checked against the routes it has (with the built-in ones): a bad one stops start-up.
    checkAliasRoutes(this.#snapshot.config);
  }

  current(): ConfigSnapshot {
    return this.#snapshot;
  }

  get(): RuntimeConfig {
    return this.#snapshot.config;
  }

  layer(name: ConfigLayer): RuntimeConfigPatch | undefined {
    return this.#layers.get(name);
  }

  /** Replaces a whole layer (the operator's snapshot replaces the previous snapshot). */
  setLayer(name: ConfigLayer, patch: RuntimeConfigPatch): ConfigSnapshot {
    this.#layers.set(name, patch);
    return this.#publish();
  }

  /** Merges into a layer (the config API adds to earlier API changes). */
  mergeIntoLayer(name: ConfigLayer, patch: RuntimeConfigPatch): ConfigSnapshot {
    const merged = mergePatches(this.#layers.get(name) ?? {}, patch);
    this.#layers.set(name, merged);
    return this.#publish();
  }

  /** The config a merge into a layer would make, without making it: a caller checks it before committing. */
  preview(name: ConfigLayer, patch: RuntimeConfigPatch): RuntimeConfig {
    return this.#compose(name, mergePatches(this.#layers.get(name) ?? {}, patch));
  }

  /** The layers applied over the defaults in order, one of them replaced when asked. */
  #compose(replaced?: ConfigLayer, replacement?: RuntimeConfigPatch): RuntimeConfig {
    let config = defaultRuntimeConfig();
    for (const name of LAYER_ORDER) {
      const patch = name === replaced ? replacement : this.#layers.get(name);
      if (patch) config = applyPatch(config, patch);
    }
    return config;
  }

  subscribe(listener: ConfigListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * A change that leaves the effective config as it was (`{}`, a price restated) keeps the snapshot and its
   * revision, so `revision` counts real changes. The layer itself is still stored: it can matter once another
   * layer changes under it.
   */
  #publish(): ConfigSnapshot {
    const next = this.#build(this.#snapshot.revision + 1);
    if (isDeepStrictEqual(next.config, this.#snapshot.config)) return this.#snapshot;
    this.#snapshot = next;
    for (const listener of this.#listeners) listener(this.#snapshot);
    return this.#snapshot;
  }

  #build(revision: number): ConfigSnapshot {
    const config = this.#compose();
    // The routes are bound to their formats here, once per config: calls only look them up (route-catalog.ts).
    const routes = routeCatalog(config);
    const wire = new Map(routes.configured().map((route) => [route.provider, wireFormat(route)] as const));
    const prices = new PriceTable(mergePriceEntries(DEFAULT_PRICES, config.pricing.models), config.cache, wire);
    return Object.freeze({ config, prices, revision });
  }
}

function mergePatches(a: RuntimeConfigPatch, b: RuntimeConfigPatch): RuntimeConfigPatch {
  const out: RuntimeConfigPatch = structuredClone(a);
  for (const key of Object.keys(b) as (keyof RuntimeConfigPatch)[]) {
    const value = b[key];
    if (value === undefined) continue;
    if (typeof value !== 'object') {
      (out as Record<string, unknown>)[key] = value; // mode
    } else if (key === 'routes') {
      out.routes = mergeRoutes(out.routes ?? [], value as RouteEntry[]);
    } else if (key === 'pricing') {
      out.pricing = { models: mergePriceEntries(out.pricing?.models ?? [], (value as { models: [] }).models) };
    } else if (key === 'audit') {
      out.audit = structuredClone(value as NonNullable<RuntimeConfigPatch['audit']>);
    } else if (key === 'provenance') {
      out.provenance = structuredClone(value as NonNullable<RuntimeConfigPatch['provenance']>);
    } else if (key === 'budgets') {
      out.budgets = { ...out.budgets, ...structuredClone(value as NonNullable<RuntimeConfigPatch['budgets']>) };
    } else if (key === 'models') {
      out.models = { ...out.models, ...structuredClone(value as NonNullable<RuntimeConfigPatch['models']>) };
    } else if (key === 'upstreams' || key === 'cache') {
      const merged: Record<string, object> = { ...(out[key] as Record<string, object> | undefined) };
      for (const [k, v] of Object.entries(value as Record<string, object>)) merged[k] = { ...merged[k], ...v };
      (out as Record<string, unknown>)[key] = merged;
    } else {
      (out as Record<string, unknown>)[key] = { ...(out[key] as object | undefined), ...value };
    }
  }
  return out;
}

/** A later source's route replaces an earlier one of the same name; new names are added in order. */
function mergeRoutes(base: readonly RouteEntry[], later: readonly RouteEntry[]): RouteEntry[] {
  const out = base.map((route) => structuredClone(route));
  for (const route of later) {
    const at = out.findIndex((existing) => existing.name === route.name);
    if (at === -1) out.push(structuredClone(route));
    else out[at] = structuredClone(route);
  }
  return out;
}
