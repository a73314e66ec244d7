// Every route a config serves: the built-in ones and those added in its `routes`, each bound to its format's
// module, in one Map. Built once per config (the config store builds it with the snapshot); a call's route
// lookup is then one WeakMap and one Map lookup, and nothing is allocated per call.

import { CONFIGURED_ROUTE_NAME, ROUTE_FORMATS, ROUTE_NAMES, type WireFormat } from '../../../contracts/routes.ts';
import type { RouteEntry, RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { RouteModule } from './route-module.ts';
import { FORMAT_MODULES, ROUTE_MODULES } from './route-modules.ts';

export class RouteCatalog {
  readonly #routes = new Map<string, RouteModule>();
  /** Configured routes by provider name: the first route of a provider serves its priced models on /v1. */
  readonly #byProvider = new Map<string, RouteModule>();
  /** Model id → configured route, from the routes' model lists. */
  readonly #byModel = new Map<string, RouteModule>();
  /** The providers of configured routes, for price lookups after the built-in ones (made once, read per /v1 call). */
  readonly configuredProviders: readonly string[];

  constructor(entries: readonly RouteEntry[]) {
    for (const name of ROUTE_NAMES) this.#routes.set(name, ROUTE_MODULES[name]);
    for (const entry of entries) {
      const module = configuredRoute(entry);
      this.#routes.set(entry.name, module);
      if (!this.#byProvider.has(module.provider)) this.#byProvider.set(module.provider, module);
      for (const model of module.models) if (!this.#byModel.has(model)) this.#byModel.set(model, module);
    }
    this.configuredProviders = [...this.#byProvider.keys()];
  }

  get(name: string): RouteModule | undefined {
    return this.#routes.get(name);
  }

  names(): string[] {
    return [...this.#routes.keys()];
  }

  all(): IterableIterator<RouteModule> {
    return this.#routes.values();
  }

  /** Configured routes only, in config order. */
  configured(): RouteModule[] {
    return [...this.#routes.values()].filter((route) => route.configured);
  }

  /** The configured route whose provider is this one (built-in providers are routed by the gateway settings). */
  configuredForProvider(provider: string): RouteModule | undefined {
    return this.#byProvider.get(provider);
  }

  /** A /v1 model id a configured route serves: in its model list, or `<route>/<model>`. */
  configuredForModel(requested: string): { route: RouteModule; model: string } | undefined {
    if (this.configuredProviders.length === 0) return undefined;
    const slash = requested.indexOf('/');
    if (slash > 0) {
      const route = this.#routes.get(requested.slice(0, slash));
      if (route?.configured && route.v1 !== undefined) return { route, model: requested.slice(slash + 1) };
    }
    const listed = this.#byModel.get(requested);
    return listed === undefined ? undefined : { route: listed, model: requested };
  }
}

function configuredRoute(entry: RouteEntry): RouteModule {
  if (!CONFIGURED_ROUTE_NAME.test(entry.name)) throw new Error(`route name ${entry.name} is not valid`);
  const provider = entry.provider ?? entry.name;
  const upstream = {
    baseUrl: entry.baseUrl,
    ...(entry.project !== undefined ? { project: entry.project } : {}),
    ...(entry.location !== undefined ? { location: entry.location } : {}),
    ...(entry.region !== undefined ? { region: entry.region } : {}),
    ...(entry.timeoutMs !== undefined ? { timeoutMs: entry.timeoutMs } : {}),
    ...(entry.endpoints !== undefined ? { endpoints: entry.endpoints } : {}),
    ...(entry.strategy !== undefined ? { strategy: entry.strategy } : {}),
    ...(entry.unmetered !== undefined ? { unmetered: entry.unmetered } : {}),
  };
  const behaviour = FORMAT_MODULES[entry.format].behaviour(entry.name);
  return {
    name: entry.name,
    spec: {
      provider,
      genAiProvider: provider,
      format: entry.format,
      defaultBaseUrl: entry.baseUrl,
      description: `${ROUTE_FORMATS[entry.format].description}, at ${entry.baseUrl}`,
      ...(behaviour.v1 !== undefined ? { v1: { default: false, label: entry.name } } : {}),
      ...(entry.headers !== undefined ? { headers: entry.headers } : {}),
    },
    provider,
    credentialId: `route:${entry.name}`,
    credential: entry.credential,
    configured: true,
    models: entry.models ?? [],
    headers: Object.entries(entry.headers ?? {}),
    upstream,
    ...behaviour,
  };
}

const CATALOGS = new WeakMap<RuntimeConfig, RouteCatalog>();

/** The routes of a config; built on first use (the config store does it when it builds the snapshot). */
export function routeCatalog(config: RuntimeConfig): RouteCatalog {
  let catalog = CATALOGS.get(config);
  if (catalog === undefined) {
    catalog = new RouteCatalog(config.routes);
    CATALOGS.set(config, catalog);
  }
  return catalog;
}

/** The wire format of a route's answers (which usage extractor reads them). */
export function wireFormat(route: RouteModule): WireFormat {
  return ROUTE_FORMATS[route.spec.format].wire;
}
