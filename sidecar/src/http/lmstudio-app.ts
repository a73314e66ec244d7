// The LM Studio-compatible listener (local.lmstudioPort, 1234 by default): the OpenAI-compatible API that
// LM Studio serves, so tools configured for LM Studio reach both the local runtime's models and the priced
// cloud models through Tollgate. It is the engine's own /v1 gateway on a second port, with the same door
// (Host and Origin, identity), the same call meter and the same drain on shutdown: a call here is metered
// exactly like one on the proxy port. Only /v1/* is served.

import type { TargetHealth } from '../fallback/target-health.ts';
import type { FallbackObserver } from './gateway.ts';
import Fastify, { type FastifyInstance } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';
import { gatewayRoutes } from './gateway.ts';
import { listenerOptions } from './listener-options.ts';
import type { HttpRefusalOptions } from '../inbound/http-refusals.ts';
import { installIdentityHook, type IdentityGate } from '../inbound/identity/identity-hook.ts';
import { installRequestGuard } from '../inbound/request-guard.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { GatewayError } from '../translate/openai-error.ts';
import type { LocalModelCatalog } from '../local/local-models.ts';
import type { ResponseStore } from '../responses/response-store.ts';

export interface LmStudioAppOptions {
  store: ConfigStore;
  client: UpstreamClient;
  lifecycle: Lifecycle;
  refusals: HttpRefusalOptions;
  identity: IdentityGate;
  /** The engine's budgets: a call on this port is refused over its user's limit like one on the proxy port. */
  budgets: Pick<BudgetEnforcer, 'reserve'>;
  localModels: LocalModelCatalog;
  /** The engine's /v1/responses store, shared with the proxy port. */
  responses: ResponseStore;
  /** The engine's alias target health and fallback metrics, shared with the proxy port. */
  targetHealth: TargetHealth;
  fallbacks: FallbackObserver;
  env?: NodeJS.ProcessEnv;
}

export async function buildLmStudioApp(opts: LmStudioAppOptions): Promise<FastifyInstance> {
  const config = opts.store.get();
  const app = Fastify(listenerOptions(config.server, opts.refusals));
  installRequestGuard(app, opts.refusals.inbound);
  await installIdentityHook(app, config, opts.refusals.logger, opts.identity);
  app.register(gatewayRoutes, {
    store: opts.store,
    client: opts.client,
    meter: opts.refusals.meter,
    lifecycle: opts.lifecycle,
    budgets: opts.budgets,
    localModels: opts.localModels,
    responses: opts.responses,
    targetHealth: opts.targetHealth,
    fallbacks: opts.fallbacks,
    ...(opts.env ? { env: opts.env } : {}),
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send(new GatewayError(404, `Invalid URL (${request.method} ${request.url.split('?')[0]}): this port serves the OpenAI-compatible API under /v1`).toJSON());
  });
  return app;
}
