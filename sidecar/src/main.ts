// `tollgate proxy`: the engine as a process. With no config file it is the developer's local proxy on
// port 8181 with SQLite in ./tollgate.db; in a pod the injected env connects it to the operator.

import { parseArgs } from 'node:util';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../../contracts/config-error.ts';
import type { RuntimeConfigPatch } from '../../contracts/config-schema.ts';
import { hostnameOf, isLoopbackHostname } from '../../contracts/allowed-hosts.ts';
import { applyServerModeDefaults, checkServerAuth, parseEngineMode } from '../../contracts/server-auth-config.ts';
import { PROXY_ENV } from '../../contracts/sidecar-env.ts';
import { buildEngine, type Engine } from './app.ts';
import { ConfigStore } from './config/config-store.ts';
import { startHealthListener } from './http/health.ts';
import { openSpanStore } from './spans/open-span-store.ts';
import { SpanStoreOpenError } from './spans/span-store.ts';
import type { LocalRuntime } from './local/local-runtime.ts';
import { BudgetLedgerOpenError } from './budgets/open-budgets.ts';
import { OperatorLink } from './operator-link.ts';
import { applyLocalDefaults, applyPodDefaults } from './pod-defaults.ts';

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

type ProxyArgs = ReturnType<typeof parseProxyArgs>;

/** What refuses to start, as config errors do: the message goes to stderr and the process exits 2. */
class StartRefused extends Error {}

/** A proxy that serves: the engine, its operator link and health listener, to stop on a signal. */
interface RunningProxy {
  engine: Engine;
  link: OperatorLink | null;
  healthServer: { close(): void } | null;
}

export async function main(argv: string[]): Promise<number> {
  let args: ProxyArgs;
  try {
    args = parseProxyArgs(argv);
  } catch (error) {
    process.stderr.write(`tollgate proxy: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const env = process.env;
  const logger = pino({ level: env[PROXY_ENV.logLevel] ?? 'info', base: { component: 'proxy' } });
  let proxy: RunningProxy;
  try {
    proxy = await startProxy(args, env, logger);
  } catch (error) {
    if (!(error instanceof ConfigError) && !(error instanceof StartRefused)) throw error;
    process.stderr.write(`tollgate proxy: ${error.message}\n`);
    return 2;
  }
  return stopOnSignal(proxy, logger);
}

function parseProxyArgs(argv: string[]) {
  const options = {
    config: { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string' },
    mode: { type: 'string' },
    'lmstudio-port': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  return parseArgs({ args: argv, options, strict: true }).values;
}

function parsePort(value: string, source: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 65535) throw new ConfigError(source, `must be a port number from 0 to 65535 (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** The first config layer: the file, then the flags and their environment variables over it. Throws ConfigError. */
async function configPatch(args: ProxyArgs, env: NodeJS.ProcessEnv): Promise<RuntimeConfigPatch> {
  // The YAML parser is loaded only for a config file (a sidecar has none: the operator pushes its config).
  const patch: RuntimeConfigPatch = args.config ? (await import('./config/config-file.ts')).loadConfigFile(args.config) : {};
  if (args.mode !== undefined) patch.mode = parseEngineMode(args.mode, '--mode');
  applyServerModeDefaults(patch);
  const port = args.port ?? env[PROXY_ENV.port];
  const host = args.host ?? env[PROXY_ENV.host];
  if (port !== undefined || host !== undefined) {
    patch.server = {
      ...patch.server,
      ...(port !== undefined ? { port: parsePort(port, args.port !== undefined ? '--port' : PROXY_ENV.port) } : {}),
      ...(host !== undefined ? { host } : {}),
    };
  }
  const lmstudioPort = args['lmstudio-port'] ?? env[PROXY_ENV.lmstudioPort];
  if (lmstudioPort !== undefined) {
    patch.local = { ...patch.local, lmstudioPort: parsePort(lmstudioPort, args['lmstudio-port'] !== undefined ? '--lmstudio-port' : PROXY_ENV.lmstudioPort) };
  }
  applyPodDefaults(patch, env);
  applyLocalDefaults(patch, env);
  return patch;
}

async function startProxy(args: ProxyArgs, env: NodeJS.ProcessEnv, logger: pino.Logger): Promise<RunningProxy> {
  const store = new ConfigStore(await configPatch(args, env));
  checkServerAuth(store.get().server.auth, store.get().mode);
  const link = await OperatorLink.start(store, logger, env);
  const engine = await openEngine(store, logger, link);
  link?.reportAudit(engine.audit);
  link?.reportAliasHealth(engine);
  link?.reportBypass(engine.provenance.bypassReports);
  await budgetsLoaded(engine, store, link);
  const { host, port } = store.get().server;
  await engine.app.listen({ host, port });
  warnIfExposed(engine, store, logger);
  const lmstudio = engine.lmstudio && engine.local ? await listenLmStudio(engine.lmstudio, engine.local, host, logger) : null;
  const healthPort = env[PROXY_ENV.healthPort];
  const healthServer = healthPort
    ? await startHealthListener({
        check: engine.health,
        host: '0.0.0.0',
        port: parsePort(healthPort, PROXY_ENV.healthPort),
        inbound: engine.inbound,
        metrics: engine.metrics.exposition,
      })
    : null;
  // Process start to serving with the config applied (in a pod: after the operator's snapshot, or the cached one).
  engine.metrics.setStartup(process.uptime());
  logListening({ engine, store, logger, healthPort: healthServer ? Number(healthPort) : undefined, lmstudio });
  return { engine, link, healthServer };
}

/** The engine over its span store; a store or ledger that cannot be opened refuses the start, naming the setting. */
async function openEngine(store: ConfigStore, logger: pino.Logger, link: OperatorLink | null): Promise<Engine> {
  try {
    const spans = await openSpanStore(store.get().storage, { logger, env: process.env, purpose: 'proxy' });
    return await buildEngine({ store, logger, spans, ...(link?.budgets ? { budgets: link.budgets } : {}) });
  } catch (error) {
    if (!(error instanceof BudgetLedgerOpenError) && !(error instanceof SpanStoreOpenError) && !(error instanceof ConfigError)) throw error;
    await link?.stop();
    if (error instanceof BudgetLedgerOpenError) throw new StartRefused(error.message);
    if (error instanceof ConfigError) throw error;
    // A span file that cannot be created is a bad setting (storage.path, or the state directory in a pod).
    const reason = error.cause instanceof Error ? error.cause.message : String(error.cause);
    const setting = store.get().storage.kind === 'duckdb' ? 'storage.duckdb.path' : 'storage.path';
    throw new StartRefused(`${setting} ${error.path} cannot be opened: ${reason}`);
  }
}

/** Stored spend is in memory before the first call is served. */
async function budgetsLoaded(engine: Engine, store: ConfigStore, link: OperatorLink | null): Promise<void> {
  try {
    await engine.budgets.ready;
  } catch (error) {
    await engine.shutdown(0);
    await link?.stop();
    throw new StartRefused(new BudgetLedgerOpenError(store.get().budgets.ledger?.kind ?? 'sqlite', error).message);
  }
}

function warnIfExposed(engine: Engine, store: ConfigStore, logger: pino.Logger): void {
  const { host, port, auth } = store.get().server;
  if (isLoopbackHostname(hostnameOf(host) ?? host) || (auth.required && engine.identity.authenticator)) return;
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

function logListening(at: { engine: Engine; store: ConfigStore; logger: pino.Logger; healthPort: number | undefined; lmstudio: number | null }): void {
  const { engine, store } = at;
  const { host, port, auth } = store.get().server;
  at.logger.info(
    {
      host,
      port,
      mode: store.get().mode,
      auth: engine.identity.authenticator ? { required: auth.required, strategies: engine.identity.authenticator.strategies, health: auth.health } : 'none',
      healthPort: at.healthPort,
      storage: store.get().storage.kind,
      local: engine.local ? { runtime: engine.local.baseUrl(), lmstudioPort: at.lmstudio ?? undefined } : 'off',
    },
    'tollgate proxy listening',
  );
}

/** Serves until SIGTERM or SIGINT, then drains in-flight calls, flushes spans and resolves with the exit code. */
function stopOnSignal(proxy: RunningProxy, logger: pino.Logger): Promise<number> {
  const { engine, link, healthServer } = proxy;
  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down: draining in-flight calls and flushing spans');
      void (async () => {
        // A sidecar keeps its operator link while it drains: the spend of the last calls is reported (and
        // acknowledged, within a bound) before the pod's disk goes away with the pod. The health listener
        // stays up while draining, so probes see 503 rather than a refused connection.
        await engine.shutdown();
        await link?.stop();
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
