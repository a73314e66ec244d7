// Builds the engine's HTTP app without listening, so tests drive it with inject() or a real port alike.

import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { CredentialProvider } from './auth/credential-provider.ts';
import { createCredentialProviders } from './auth/credential-provider.ts';
import { AuditController } from './audit/audit-controller.ts';
import type { BudgetEnforcer } from './budgets/budget-enforcer.ts';
import { LedgerBudgets } from './budgets/ledger-budgets.ts';
import { openLedgerBudgets } from './budgets/open-budgets.ts';
import { placementFromEnv } from './audit/audit-placement.ts';
import { followCredentialSettings } from './auth/live-credentials.ts';
import type { ConfigStore } from './config/config-store.ts';
import { Lifecycle } from './lifecycle.ts';
import { CallMeter } from './metering/call-meter.ts';
import type { CredentialKind } from '../../contracts/routes.ts';
import { gatewayRoutes } from './http/gateway.ts';
import { clientErrorHandler, frameworkErrorHandler } from './inbound/http-refusals.ts';
import { inboundPolicy, installRequestGuard, type InboundPolicy } from './inbound/request-guard.ts';
import { healthCheck, healthRoutes, type Health } from './http/health.ts';
import { createHttp1AndH2cServer } from './http/h2c-server.ts';
import { lazySchemaCompilers } from './http/lazy-schema-compilers.ts';
import { managementRoutes } from './http/management.ts';
import { proxyRoutes } from './http/proxy.ts';
import { RuntimeHealth, runtimeHealthRoutes } from './http/runtime-health.ts';
import { installIdentityHook, type IdentityGate } from './inbound/identity/identity-hook.ts';
import { openSpanStore, type OpenedSpanStore } from './spans/open-span-store.ts';
import type { SpanStore } from './spans/span-store.ts';
import { SpanWriter } from './spans/span-writer.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';
import { ProxyMetrics } from './metrics/proxy-metrics.ts';
import { metricsRoutes } from './http/metrics.ts';
import { OtlpFollower } from './spans/otlp-follower.ts';

export interface Engine {
  app: FastifyInstance;
  store: ConfigStore;
  spans: SpanStore;
  writer: SpanWriter;
  client: UpstreamClient;
  lifecycle: Lifecycle;
  meter: CallMeter;
  /** The Host and Origin rules every listener of this engine applies (the health-only listener too). */
  inbound: InboundPolicy;
  /** Inbound authentication (server.auth); its authenticator is null when no strategy is configured. */
  identity: IdentityGate;
  health: () => Health;
  /** GET /_local/api/health: parts of the engine register their sections here. */
  runtimeHealth: RuntimeHealth;
  /** The Tetragon audit fan-out, following the live config's audit section. */
  audit: AuditController;
  /** Prometheus metrics (GET /metrics here and on the health-only listener). */
  metrics: ProxyMetrics;
  /** OTLP span export, following the live config's tracing section and the OTEL_* variables. */
  otlp: OtlpFollower;
  /** Budgets enforced by this engine: its own ledger, or the operator's (a sidecar). */
  budgets: BudgetEnforcer;
  /** Stops accepting, drains in-flight calls (streams included, up to server.drainTimeoutMs), flushes spans, closes everything. */
  shutdown(drainTimeoutMs?: number): Promise<void>;
}

export interface EngineOptions {
  store: ConfigStore;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  /** Replace the credential providers (tests of the engine that are not about credentials). */
  credentials?: Record<CredentialKind, CredentialProvider>;
  /** Budgets kept elsewhere (a sidecar's come from the operator); default: the config's ledger. */
  budgets?: BudgetEnforcer;
  /** The span store, opened by the caller (openSpanStore); else the configured one is opened here. */
  spans?: OpenedSpanStore;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const HEADERS_TIMEOUT_MS = 10_000;
const CUT_CALLS_GRACE_MS = 5_000;
/** fastify's default, kept: an idle keep-alive connection closes after this. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/**
 * Async because what a configuration does not use is not loaded (ADR 0003): the span store's driver,
 * the inbound identity stack without server.auth, the audit fan-out without an audit section.
 */
export async function buildEngine(opts: EngineOptions): Promise<Engine> {
  const { store, logger } = opts;
  const config = store.get();
  const opened = opts.spans ?? (await openSpanStore(config.storage, { logger, env: opts.env ?? process.env, purpose: 'proxy' }));
  const spans = opened.store;
  const writer = new SpanWriter(spans, { ...config.storage, ...(opened.retry ? { retry: opened.retry } : {}) }, logger);
  const credentials =
    opts.credentials ?? createCredentialProviders({ credentials: config.credentials, upstreams: () => store.get().upstreams, logger, env: opts.env ?? process.env });
  const client = new UpstreamClient({ credentials, breaker: config.breaker, logger });
  const unsubscribeBreaker = store.subscribe((snapshot) => client.updateBreakerConfig(snapshot.config.breaker));
  const unsubscribeCredentials = opts.credentials ? () => undefined : followCredentialSettings({ store, client, logger, env: opts.env ?? process.env });
  const lifecycle = new Lifecycle();
  const budgets = opts.budgets ?? (await openLedgerBudgets(config.budgets, config.storage, logger));
  let appliedPolicies = config.budgets.policies;
  const unsubscribeBudgets =
    budgets instanceof LedgerBudgets
      ? store.subscribe((snapshot) => {
          if (isDeepStrictEqual(snapshot.config.budgets.policies, appliedPolicies)) return;
          appliedPolicies = snapshot.config.budgets.policies;
          budgets.setConfig(snapshot.config.budgets);
        })
      : () => undefined;
  const meter = new CallMeter(writer, logger, lifecycle, budgets);
  const metrics = new ProxyMetrics();
  meter.observe(metrics);
  const otlp = new OtlpFollower({ store, env: opts.env ?? process.env, logger });
  meter.observe(otlp);
  // The config's revision and when it last changed, and the per-user metrics switch, follow the store.
  let appliedAtMs = Date.now();
  metrics.setPerUser(config.metrics.perUser);
  const unsubscribeMetrics = store.subscribe((snapshot) => {
    appliedAtMs = Date.now();
    metrics.setPerUser(snapshot.config.metrics.perUser);
  });
  const inbound = inboundPolicy(config.server, opts.env ?? process.env);
  const refusals = { meter, store, inbound, logger };
  // Headers come in one go from any real client; a body gets server.requestTimeoutMs once the route reads it
  // (request-body.ts answers 408 with a span). Node's own request timeout is the backstop for routes that
  // leave the body to fastify, set past the routes' deadline so that theirs fires first (ADR 1002).
  const headersTimeout = Math.min(HEADERS_TIMEOUT_MS, config.server.requestTimeoutMs);

  const httpOptions = { headersTimeout, connectionsCheckingInterval: 1000 };
  const requestTimeout = headersTimeout + config.server.requestTimeoutMs + 2000;

  // typed as fastify's logger so the app's type (and every plugin's) names FastifyBaseLogger, not pino's
  const loggerInstance: FastifyBaseLogger = logger;
  const app = Fastify({
    // HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on the one port: the AWS SDK's default Bedrock client speaks the latter.
    serverFactory: (handler) => createHttp1AndH2cServer(handler, { http1: httpOptions, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, requestTimeout, idleTimeoutMs: headersTimeout }),
    loggerInstance,
    // every call gets one richer line from the call meter instead of fastify's request/response lines
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.server.bodyLimitBytes,
    http: httpOptions,
    requestTimeout,
    clientErrorHandler: clientErrorHandler(refusals, headersTimeout),
    frameworkErrors: frameworkErrorHandler(refusals),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    schemaController: { compilersFactory: lazySchemaCompilers },
  });

  installRequestGuard(app, inbound);
  // fastify asks to close the connection after a body it could not parse; on HTTP/2 that header is forbidden
  // (and would throw), and the stream's end already says it.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.httpVersionMajor === 2) reply.removeHeader('connection');
    done(null, payload);
  });
  const identity = await installIdentityHook(app, config, logger);
  // A warehouse that is down is not this pod's fault: it shows in /_local/api/health, not in the probes (ADR 0402).
  const health = healthCheck({ lifecycle, writer, writeFailuresAreUnhealthy: !opened.remote });
  app.register(healthRoutes, { lifecycle, writer, check: health });
  app.register(managementRoutes, { store, spans, writer, budgets, budgetPolicies: opts.budgets ? 'operator' : 'config' });
  const runtimeHealth = new RuntimeHealth();
  const audit = new AuditController(store, placementFromEnv(opts.env ?? process.env), logger);
  runtimeHealth.register('audit', () => audit.health());
  runtimeHealth.register('budgets', () => budgets.health());
  runtimeHealth.register('spans', () => ({ kind: opened.kind, location: opened.location, ...writer.stats(), lastWriteError: writer.lastWriteError() }));
  const authenticator = identity.authenticator;
  if (authenticator) {
    runtimeHealth.register('auth', () => ({ strategies: authenticator.strategies, refused: identity.failures.total, tokeninfoLookups: authenticator.accessTokens?.lookups ?? 0 }));
  }
  app.register(runtimeHealthRoutes, { health: runtimeHealth, status: health });
  app.register(metricsRoutes, { exposition: metrics.exposition });
  metrics.watch({
    spans: () => writer.stats(),
    spanStoreKind: () => opened.kind,
    inFlight: () => lifecycle.inFlight,
    breakers: () => client.breakerStates(),
    config: () => ({ revision: store.current().revision, appliedAtMs }),
    metering: () => meter.stats(),
    audit: () => {
      const view = audit.health();
      return 'sinks' in view ? view.sinks : [];
    },
    otlp: () => otlp.stats(),
    authFailures: () => identity.failures.total,
    budgets: () => budgets.list(Date.now()),
  });
  app.register(proxyRoutes, { store, client, meter, lifecycle, budgets, env: opts.env ?? process.env });
  app.register(gatewayRoutes, { store, client, meter, lifecycle, budgets, env: opts.env ?? process.env });

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: { code: 'not_found', message: `no route for ${request.method} ${request.url.split('?')[0]}` } });
  });

  let shuttingDown: Promise<void> | null = null;
  const shutdown = (drainTimeoutMs = config.server.drainTimeoutMs) => {
    shuttingDown ??= (async () => {
      lifecycle.startDraining();
      // The audit fan-out stops reading and drains its sinks while the HTTP calls finish.
      const auditDrained = audit.shutdown();
      const closed = app.close(); // stops accepting; waits for open requests
      const drained = await lifecycle.waitIdle(drainTimeoutMs);
      if (!drained) logger.warn({ in_flight: lifecycle.inFlight }, 'drain timeout: closing with calls still in flight');
      // Keep-alive connections that carried the drained calls are idle now; close() only closed those idle
      // when it was called, so close the rest instead of waiting out the keep-alive timeout.
      app.server.closeIdleConnections();
      if (!drained) {
        // Calls cut here are recorded as stopped by the shutdown, and the span writer stays open until each
        // has recorded its span (cutting ends them within a turn or two; the bound is for a call that hangs).
        lifecycle.startCutting(drainTimeoutMs);
        app.server.closeAllConnections();
        if (!(await lifecycle.waitIdle(CUT_CALLS_GRACE_MS)))
          logger.warn({ in_flight: lifecycle.inFlight }, 'calls still running after their connections were closed; their spans may be lost');
      }
      await closed;
      unsubscribeBreaker();
      unsubscribeCredentials();
      unsubscribeMetrics();
      unsubscribeBudgets();
      await writer.close();
      await otlp.close();
      await budgets.close();
      await spans.close();
      await client.close();
      await auditDrained;
      identity.failures.close();
    })();
    return shuttingDown;
  };

  return { app, store, spans, writer, client, lifecycle, meter, inbound, identity, health, runtimeHealth, audit, budgets, metrics, otlp, shutdown };
}
