// /_local/api: the management API of the local proxy (and of every engine, for debugging): the live
// runtime config and recent spans.

import { MODELS_SCHEMA } from '../../../contracts/runtime-config-schema.ts';
import type { FastifyPluginAsync } from 'fastify';
import type { CredentialDefinition } from '../../../contracts/credential-kinds.ts';
import type { DeclaredCredentials } from '../../../contracts/route-credential-schema.ts';
import { isRouteName, ROUTES } from '../../../contracts/routes.ts';
import { builtInDefinition } from '../auth/credential-provider.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { parseRuntimeConfigPatch, type RuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import type { ConfigStore, ConfigSnapshot } from '../config/config-store.ts';
import { routeCatalog } from '../routes/route-catalog.ts';
import { checkAliasRoutes } from '../fallback/configured-aliases.ts';
import { routeBaseUrl } from '../routes/upstream-base-url.ts';
import { parseJsonWithUniqueKeys } from '../config/unique-key-json.ts';
import { JSON_MEDIA_TYPE, notJsonMessage } from '../inbound/json-content-type.ts';
import { spanToJson } from '../spans/span-json.ts';
import type { SpanStore } from '../spans/span-store.ts';
import { parseSpendQuery, SPEND_PARAMETERS, SpendQueryError } from '../spans/spend.ts';
import { settlesWithin, type SpanWriter } from '../spans/span-writer.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { budgetRoutes } from './budgets.ts';
import { type TrailSource, trailRoutes } from './trail.ts';

export interface ManagementOptions {
  store: ConfigStore;
  spans: SpanStore;
  writer: SpanWriter;
  /** /_local/api/budgets; absent: no budget endpoints. */
  budgets?: BudgetEnforcer;
  /** /_local/api/trail/<trace-id>; absent: no trail endpoint. */
  trail?: TrailSource;
  /**
   * Who owns this engine's routes, upstreams and budget policies: its own config (local proxy, server) or the
   * operator (a sidecar, whose app can reach this API and must not re-point its credentials).
   */
  configOwner?: 'config' | 'operator';
}

/** Configured routes in all layers together: each is bound to a format and a credential provider per config. */
export const MAX_CONFIGURED_ROUTES = 64;
/** Model aliases in all layers together, as one layer may hold (MODELS_SCHEMA): they label metrics and health. */
const MAX_MODEL_ALIASES = MODELS_SCHEMA.maxProperties!;

/**
 * Sections this API may change. Server and storage settings need a restart. Credentials are left out on
 * purpose: the API has no authentication, and a credential file path set here would make the proxy send any
 * local file it can read as a key (ADR 1003). Credential files come from the config file and the operator.
 */
const API_SECTIONS = ['pricing', 'cache', 'upstreams', 'routes', 'breaker', 'gateway', 'budgets', 'models'] as const;

const TRACES_MAX = 200;
/**
 * How long GET /_local/api/traces waits for buffered spans to be written before it answers with what is
 * stored. A healthy store writes in milliseconds; a locked one makes each batch wait out SQLite's busy
 * timeout (and a retry), which the caller should not wait for (ADR 1002).
 */
export const TRACES_FLUSH_WAIT_MS = 500;

function configView(snapshot: ConfigSnapshot) {
  const { config } = snapshot;
  return {
    revision: snapshot.revision,
    // every route the engine serves, built-in and configured: where it goes and how it authenticates (never a key)
    routes: [...routeCatalog(config).all()].map((route) => ({
      name: route.name,
      format: route.spec.format,
      provider: route.provider,
      baseUrl: routeBaseUrl(route, config),
      credential: route.credential.kind,
      configured: route.configured,
    })),
    config: {
      ...config,
      // effective prices: built-in defaults merged with every override
      pricing: { models: snapshot.prices.models(), overrides: config.pricing.models },
    },
  };
}

export const managementRoutes: FastifyPluginAsync<ManagementOptions> = async (app, opts) => {
  // Body and schema errors (malformed JSON, wrong content type) in the same shape as every other refusal.
  app.setErrorHandler((error: { statusCode?: number; message: string }, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status === 415) {
      return reply.code(415).send({ error: { code: 'unsupported_media_type', message: notJsonMessage(request.headers['content-type']) } });
    }
    const code = status === 413 ? 'body_too_large' : status < 500 ? 'invalid_request' : 'internal_error';
    return reply.code(status).send({ error: { code, message: status < 500 ? error.message : 'internal error' } });
  });

  // JSON only (no text/plain or form bodies a web page could send blind), and a key said twice is refused
  // rather than the second silently winning.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(JSON_MEDIA_TYPE, { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonWithUniqueKeys(body as string));
    } catch (error) {
      done(Object.assign(error as Error, { statusCode: 400 }), undefined);
    }
  });

  if (opts.budgets) await app.register(budgetRoutes, { budgets: opts.budgets });
  if (opts.trail) await app.register(trailRoutes, { trail: opts.trail });

  app.get('/_local/api/config', async () => configView(opts.store.current()));

  // The body is checked here rather than by a `{ type: 'object' }` JSON schema: that one schema was all that
  // made fastify load ajv, about 2 MB of heap in every sidecar (ADR 0003). The config parser checks the rest.
  app.post('/_local/api/config', async (request, reply) => {
    const body = request.body;
    if (!isRecord(body)) return reply.code(400).send({ error: { code: 'invalid_request', message: 'body must be a JSON object' } });
    let patch;
    try {
      patch = apiPatch(body, opts);
    } catch (error) {
      if (error instanceof ConfigError) {
        return reply.code(400).send({ error: { code: 'invalid_config', message: error.message } });
      }
      throw error;
    }
    return configView(opts.store.mergeIntoLayer('api', patch));
  });

  app.get<{ Querystring: { limit?: string } }>('/_local/api/traces', async (request, reply) => {
    const raw = request.query.limit;
    let limit = 50;
    if (raw !== undefined) {
      if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > TRACES_MAX) {
        return reply.code(400).send({
          error: { code: 'invalid_request', message: `limit must be an integer from 1 to ${TRACES_MAX} (got ${JSON.stringify(raw)})` },
        });
      }
      limit = Number(raw);
    }
    // Spans still waiting in the writer's buffer are not visible yet; write them first so a caller sees its call,
    // but only for so long: `pending` says how many were recorded and are not stored yet.
    await settlesWithin(opts.writer.flush(), TRACES_FLUSH_WAIT_MS);
    let stored;
    try {
      stored = await opts.spans.recent(limit);
    } catch (error) {
      return reply.code(503).send({ error: { code: 'span_store_unavailable', message: `cannot read spans: ${(error as Error).message}` } });
    }
    const spans = stored.map(spanToJson);
    return { spans, count: spans.length, pending: opts.writer.stats().buffered };
  });

  // Spend per user, model, project or provider over a window, computed by the store (docs/span-stores.md).
  app.get<{ Querystring: Record<string, string | string[]> }>('/_local/api/spend', async (request, reply) => {
    let query;
    try {
      const params: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.query)) {
        if (!(SPEND_PARAMETERS as readonly string[]).includes(name)) {
          throw new SpendQueryError(name, `is not a known parameter (expected one of: ${SPEND_PARAMETERS.join(', ')})`);
        }
        if (typeof value !== 'string') throw new SpendQueryError(name, 'must be given once');
        params[name] = value;
      }
      query = parseSpendQuery(params);
    } catch (error) {
      if (error instanceof SpendQueryError) return reply.code(400).send({ error: { code: 'invalid_request', message: error.message } });
      throw error;
    }
    await settlesWithin(opts.writer.flush(), TRACES_FLUSH_WAIT_MS);
    try {
      const report = await opts.spans.spend(query);
      return { ...report, pending: opts.writer.stats().buffered };
    } catch (error) {
      return reply.code(503).send({ error: { code: 'span_store_unavailable', message: `cannot compute spend: ${(error as Error).message}` } });
    }
  });
};

/**
 * A body of POST /_local/api/config as the change it makes, checked whole against the config it would make:
 * ConfigError naming the field when any of it may not be made through this API.
 */
function apiPatch(body: Record<string, unknown>, opts: ManagementOptions): RuntimeConfigPatch {
  if (Object.hasOwn(body, 'credentials')) {
    throw new ConfigError('credentials', 'cannot be set through this API, which has no authentication: set credential files in the config file or the ProxyConfig');
  }
  if (Object.hasOwn(body, 'tracing')) {
    // ADR 1501: an OTLP endpoint set here would receive every call's span, user ids included.
    throw new ConfigError(
      'tracing',
      "cannot be set through this API, which has no authentication: whoever set it would receive every call's span; set it in the config file or the ProxyConfig",
    );
  }
  const routeProviders = opts.store.get().routes.map((route) => route.provider ?? route.name);
  const patch = parseRuntimeConfigPatch(body, API_SECTIONS, { routeProviders, declaredCredentials: declaredCredentials(opts.store) });
  for (const key of ['ledger', 'unreachable'] as const) {
    if (patch.budgets?.[key] !== undefined) throw new ConfigError(`budgets.${key}`, 'is read when the proxy starts: set it in the config file');
  }
  refuseUnmeteredAllowed(patch);
  if (opts.configOwner === 'operator') refuseOperatorOwned(patch);
  const preview = opts.store.preview('api', patch);
  checkAliasRoutes(preview);
  const routes = preview.routes.length;
  if (routes > MAX_CONFIGURED_ROUTES) {
    throw new ConfigError('routes', `would make ${routes} configured routes with those already set; at most ${MAX_CONFIGURED_ROUTES} in all`);
  }
  const aliases = Object.keys(preview.models).length;
  if (aliases > MAX_MODEL_ALIASES) {
    throw new ConfigError('models', `would make ${aliases} model aliases with those already set; at most ${MAX_MODEL_ALIASES} in all`);
  }
  return patch;
}

/**
 * The credentials a route added through this API may use by name (ADR 1007): a built-in route's, with the
 * credential files the config names, or a route's of the config file or the operator's snapshot, never one
 * added through this API itself.
 */
function declaredCredentials(store: ConfigStore): DeclaredCredentials {
  const config = store.get();
  const trusted = [...(store.layer('file')?.routes ?? []), ...(store.layer('operator')?.routes ?? [])];
  return (name: string): CredentialDefinition | undefined => {
    if (isRouteName(name)) return builtInDefinition(ROUTES[name].credential, config.credentials);
    return trusted.findLast((route) => route.name === name)?.credential;
  };
}

/**
 * Forwarding calls a route cannot meter hands out the proxy's credential unseen: only whoever runs the process
 * (the config file) or owns the ProxyConfig may allow it, never a caller of this API.
 */
function refuseUnmeteredAllowed(patch: RuntimeConfigPatch): void {
  const why = "cannot be set through this API, which has no authentication: unmetered calls spend the proxy's credential unseen; set it in the config file or the ProxyConfig";
  for (const [route, upstream] of Object.entries(patch.upstreams ?? {})) {
    if (upstream.unmetered !== undefined) throw new ConfigError(`upstreams.${route}.unmetered`, why);
  }
  patch.routes?.forEach((route, i) => {
    if (route.unmetered !== undefined) throw new ConfigError(`routes[${i}].unmetered`, why);
  });
}

/**
 * A sidecar's routes, upstreams and budgets are its ProxyConfig's and BudgetPolicies': the app beside it can
 * reach this API, and a base URL set here would send the sidecar's key or token wherever the app chose.
 */
function refuseOperatorOwned(patch: RuntimeConfigPatch): void {
  const owned = 'cannot be set in a sidecar: it comes from the ProxyConfig through the operator, and the app beside the sidecar must not choose where its credentials go';
  if (patch.routes) throw new ConfigError('routes', owned);
  for (const [route, upstream] of Object.entries(patch.upstreams ?? {})) {
    if (upstream.baseUrl !== undefined) throw new ConfigError(`upstreams.${route}.baseUrl`, owned);
    const redirected = upstream.endpoints?.findIndex((endpoint) => endpoint.baseUrl !== undefined) ?? -1;
    if (redirected !== -1) throw new ConfigError(`upstreams.${route}.endpoints[${redirected}].baseUrl`, owned);
  }
  if (patch.budgets) throw new ConfigError('budgets', 'cannot be set in a sidecar: its budgets come from BudgetPolicy resources through the operator');
  if (patch.models) throw new ConfigError('models', "cannot be set in a sidecar: its model aliases are its ProxyConfig's (spec.models)");
}
