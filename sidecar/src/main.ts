// `tollgate proxy`: the engine as a process. With no config file it is the developer's local proxy on
// port 8181 with SQLite in ./tollgate.db; in a pod the injected env connects it to the operator.

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { buildEngine } from './app.ts';
import { AuditReporter } from './audit/audit-report.ts';
import { ConfigError } from '../../contracts/config-error.ts';
import type { RuntimeConfigPatch } from '../../contracts/config-schema.ts';
import { ConfigStore } from './config/config-store.ts';
import { hostnameOf, isLoopbackHostname } from '../../contracts/allowed-hosts.ts';
import { startHealthListener } from './http/health.ts';
import { applyServerModeDefaults, checkServerAuth, parseEngineMode } from '../../contracts/server-auth-config.ts';
import { openSpanStore } from './spans/open-span-store.ts';
import { SpanStoreOpenError } from './spans/span-store.ts';
import type { LocalRuntime } from './local/local-runtime.ts';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { BudgetLedgerOpenError } from './budgets/open-budgets.ts';
import { type BudgetLink, ClusterBudgets } from './budgets/cluster-budgets.ts';

const HELP = `usage: tollgate proxy [--config FILE] [--port N] [--host ADDRESS] [--mode proxy|server] [--lmstudio-port N]

  --config FILE   YAML config file (see docs/configuration.md); default: built-in defaults
  --port N        listen port (default 8181, or server.port from the config, or TOLLGATE_PORT)
  --host ADDRESS  listen address (default 127.0.0.1, 0.0.0.0 in server mode, or server.host, or TOLLGATE_HOST)
  --mode MODE     server: the central server, every call needs an identity (server.auth, see
                  docs/central-server.md); proxy (default): the local proxy and the sidecar. Wins over mode
                  in the config file.
  --lmstudio-port N
                  port of the LM Studio-compatible listener (default 1234, or local.lmstudioPort, or
                  TOLLGATE_LMSTUDIO_PORT); 0: none. The local proxy only (docs/local-proxy.md).

environment: OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_APPLICATION_CREDENTIALS, AWS_* (credentials);
TOLLGATE_LOG_LEVEL; TOLLGATE_HEALTH_PORT (a health-only listener on all interfaces, for kubelet probes);
TOLLGATE_OPERATOR_ADDRESS, TOLLGATE_OPERATOR_CA_FILE, TOLLGATE_TOKEN_FILE,
TOLLGATE_STATE_DIR, TOLLGATE_HOST_IP, TOLLGATE_AUDIT_SOCKET (in a pod, set by the injection webhook)
`;

function parsePort(value: string, source: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 65535) throw new ConfigError(source, `must be a port number from 0 to 65535 (got ${JSON.stringify(value)})`);
  return Number(value);
}

export async function main(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        mode: { type: 'string' },
        'lmstudio-port': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
  } catch (error) {
    process.stderr.write(`tollgate proxy: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (args.values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const logger = pino({ level: process.env.TOLLGATE_LOG_LEVEL ?? 'info', base: { component: 'proxy' } });
  let filePatch: RuntimeConfigPatch = {};
  try {
    // The YAML parser is loaded only for a config file (a sidecar has none: the operator pushes its config).
    if (args.values.config) filePatch = (await import('./config/config-file.ts')).loadConfigFile(args.values.config);
    if (args.values.mode !== undefined) filePatch.mode = parseEngineMode(args.values.mode, '--mode');
    applyServerModeDefaults(filePatch);
    const port = args.values.port ?? process.env.TOLLGATE_PORT;
    const host = args.values.host ?? process.env.TOLLGATE_HOST;
    if (port !== undefined || host !== undefined) {
      filePatch.server = {
        ...filePatch.server,
        ...(port !== undefined ? { port: parsePort(port, args.values.port !== undefined ? '--port' : 'TOLLGATE_PORT') } : {}),
        ...(host !== undefined ? { host } : {}),
      };
    }
    const lmstudioPort = args.values['lmstudio-port'] ?? process.env.TOLLGATE_LMSTUDIO_PORT;
    if (lmstudioPort !== undefined) {
      filePatch.local = { ...filePatch.local, lmstudioPort: parsePort(lmstudioPort, args.values['lmstudio-port'] !== undefined ? '--lmstudio-port' : 'TOLLGATE_LMSTUDIO_PORT') };
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`tollgate proxy: ${error.message}\n`);
      return 2;
    }
    throw error;
  }

  applyPodDefaults(filePatch, process.env);
  applyLocalDefaults(filePatch, process.env);
  const store = new ConfigStore(filePatch);
  try {
    checkServerAuth(store.get().server.auth, store.get().mode);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`tollgate proxy: ${error.message}\n`);
    return 2;
  }
  // The last good snapshot from the operator (kept on disk) applies before the engine starts, so a pod that
  // restarts while the operator is unreachable serves with the config it last had.
  let auditReporter: AuditReporter | undefined;
  // In a pod the operator keeps the budgets ledger; this sidecar enforces what it sends and reports spend.
  const clusterBudgets = process.env.TOLLGATE_OPERATOR_ADDRESS ? new ClusterBudgets({ stateDir: process.env.TOLLGATE_STATE_DIR ?? '/var/run/tollgate', logger }) : undefined;
  const pushClient = await startOperatorLink(store, logger, () => auditReporter?.report(), clusterBudgets);
  let engine;
  try {
    const spans = await openSpanStore(store.get().storage, { logger, env: process.env, purpose: 'proxy' });
    engine = await buildEngine({ store, logger, spans, ...(clusterBudgets ? { budgets: clusterBudgets } : {}) });
  } catch (error) {
    if (error instanceof BudgetLedgerOpenError) {
      await pushClient?.stop();
      process.stderr.write(`tollgate proxy: ${error.message}\n`);
      return 2;
    }
    if (!(error instanceof SpanStoreOpenError) && !(error instanceof ConfigError)) throw error;
    // A span file that cannot be created is a bad setting (storage.path, or TOLLGATE_STATE_DIR in a pod).
    await pushClient?.stop();
    if (error instanceof ConfigError) {
      process.stderr.write(`tollgate proxy: ${error.message}\n`);
      return 2;
    }
    const reason = error.cause instanceof Error ? error.cause.message : String(error.cause);
    const setting = store.get().storage.kind === 'duckdb' ? 'storage.duckdb.path' : 'storage.path';
    process.stderr.write(`tollgate proxy: ${setting} ${error.path} cannot be opened: ${reason}\n`);
    return 2;
  }
  auditReporter = new AuditReporter(engine.audit);
  try {
    // Stored spend is in memory before the first call is served.
    await engine.budgets.ready;
  } catch (error) {
    await engine.shutdown(0);
    await pushClient?.stop();
    process.stderr.write(`tollgate proxy: ${new BudgetLedgerOpenError(store.get().budgets.ledger?.kind ?? 'sqlite', error).message}\n`);
    return 2;
  }
  const { host, port, auth } = store.get().server;
  await engine.app.listen({ host, port });
  if (!isLoopbackHostname(hostnameOf(host) ?? host) && !(auth.required && engine.identity.authenticator)) {
    logger.warn(
      {
        host,
        port,
        exposure: `the proxy has no inbound authentication: anyone who can reach ${host}:${port} spends its credentials and can change its prices and upstreams through /_local/api`,
        restrict:
          'listen on 127.0.0.1 (--host, server.host), firewall the port, put an authenticating proxy in front, or run in server mode with server.auth (docs/central-server.md); callers must use a name in server.allowedHosts',
      },
      'listening beyond loopback without inbound authentication',
    );
  }
  const lmstudio = engine.lmstudio && engine.local ? await listenLmStudio(engine.lmstudio, engine.local, host, logger) : null;
  const healthPort = process.env.TOLLGATE_HEALTH_PORT;
  const healthServer = healthPort
    ? await startHealthListener({
        check: engine.health,
        host: '0.0.0.0',
        port: parsePort(healthPort, 'TOLLGATE_HEALTH_PORT'),
        inbound: engine.inbound,
        metrics: engine.metrics.exposition,
      })
    : null;
  // Process start to serving with the config applied (in a pod: after the operator's snapshot, or the cached one).
  engine.metrics.setStartup(process.uptime());
  logger.info(
    {
      host,
      port,
      mode: store.get().mode,
      auth: engine.identity.authenticator ? { required: auth.required, strategies: engine.identity.authenticator.strategies, health: auth.health } : 'none',
      healthPort: healthServer ? Number(healthPort) : undefined,
      storage: store.get().storage.kind,
      local: engine.local ? { runtime: engine.local.baseUrl(), lmstudioPort: lmstudio ?? undefined } : 'off',
    },
    'tollgate proxy listening',
  );

  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down: draining in-flight calls and flushing spans');
      void (async () => {
        // A sidecar keeps its operator link while it drains: the spend of the last calls is reported (and
        // acknowledged, within a bound) before the pod's disk goes away with the pod.
        if (!clusterBudgets) await pushClient?.stop();
        // the health listener stays up while draining, so probes see 503 rather than a refused connection
        await engine.shutdown();
        await pushClient?.stop();
        healthServer?.close();
        const stats = engine.writer.stats();
        const metering = engine.meter.stats();
        logger.info(
          { written: stats.written, dropped: stats.dropped, metering_errors: metering.meteringErrors, implausible_usage: metering.implausibleUsage },
          'tollgate proxy stopped',
        );
        resolve(0);
      })();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/**
 * Listens on local.lmstudioPort, on the proxy's own address. A port already taken (LM Studio itself uses 1234)
 * costs only this listener: the proxy serves on, and the health view and the log line say why it is missing.
 * Returns the port it listens on, or null.
 */
async function listenLmStudio(app: FastifyInstance, local: LocalRuntime, host: string, logger: pino.Logger): Promise<number | null> {
  const port = local.lmstudio.port;
  try {
    await app.listen({ host, port });
    const bound = (app.server.address() as AddressInfo).port;
    local.lmstudio = { port: bound, listening: true, problem: null };
    return bound;
  } catch (error) {
    const problem = (error as NodeJS.ErrnoException).code === 'EADDRINUSE' ? `port ${port} is in use (LM Studio itself listens there)` : (error as Error).message;
    local.lmstudio = { port, listening: false, problem };
    logger.warn({ port, problem, fix: 'stop what listens there, or set local.lmstudioPort (--lmstudio-port; 0 turns it off)' }, 'LM Studio-compatible listener not started');
    return null;
  }
}

/**
 * The local runtime's features (its models on /v1, the LM Studio-compatible port, /_local/api/start) are the
 * developer's: off in a pod and in server mode unless the config file turns them on.
 */
export function applyLocalDefaults(patch: RuntimeConfigPatch, env: NodeJS.ProcessEnv): void {
  if (patch.local?.enabled !== undefined) return;
  if (env.TOLLGATE_STATE_DIR || env.TOLLGATE_OPERATOR_ADDRESS || patch.mode === 'server') patch.local = { ...patch.local, enabled: false };
}

/** Spans kept by a sidecar when nothing says otherwise: enough to answer "what did this pod just spend". */
export const POD_MAX_SPANS = 20_000;

/**
 * In a pod (TOLLGATE_STATE_DIR set by the webhook) the root filesystem is read-only and the state volume is
 * small: the span file goes to the state directory and keeps only the newest spans, unless the config file
 * says otherwise. The operator's snapshot, applied later, can still set both.
 */
export function applyPodDefaults(patch: RuntimeConfigPatch, env: NodeJS.ProcessEnv): void {
  const stateDir = env.TOLLGATE_STATE_DIR;
  if (!stateDir) return;
  patch.storage = {
    path: join(stateDir, 'spans.db'),
    maxSpans: POD_MAX_SPANS,
    ...patch.storage,
  };
}

/** In a pod the webhook sets TOLLGATE_OPERATOR_ADDRESS; the proxy then takes its config from the operator. */
async function startOperatorLink(
  store: ConfigStore,
  logger: pino.Logger,
  auditReport: () => import('../../contracts/push-protocol.ts').AuditReport | undefined,
  budgets: BudgetLink | undefined,
): Promise<{ stop(): Promise<void> } | null> {
  const address = process.env.TOLLGATE_OPERATOR_ADDRESS;
  if (!address) return null;
  const { startPushClient } = await import('./config/push-client.ts');
  const env = process.env;
  const client = startPushClient({
    address,
    caFile: env.TOLLGATE_OPERATOR_CA_FILE ?? '/var/run/tollgate/operator-ca/ca.crt',
    tokenFile: env.TOLLGATE_TOKEN_FILE ?? '/var/run/secrets/tollgate/token',
    stateDir: env.TOLLGATE_STATE_DIR ?? '/var/run/tollgate',
    store,
    logger,
    auditReport,
    ...(budgets ? { budgets } : {}),
    ...(env.TOLLGATE_POD_NAME ? { podName: env.TOLLGATE_POD_NAME } : {}),
    ...(env.TOLLGATE_POD_NAMESPACE ? { podNamespace: env.TOLLGATE_POD_NAMESPACE } : {}),
  });
  await client.ready;
  return client;
}
