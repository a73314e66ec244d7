// Where a route's calls can go: its endpoints (ADR 0008), each with its own breaker, cool-down, calls in flight,
// base URL and, when it names its own key or region, its own credential provider. A route without `endpoints`
// has one implicit endpoint whose breaker is the route's, as before endpoints existed. The state of an endpoint
// (breaker, load) outlives config changes; what a config says about it (weight, base, provider) is resolved
// once per config and route, so a call reads it with one WeakMap and one Map lookup and allocates nothing.

import type { Logger } from 'pino';
import type { BuiltInCredentialId, CredentialDefinition } from '../../../contracts/credential-kinds.ts';
import { endpointCredentialDefinition, type EndpointStrategy, type RouteEndpoint } from '../../../contracts/route-endpoints.ts';
import { ROUTE_FORMATS, ROUTE_NAMES } from '../../../contracts/routes.ts';
import type { BreakerConfig, RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { builtInDefinition, createCredentialProvider, type CredentialProvider } from '../auth/credential-provider.ts';
import type { RouteModule } from '../routes/route-module.ts';
import { routeCatalog } from '../routes/route-catalog.ts';
import { routeBaseUrl, upstreamOf } from '../routes/upstream-base-url.ts';
import { CircuitBreaker, type BreakerState } from './breaker.ts';
import type { ChoosableEndpoint, EndpointLoad } from './endpoint-chooser.ts';

const DEFAULT_TIMEOUT_MS = 300_000;
/** The implicit endpoint of a route without `endpoints`, in the state maps. */
const IMPLICIT = '';

/** One endpoint's state across configs: its breaker and what the chooser reads. */
export class EndpointState implements EndpointLoad {
  readonly breaker: CircuitBreaker;
  outstanding = 0;
  current = 0;
  coolingUntil = 0;

  constructor(breaker: CircuitBreaker) {
    this.breaker = breaker;
  }
}

/** A Vertex AI endpoint's own project and location, put into the paths its calls take (vertex-ai.ts). */
export interface VertexPlace {
  readonly project: string | undefined;
  readonly location: string | undefined;
}

export interface ResolvedEndpoint extends ChoosableEndpoint {
  /** Undefined for the implicit endpoint of a route without `endpoints`. */
  readonly name: string | undefined;
  readonly load: EndpointState;
  readonly origin: string;
  /** The base URL's path, without a trailing slash ('' for none). */
  readonly prefix: string;
  readonly vertex: VertexPlace | undefined;
  /** The endpoint's own provider; undefined: the route's. */
  readonly credential: CredentialProvider | undefined;
  /** The route's upstream timeout (headers, and between body reads). */
  readonly timeoutMs: number;
}

export interface ResolvedRoute {
  /** The route has `endpoints`: cool-downs apply and a failed attempt may go to the next endpoint. */
  readonly declared: boolean;
  readonly strategy: EndpointStrategy;
  /** Upstream timeout for the headers and between body reads; with endpoints, also the deadline of every attempt in all. */
  readonly timeoutMs: number;
  readonly endpoints: readonly ResolvedEndpoint[];
}

/** One endpoint's view in GET /_local/api/health. */
export interface EndpointHealth {
  breaker: BreakerState;
  weight: number;
  outstanding: number;
  /** Milliseconds left of a cool-down after a 429; 0 when it is not cooling down. */
  coolingDownMs: number;
}

export class EndpointPool {
  readonly #logger: Logger;
  readonly #env: NodeJS.ProcessEnv;
  #breakerConfig: BreakerConfig;
  /** route → endpoint name ('' for the implicit one) → state. */
  readonly #states = new Map<string, Map<string, EndpointState>>();
  /** Endpoints' own providers by `route/endpoint`, with the key of what they were built from. */
  readonly #providers = new Map<string, { key: string; provider: CredentialProvider }>();
  readonly #resolved = new WeakMap<RuntimeConfig, Map<string, ResolvedRoute>>();
  /** The last synced config's routes with endpoints, for the health view and the metrics. */
  #declared = new Map<string, readonly ResolvedEndpoint[]>();

  constructor(opts: { breaker: BreakerConfig; logger: Logger; env: NodeJS.ProcessEnv }) {
    this.#breakerConfig = opts.breaker;
    this.#logger = opts.logger;
    this.#env = opts.env;
    for (const route of ROUTE_NAMES) this.#state(route, IMPLICIT);
  }

  resolve(config: RuntimeConfig, route: RouteModule): ResolvedRoute {
    let perConfig = this.#resolved.get(config);
    if (perConfig === undefined) this.#resolved.set(config, (perConfig = new Map<string, ResolvedRoute>()));
    let resolved = perConfig.get(route.name);
    if (resolved === undefined) perConfig.set(route.name, (resolved = this.#resolve(config, route)));
    return resolved;
  }

  /**
   * Follows a new config: every route gets its states, those of removed routes and endpoints are dropped, and
   * the providers of endpoints that are gone or whose credential changed are closed.
   */
  sync(config: RuntimeConfig): void {
    const kept = new Map<string, Set<string>>();
    const declared = new Map<string, readonly ResolvedEndpoint[]>();
    for (const route of routeCatalog(config).all()) {
      const resolved = this.resolve(config, route);
      kept.set(route.name, new Set(resolved.endpoints.map((endpoint) => endpoint.name ?? IMPLICIT)));
      if (resolved.declared) declared.set(route.name, resolved.endpoints);
    }
    for (const [route, states] of this.#states) {
      const names = kept.get(route);
      if (names === undefined) this.#states.delete(route);
      else for (const name of states.keys()) if (!names.has(name)) states.delete(name);
    }
    const inUse = new Set([...declared.values()].flat().flatMap((endpoint) => (endpoint.credential === undefined ? [] : [endpoint.credential])));
    for (const [key, held] of this.#providers) {
      if (!inUse.has(held.provider)) {
        held.provider.close();
        this.#providers.delete(key);
      }
    }
    this.#declared = declared;
  }

  updateBreakerConfig(config: BreakerConfig): void {
    this.#breakerConfig = config;
    for (const states of this.#states.values()) for (const state of states.values()) state.breaker.updateConfig(config);
  }

  /** Each route's breaker; a route with endpoints is open when every endpoint's is, closed when any is. */
  breakerStates(): Record<string, BreakerState> {
    const out: Record<string, BreakerState> = {};
    for (const [route, states] of this.#states) {
      const implicit = states.get(IMPLICIT);
      if (implicit !== undefined) {
        out[route] = implicit.breaker.state();
        continue;
      }
      const each = [...states.values()].map((state) => state.breaker.state());
      if (each.length > 0) out[route] = each.includes('closed') ? 'closed' : each.includes('half-open') ? 'half-open' : 'open';
    }
    return out;
  }

  /** Whether calls to the route are refused now: its breaker open, or every endpoint's open or cooling down. */
  refusing(route: string, now: number): boolean {
    const states = this.#states.get(route);
    if (states === undefined) return false;
    const implicit = states.get(IMPLICIT);
    if (implicit !== undefined) return implicit.breaker.state() === 'open';
    for (const state of states.values()) if (state.breaker.state() !== 'open' && state.coolingUntil <= now) return false;
    return true;
  }

  /** Every endpoint of the routes that have them, by route and name; undefined when no route has any. */
  endpointHealth(now: number): Record<string, Record<string, EndpointHealth>> | undefined {
    if (this.#declared.size === 0) return undefined;
    const out: Record<string, Record<string, EndpointHealth>> = {};
    for (const [route, endpoints] of this.#declared) {
      out[route] = {};
      for (const { name, weight, load } of endpoints) {
        out[route][name!] = { breaker: load.breaker.state(), weight, outstanding: load.outstanding, coolingDownMs: Math.max(0, load.coolingUntil - now) };
      }
    }
    return out;
  }

  endpointBreakers(): Record<string, Record<string, BreakerState>> {
    const out: Record<string, Record<string, BreakerState>> = {};
    for (const [route, endpoints] of this.#declared) out[route] = Object.fromEntries(endpoints.map(({ name, load }) => [name!, load.breaker.state()]));
    return out;
  }

  credentialProblems(): string[] {
    const problems: string[] = [];
    for (const { provider } of this.#providers.values()) {
      const problem = provider.problem();
      if (problem) problems.push(problem);
    }
    return problems;
  }

  close(): void {
    for (const held of this.#providers.values()) held.provider.close();
    this.#providers.clear();
  }

  #state(route: string, endpoint: string): EndpointState {
    let states = this.#states.get(route);
    if (states === undefined) this.#states.set(route, (states = new Map<string, EndpointState>()));
    let state = states.get(endpoint);
    if (state === undefined) {
      // `circuit breaker tripped` names the route as `upstream` and, for an endpoint, the endpoint too.
      const logger = endpoint === IMPLICIT ? this.#logger : this.#logger.child({ endpoint });
      states.set(endpoint, (state = new EndpointState(new CircuitBreaker(route, this.#breakerConfig, logger))));
    }
    return state;
  }

  #resolve(config: RuntimeConfig, route: RouteModule): ResolvedRoute {
    const upstream = upstreamOf(route, config);
    const timeoutMs = upstream?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const strategy = upstream?.strategy ?? 'weighted';
    if (upstream?.endpoints === undefined) {
      const { origin, prefix } = baseOf(routeBaseUrl(route, config));
      const only: ResolvedEndpoint = { name: undefined, weight: 1, load: this.#state(route.name, IMPLICIT), origin, prefix, vertex: undefined, credential: undefined, timeoutMs };
      return { declared: false, strategy, timeoutMs, endpoints: [only] };
    }
    const endpoints = upstream.endpoints.map((endpoint) => this.#resolveEndpoint(config, route, { ...upstream, timeoutMs }, endpoint));
    return { declared: true, strategy, timeoutMs, endpoints };
  }

  #resolveEndpoint(config: RuntimeConfig, route: RouteModule, upstream: UpstreamConfig, endpoint: RouteEndpoint): ResolvedEndpoint {
    const { name, weight, credential: _own, ...settings } = endpoint;
    const merged: UpstreamConfig = { ...upstream, ...settings };
    const { origin, prefix } = baseOf(routeBaseUrl(route, config, process.env, merged));
    const vertex =
      ROUTE_FORMATS[route.spec.format].upstream === 'vertex' && (endpoint.project !== undefined || endpoint.location !== undefined)
        ? { project: endpoint.project, location: endpoint.location }
        : undefined;
    const credential = this.#ownCredential(config, route, endpoint, merged);
    return { name, weight: weight ?? 1, load: this.#state(route.name, name), origin, prefix, vertex, credential, timeoutMs: upstream.timeoutMs! };
  }

  /**
   * A provider of the endpoint's own, when it names its own key, or (AWS) its own region or base URL, which the
   * signature covers; else undefined, and the endpoint uses its route's provider.
   */
  #ownCredential(config: RuntimeConfig, route: RouteModule, endpoint: RouteEndpoint, merged: UpstreamConfig): CredentialProvider | undefined {
    const routeDefinition: CredentialDefinition = route.configured ? route.credential : builtInDefinition(route.credentialId as BuiltInCredentialId, config.credentials);
    const signsPlace = routeDefinition.kind === 'aws-sigv4' && (endpoint.region !== undefined || endpoint.baseUrl !== undefined);
    if (endpoint.credential === undefined && !signsPlace) return undefined;
    const definition = endpointCredentialDefinition(routeDefinition, endpoint.credential);
    const id = `${route.name}/${endpoint.name}`;
    const key = JSON.stringify([definition, merged.baseUrl, merged.region, merged.project]);
    const held = this.#providers.get(id);
    if (held?.key === key) return held.provider;
    held?.provider.close();
    const provider = createCredentialProvider(definition, {
      id: `route:${id}`,
      label: `credential of endpoint ${endpoint.name} of route ${route.name}`,
      fileSetting: `the file of endpoint ${endpoint.name}'s credential (route ${route.name})`,
      upstream: () => merged,
      regionSetting: `the region of endpoint ${endpoint.name} of route ${route.name}`,
      ...(merged.project !== undefined ? { projectId: merged.project } : {}),
      logger: this.#logger.child({ component: 'credentials', route: route.name, endpoint: endpoint.name }),
      env: this.#env,
    });
    this.#providers.set(id, { key, provider });
    return provider;
  }
}

function baseOf(baseUrl: string): { origin: string; prefix: string } {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    // A base URL the validator let through but the URL parser refuses fails each call that uses it (its URL is
    // parsed again then, and refused with the reason), never the config that names it.
    return { origin: baseUrl, prefix: '' };
  }
  return { origin: url.origin, prefix: url.pathname === '/' ? '' : url.pathname.replace(/\/+$/, '') };
}
