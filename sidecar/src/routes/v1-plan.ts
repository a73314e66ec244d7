// Where a /v1 call goes: the price entry of its `model` names the provider, the gateway config (or the route
// table's default) names the route serving that provider, and that route's module plans the upstream request
// and says how its answer comes back. Pure: tested without I/O. The Responses and Messages APIs plan through
// the same routes (sidecar/src/gateway-apis/).

import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { defaultV1Route, PROVIDER_FACTS, PROVIDERS, v1Routes, type Provider } from '../../../contracts/routes.ts';
import { GATEWAY_ROUTE_SETTINGS, type GatewayConfig, type RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { GatewayError } from '../translate/openai-error.ts';
import { planOpenAiPassThrough } from './openai-chat-route.ts';
import type { ChatExtensions } from '../translate/chat-extensions.ts';
import type { ChatResponseTranslation } from '../translate/chat-responses.ts';
import type { RouteModule, V1Call, V1EmbeddingsPlan, V1PassThroughOperation, V1RoutePlan, V1Surface } from './route-module.ts';
import { routeCatalog } from './route-catalog.ts';
import { upstreamOf } from './upstream-base-url.ts';

export interface GatewayPlan extends V1RoutePlan {
  route: string;
  provider: string;
  stream: boolean;
  /**
   * How the answer is read: passed through (the upstream speaks the caller's API), translated from the
   * provider's format into the chat pivot, or a token count.
   */
  translation: 'passthrough' | ChatResponseTranslation['name'] | 'count_tokens' | 'embeddings' | 'images';
  /** What the caller's API asked for beyond chat (absent for chat callers). */
  extensions?: ChatExtensions | undefined;
}

/** Which provider's entry answers first when several have the same id (their facts' v1Rank); configured routes' providers come after. */
const BY_V1_RANK: readonly Provider[] = PROVIDERS.toSorted((a, b) => PROVIDER_FACTS[a].v1Rank - PROVIDER_FACTS[b].v1Rank);

/** The enabled price entry for a requested model id, on whichever provider has it (built-in ones first, then `others`). */
export function findModel(prices: PriceTable, model: string, others: Iterable<string> = []): { entry: PriceEntry; provider: string } | undefined {
  for (const provider of BY_V1_RANK) {
    const entry = prices.resolve(provider, model);
    if (entry) return { entry, provider };
  }
  for (const provider of others) {
    const entry = prices.resolve(provider, model);
    if (entry) return { entry, provider };
  }
  return undefined;
}

/** The route serving a built-in provider's models on /v1: the gateway setting's choice, else the table's default. */
export function routeFor(provider: string, gateway: GatewayConfig): string | undefined {
  const setting = (GATEWAY_ROUTE_SETTINGS as Partial<Record<string, keyof GatewayConfig>>)[provider];
  return setting ? gateway[setting] : defaultV1Route(provider as Provider);
}

/** What a /v1 call asks for: a chat completion, or an operation passed through to routes that serve it. */
export type GatewayOperation = 'chat' | V1PassThroughOperation;

/** A model the caller asked for, and the price entry and provider it resolved to. */
export interface GatewayTarget {
  entry: PriceEntry;
  provider: string;
  requested: string;
  /** A configured route the model was found on (its model list or `<route>/<model>`); else the provider's route. */
  route?: string;
}

/**
 * The route a target's /v1 calls take: its own; else its provider's route (the gateway's choice, else the table's
 * default) when that one serves the model, else the first of the provider's /v1 routes that does (ADR 0914:
 * Bedrock's models other than Claude go to gamma-cloudb whichever route serves Claude).
 */
export function v1RouteOf(target: GatewayTarget, config: RuntimeConfig): string | undefined {
  if (target.route !== undefined) return target.route;
  const catalog = routeCatalog(config);
  const chosen = routeFor(target.provider, config.gateway) ?? catalog.configuredForProvider(target.provider)?.name;
  const serves = (name: string): boolean => catalog.get(name)?.v1?.serves?.(target.entry) ?? true;
  if (chosen === undefined || serves(chosen) || !(PROVIDERS as readonly string[]).includes(target.provider)) return chosen;
  return v1Routes(target.provider as Provider).find(serves) ?? chosen;
}

/** The route serving a target on /v1, and that route's /v1 surface. Throws GatewayError when there is none. */
export function v1Surface(target: GatewayTarget, config: RuntimeConfig): { route: string; module: RouteModule; surface: V1Surface } {
  const name = v1RouteOf(target, config);
  const module = name === undefined ? undefined : routeCatalog(config).get(name);
  const surface = module?.v1;
  if (module === undefined || surface === undefined) {
    throw new GatewayError(400, `model ${target.requested} is served by provider ${target.provider}, which the /v1 gateway does not route`, {
      param: 'model',
      code: 'model_not_available',
    });
  }
  if (surface.serves?.(target.entry) === false) {
    throw new GatewayError(400, `model ${target.requested} is not served by route ${module.name}: send it to a route that serves it`, {
      param: 'model',
      code: 'model_not_available',
    });
  }
  return { route: module.name, module, surface };
}

/**
 * The route serving a target for an API only some routes have (`has`): its configured route; else the provider's
 * /v1 route when that one has it, else the first other route of the provider that has (Imagen is on `alpha`
 * whichever route serves Gemini's chat, Bedrock's image models on `gamma-cloudb`). Throws GatewayError naming
 * `path` when none has.
 */
export function v1RouteWith(target: GatewayTarget, config: RuntimeConfig, has: (surface: V1Surface) => boolean, path: string): { module: RouteModule; surface: V1Surface } {
  const catalog = routeCatalog(config);
  const builtIn = (PROVIDERS as readonly string[]).includes(target.provider) ? v1Routes(target.provider as Provider) : [];
  const names = target.route !== undefined ? [target.route] : [v1RouteOf(target, config), ...builtIn, catalog.configuredForProvider(target.provider)?.name];
  for (const name of names) {
    const module = name === undefined ? undefined : catalog.get(name);
    const surface = module?.v1;
    if (module !== undefined && surface !== undefined && surface.serves?.(target.entry) !== false && has(surface)) return { module, surface };
  }
  throw new GatewayError(400, `model ${target.requested} (provider ${target.provider}) is not served on ${path}: none of its provider's routes serves it there`, {
    param: 'model',
    code: 'model_not_available',
  });
}

/**
 * The route serving a target's embeddings (ADR 0903): its configured route; else the provider's /v1 route when
 * that one has embeddings, else the first other route of the provider that has (Gemini's embeddings are on
 * `alpha` whichever route serves its chat; Bedrock's on `gamma-cloudb`). Throws GatewayError when none has.
 */
export function embeddingsRoute(target: GatewayTarget, config: RuntimeConfig): { module: RouteModule; plan: (call: V1Call) => V1EmbeddingsPlan } {
  const catalog = routeCatalog(config);
  const builtIn = (PROVIDERS as readonly string[]).includes(target.provider) ? v1Routes(target.provider as Provider) : [];
  const names = target.route !== undefined ? [target.route] : [routeFor(target.provider, config.gateway), ...builtIn, catalog.configuredForProvider(target.provider)?.name];
  for (const name of names) {
    const module = name === undefined ? undefined : catalog.get(name);
    const surface = module?.v1;
    if (module !== undefined && surface?.embeddings !== undefined) return { module, plan: surface.embeddings.bind(surface) };
  }
  throw new GatewayError(400, `model ${target.requested} (provider ${target.provider}) is not served on /v1/embeddings: none of its provider's routes computes embeddings`, {
    param: 'model',
    code: 'model_not_available',
  });
}

/** Plans one call. Throws GatewayError (the request) or ProxyError (the configuration). */
export function planGatewayCall(
  request: Record<string, unknown>,
  target: GatewayTarget,
  config: RuntimeConfig,
  env: NodeJS.ProcessEnv,
  operation: GatewayOperation = 'chat',
): GatewayPlan {
  const { route, module, surface } = v1Surface(target, config);
  const call = { request, requested: target.requested, entry: target.entry, upstream: upstreamOf(module, config), env };
  let plan: V1RoutePlan;
  if (operation === 'chat') {
    plan = surface.plan(call);
  } else {
    const path = surface.passThrough?.[operation];
    if (path === undefined) {
      throw new GatewayError(
        400,
        `model ${target.requested} (provider ${target.provider}) is not served on /v1/${operation}: the gateway passes it through for the local runtime's and OpenAI-compatible routes' models only`,
        {
          param: 'model',
          code: 'model_not_available',
        },
      );
    }
    plan = planOpenAiPassThrough(call, surface.modelId(target.requested, target.entry), path);
  }
  return { ...plan, route, provider: target.provider, stream: request.stream === true, translation: plan.response?.name ?? 'passthrough' };
}
