// Builds the engine's HTTP app without listening, so tests drive it with inject() or a real port alike.

import { isDeepStrictEqual } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { RuntimeConfig } from '../../contracts/runtime-config.ts';
import type { CredentialProvider } from './auth/credential-provider.ts';
import { createCredentialProviders } from './auth/credential-provider.ts';
import { AuditController } from './audit/audit-controller.ts';
import type { BudgetEnforcer } from './budgets/budget-enforcer.ts';
import { LedgerBudgets } from './budgets/ledger-budgets.ts';
import { openLedgerBudgets } from './budgets/open-budgets.ts';
import { type AuditPlacement, placementFromEnv } from './audit/audit-placement.ts';
import { followCredentialSettings } from './config/live-credentials.ts';
import type { ConfigStore } from './config/config-store.ts';
import { Lifecycle } from './lifecycle.ts';
import { CallMeter } from './metering/call-meter.ts';
import type { BuiltInCredentialId } from '../../contracts/credential-kinds.ts';
import { gatewayRoutes } from './http/gateway.ts';
import { ResponseStore } from './responses/response-store.ts';
import { LEAVING_READS } from './metering/leaving-reads.ts';
import { RATE_LIMITED } from './pipeline/rate-limit-answer.ts';
import { TargetHealth } from './fallback/target-health.ts';
import { configuredAliases } from './fallback/configured-aliases.ts';
import { listenerOptions } from './http/listener-options.ts';
import { inboundPolicy, installRequestGuard, type InboundPolicy } from './inbound/request-guard.ts';
import { healthCheck, healthRoutes, type Health } from './http/health.ts';
import { managementRoutes } from './http/management.ts';
import { proxyRoutes } from './http/proxy.ts';
import { openDeferredCharges } from './metering/deferred-store.ts';
import { RuntimeHealth, runtimeHealthRoutes } from './http/runtime-health.ts';
import { registerEngineHealth } from './http/engine-health.ts';
import { localRuntimeRoutes } from './http/local-runtime-routes.ts';
import { managementUiRoutes } from './http/management-ui.ts';
import { installIdentityHook, type IdentityGate } from './inbound/identity/identity-hook.ts';
import { LocalRuntime } from './local/local-runtime.ts';
import { buildLmStudioApp } from './http/lmstudio-app.ts';
import { openSpanStore, type OpenedSpanStore } from './spans/open-span-store.ts';
import type { SpanStore } from './spans/span-store.ts';
import { SpanWriter } from './spans/span-writer.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';
import { ProxyMetrics } from './metrics/proxy-metrics.ts';
import { metricsRoutes } from './http/metrics.ts';
import { OtlpFollower } from './spans/otlp-follower.ts';
import { ProvenanceController } from './provenance/provenance-controller.ts';

export interface Engine {
  app: FastifyInstance;
  /** Alias targets' cool-downs and which priority served each alias (fallback/target-health.ts). */
  targetHealth: TargetHealth;
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
  /** The calling process on spans and bypass detection, following the live config's provenance section. */
  provenance: ProvenanceController;
  /** The local model runtime (local.enabled); null in a pod and in server mode unless the config file turns it on. */
  local: LocalRuntime | null;
  /** The LM Studio-compatible listener's app (listen on local.lmstudioPort); null when local is off or the port is 0. */
  lmstudio: FastifyInstance | null;
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
  credentials?: Record<BuiltInCredentialId, CredentialProvider>;
  /** Budgets kept elsewhere (a sidecar's come from the operator); default: the config's ledger. */
  budgets?: BudgetEnforcer;
  /** The span store, opened by the caller (openSpanStore); else the configured one is opened here. */
  spans?: OpenedSpanStore;
}

const CUT_CALLS_GRACE_MS = 5_000;

/**
 * Async because what a configuration does not use is not loaded (ADR 0003): the span store's driver,
 * the inbound identity stack without server.auth, the audit fan-out without an audit section.
 */
export async function buildEngine(opts: EngineOptions): Promise<Engine> {
  const { store, logger } = opts;
  const env = opts.env ?? process.env;
  const config = store.get();
  const opened = opts.spans ?? (await openSpanStore(config.storage, { logger, env, purpose: 'proxy' }));
  const spans = opened.store;
  const writer = new SpanWriter(spans, { ...config.storage, ...(opened.retry ? { retry: opened.retry } : {}) }, logger);
  const credentials = opts.credentials ?? createCredentialProviders({ credentials: config.credentials, upstreams: () => store.get().upstreams, logger, env });
  const client = new UpstreamClient({ credentials, breaker: config.breaker, logger, env });
  const lifecycle = new Lifecycle();
  const budgets = opts.budgets ?? (await openLedgerBudgets(config.budgets, config.storage, logger));
  const placement = placementFromEnv(env);
  const { provenance, meter, metrics, otlp } = meterCalls({ store, writer, placement, logger, lifecycle, budgets, env });
  // One store for previous_response_id behind both listeners: a conversation started on one continues on the other.
  const responses = new ResponseStore();
  const followed = followConfig({ store, config, client, budgets, metrics, logger, env, credentialsGiven: opts.credentials !== undefined });
  const inbound = inboundPolicy(config.server, env);
  const refusals = { meter, store, inbound, logger };
  const app = Fastify(listenerOptions(config.server, refusals));
  provenance.install(app);

  installRequestGuard(app, inbound);
  dropConnectionHeaderOnHttp2(app);
  const identity = await installIdentityHook(app, config, logger);
  // A warehouse that is down is not this pod's fault: it shows in /_local/api/health, not in the probes (ADR 0402).
  const health = healthCheck({ lifecycle, writer, writeFailuresAreUnhealthy: !opened.remote });
  app.register(healthRoutes, { lifecycle, writer, check: health });
  app.register(managementRoutes, { store, spans, writer, budgets, trail: provenance, configOwner: opts.budgets ? 'operator' : 'config' });
  app.register(managementUiRoutes);
  const local = config.local.enabled ? new LocalRuntime({ store, logger, ...(opts.env ? { env: opts.env } : {}) }) : null;
  app.register(localRuntimeRoutes, { runtime: local, lifecycle });
  const audit = new AuditController(store, placement, logger, provenance.tap);
  // One alias target health per engine behind both listeners, like the breakers: a target cooling down is
  // cooling for every caller.
  const parts = {
    app,
    store,
    spans,
    writer,
    client,
    lifecycle,
    meter,
    inbound,
    identity,
    health,
    audit,
    provenance,
    budgets,
    metrics,
    otlp,
    local,
    targetHealth: new TargetHealth(),
  };
  const runtimeHealth = engineHealth(parts, opened, config.mode);
  app.register(runtimeHealthRoutes, { health: runtimeHealth, status: health });
  app.register(metricsRoutes, { exposition: metrics.exposition });
  watchEngineMetrics(parts, opened, followed, responses);
  // Batches and background responses taken here, remembered beside a SQLite span file across restarts (ADR 0913).
  app.register(proxyRoutes, { store, client, meter, lifecycle, budgets, env, unmetered: metrics, deferred: await openDeferredCharges(config.storage, logger) });
  app.register(gatewayRoutes, { store, client, meter, lifecycle, budgets, env, localModels: local?.models, responses, targetHealth: parts.targetHealth, fallbacks: metrics });
  const lmstudio =
    local !== null && config.local.lmstudioPort !== 0
      ? await buildLmStudioApp({
          store,
          client,
          lifecycle,
          refusals,
          identity,
          budgets,
          localModels: local.models,
          responses,
          targetHealth: parts.targetHealth,
          fallbacks: metrics,
          env,
        })
      : null;
  // A call on the LM Studio port is metered like one on the proxy port, so its caller is named the same way.
  if (lmstudio) provenance.install(lmstudio);

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: { code: 'not_found', message: `no route for ${request.method} ${request.url.split('?')[0]}` } });
  });

  const engine = { ...parts, runtimeHealth, lmstudio };
  return { ...engine, shutdown: shutdownOnce(engine, { logger, followed, drainTimeoutMs: config.server.drainTimeoutMs }) };
}

/**
 * The call meter and who hears of each call. Spans go through the provenance gate, which holds one briefly only
 * while its caller is being attributed (ADR 1600); the OTLP export sees a span when the gate lets it go, the
 * metrics at once.
 */
function meterCalls(at: {
  store: ConfigStore;
  writer: SpanWriter;
  placement: AuditPlacement;
  logger: Logger;
  lifecycle: Lifecycle;
  budgets: BudgetEnforcer;
  env: NodeJS.ProcessEnv;
}): { provenance: ProvenanceController; meter: CallMeter; metrics: ProxyMetrics; otlp: OtlpFollower } {
  const { store, writer, placement, logger, lifecycle, budgets, env } = at;
  const provenance = new ProvenanceController({ store, spans: writer, placement, logger });
  const meter = new CallMeter(provenance.gate, logger, lifecycle, budgets);
  const metrics = new ProxyMetrics();
  const otlp = new OtlpFollower({ store, env, logger });
  meter.observe(metrics);
  meter.observe(provenance.gate.delayed(otlp));
  return { provenance, meter, metrics, otlp };
}

/**
 * fastify asks to close the connection after a body it could not parse; on HTTP/2 that header is forbidden (and
 * would throw), and the stream's end already says it.
 */
function dropConnectionHeaderOnHttp2(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.httpVersionMajor === 2) reply.removeHeader('connection');
    done(null, payload);
  });
}

/** The parts of an engine built before its health view and listeners. */
type EngineParts = Omit<Engine, 'runtimeHealth' | 'lmstudio' | 'shutdown'>;

/** What follows the live config after start; `stop()` unsubscribes all of it. */
interface FollowedConfig {
  /** When the config last changed (the config metric). */
  appliedAtMs(): number;
  stop(): void;
}

/** The breaker settings, the credential files, the budget policies and the per-user metrics switch follow the store. */
function followConfig(deps: {
  store: ConfigStore;
  /** The config the engine was built with. */
  config: RuntimeConfig;
  client: UpstreamClient;
  budgets: BudgetEnforcer;
  metrics: ProxyMetrics;
  logger: Logger;
  env: NodeJS.ProcessEnv;
  credentialsGiven: boolean;
}): FollowedConfig {
  const { store, client, budgets, metrics } = deps;
  const unsubscribeBreaker = store.subscribe((snapshot) => client.updateBreakerConfig(snapshot.config.breaker));
  const unsubscribeCredentials = deps.credentialsGiven ? () => undefined : followCredentialSettings({ store, client, logger: deps.logger, env: deps.env });
  let appliedPolicies = deps.config.budgets.policies;
  const unsubscribeBudgets =
    budgets instanceof LedgerBudgets
      ? store.subscribe((snapshot) => {
          if (isDeepStrictEqual(snapshot.config.budgets.policies, appliedPolicies)) return;
          appliedPolicies = snapshot.config.budgets.policies;
          budgets.setConfig(snapshot.config.budgets);
        })
      : () => undefined;
  // The config's revision and when it last changed, and the per-user metrics switch, follow the store.
  let appliedAtMs = Date.now();
  metrics.setPerUser(deps.config.metrics.perUser);
  const unsubscribeMetrics = store.subscribe((snapshot) => {
    appliedAtMs = Date.now();
    metrics.setPerUser(snapshot.config.metrics.perUser);
  });
  return {
    appliedAtMs: () => appliedAtMs,
    stop: () => {
      unsubscribeBreaker();
      unsubscribeCredentials();
      unsubscribeMetrics();
      unsubscribeBudgets();
    },
  };
}

/** GET /_local/api/health: each part registers its section. */
function engineHealth(parts: EngineParts, opened: OpenedSpanStore, mode: RuntimeConfig['mode']): RuntimeHealth {
  const { lifecycle, client, local, audit, budgets, writer, identity } = parts;
  const runtimeHealth = new RuntimeHealth();
  registerEngineHealth(runtimeHealth, { lifecycle, client, local, mode });
  runtimeHealth.register('audit', () => audit.health());
  runtimeHealth.register('provenance', () => parts.provenance.health());
  runtimeHealth.register('budgets', () => budgets.health());
  // Each model alias's targets: healthy, cooling down after a 429, or behind an open breaker; and whether calls
  // are served below the alias's first priority, since when.
  runtimeHealth.register('aliases', () => parts.targetHealth.report(Object.fromEntries(configuredAliases(parts.store.get())), (route) => client.breakerOpen(route), Date.now()));
  runtimeHealth.register('spans', () => ({ kind: opened.kind, location: opened.location, ...writer.stats(), lastWriteError: writer.lastWriteError() }));
  const authenticator = identity.authenticator;
  if (authenticator) {
    runtimeHealth.register('auth', () => ({
      strategies: authenticator.strategies,
      refused: identity.failures.total,
      tokeninfoLookups: authenticator.accessTokens?.lookups ?? 0,
      tokeninfoThrottled: authenticator.accessTokens?.throttled ?? 0,
    }));
  }
  return runtimeHealth;
}

/** The metrics read at scrape time (ADR 1500). */
function watchEngineMetrics(parts: EngineParts, opened: OpenedSpanStore, followed: FollowedConfig, responses: ResponseStore): void {
  const { metrics, writer, lifecycle, client, store, meter, audit, otlp, identity, budgets } = parts;
  metrics.watch({
    spans: () => writer.stats(),
    spanStoreKind: () => opened.kind,
    inFlight: () => lifecycle.inFlight,
    breakers: () => client.breakerStates(),
    endpointBreakers: () => client.endpointBreakers(),
    config: () => ({ revision: store.current().revision, appliedAtMs: followed.appliedAtMs() }),
    metering: () => meter.stats(),
    audit: () => {
      const view = audit.health();
      return 'sinks' in view ? view.sinks : [];
    },
    otlp: () => otlp.stats(),
    provenanceBypass: () => parts.provenance.counters().bypass,
    provenanceTrailDrops: () => parts.provenance.trailDrops(),
    provenanceBypassReportsDropped: () => parts.provenance.counters().bypassReportsDropped,
    authFailures: () => identity.failures.total,
    tokeninfoThrottled: () => identity.authenticator?.accessTokens?.throttled ?? 0,
    budgets: (nearest) => budgets.standing(Date.now(), nearest),
    responses: () => responses.stats(),
    leavingReads: () => ({ inUse: LEAVING_READS.inUse, refused: LEAVING_READS.refused }),
    rateLimited: () => RATE_LIMITED,
  });
}

/** The engine's shutdown, run once however often it is asked for. */
function shutdownOnce(engine: Omit<Engine, 'shutdown'>, at: { logger: Logger; followed: FollowedConfig; drainTimeoutMs: number }): (drainTimeoutMs?: number) => Promise<void> {
  let shuttingDown: Promise<void> | null = null;
  return (drainTimeoutMs = at.drainTimeoutMs) => {
    shuttingDown ??= shutdownEngine(engine, { ...at, drainTimeoutMs });
    return shuttingDown;
  };
}

async function shutdownEngine(engine: Omit<Engine, 'shutdown'>, at: { logger: Logger; followed: FollowedConfig; drainTimeoutMs: number }): Promise<void> {
  const { app, lmstudio, lifecycle, audit } = engine;
  const { logger, drainTimeoutMs } = at;
  lifecycle.startDraining();
  // The audit fan-out stops reading and drains its sinks while the HTTP calls finish.
  const auditDrained = audit.shutdown();
  const closed = Promise.all([app.close(), lmstudio?.close()]); // stops accepting; waits for open requests
  const drained = await lifecycle.waitIdle(drainTimeoutMs);
  if (!drained) logger.warn({ in_flight: lifecycle.inFlight }, 'drain timeout: closing with calls still in flight');
  // Keep-alive connections that carried the drained calls are idle now; close() only closed those idle
  // when it was called, so close the rest instead of waiting out the keep-alive timeout.
  app.server.closeIdleConnections();
  lmstudio?.server.closeIdleConnections();
  if (!drained) {
    // Calls cut here are recorded as stopped by the shutdown, and the span writer stays open until each
    // has recorded its span (cutting ends them within a turn or two; the bound is for a call that hangs).
    lifecycle.startCutting(drainTimeoutMs);
    app.server.closeAllConnections();
    lmstudio?.server.closeAllConnections();
    if (!(await lifecycle.waitIdle(CUT_CALLS_GRACE_MS)))
      logger.warn({ in_flight: lifecycle.inFlight }, 'calls still running after their connections were closed; their spans may be lost');
  }
  await closed;
  at.followed.stop();
  // Spans held for attribution go on now, with what is known, before the writer closes.
  await engine.provenance.shutdown();
  await engine.writer.close();
  await engine.otlp.close();
  await engine.budgets.close();
  await engine.spans.close();
  await engine.client.close();
  await auditDrained;
  await engine.local?.close();
  engine.identity.failures.close();
}
