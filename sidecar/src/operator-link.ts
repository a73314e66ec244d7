// In a pod the webhook names the operator (contracts/sidecar-env.ts); the proxy then takes its config from the
// operator's push and, since the operator keeps the budgets ledger, enforces the budgets it sends and reports
// spend back. The last good snapshot (kept on disk) applies before the engine starts, so a pod that restarts
// while the operator is unreachable serves with the config it last had.
//
// With budgets.store redis the webhook also names the chart's counter store: the rate limits are counted there
// (ADR 1311).
//
// The central server (server mode) follows a ProxyConfig the same way (ADR 0813), for config only: its budgets
// stay the ones its config file names (its ledger is shared by its replicas, and its users are identities,
// not pods).

import type { Logger } from 'pino';
import type { AliasHealthReportMessage, AuditReport, BypassEntryMessage } from '../../contracts/push-protocol.ts';
import { PROXY_ENV, SIDECAR_OPERATOR_CA_FILE, SIDECAR_STATE_DIR, SIDECAR_TOKEN_FILE } from '../../contracts/sidecar-env.ts';
import { AuditReporter } from './audit/audit-report.ts';
import type { AuditController } from './audit/audit-controller.ts';
import { ClusterBudgets } from './budgets/cluster-budgets.ts';
import type { RedisRateWindows } from './budgets/redis-rate-windows.ts';
import { DEFAULT_REDIS_KEY_PREFIX } from '../../contracts/budget-config.ts';
import type { ConfigStore } from './config/config-store.ts';
import type { PushClient } from './config/push-client.ts';
import { type AliasHealthSource, aliasHealthMessage } from './config/alias-health-message.ts';
import type { BypassReportQueue } from './provenance/bypass-reports.ts';

export class OperatorLink {
  /** The operator's budgets, for a sidecar; undefined in server mode. */
  readonly budgets: ClusterBudgets | undefined;
  #client: PushClient | undefined;
  #auditReporter: AuditReporter | undefined;
  #aliases: AliasHealthSource | undefined;
  #bypass: BypassReportQueue | undefined;

  private constructor(budgets: ClusterBudgets | undefined) {
    this.budgets = budgets;
  }

  /** Connects when the environment names an operator (null otherwise); resolves once the cached snapshot applies. */
  static async start(store: ConfigStore, logger: Logger, env: NodeJS.ProcessEnv): Promise<OperatorLink | null> {
    const address = env[PROXY_ENV.operatorAddress];
    if (!address) return null;
    const stateDir = env[PROXY_ENV.stateDir] ?? SIDECAR_STATE_DIR;
    const rateWindows = store.get().mode === 'server' ? undefined : await sharedRateWindows(env, logger);
    const link = new OperatorLink(store.get().mode === 'server' ? undefined : new ClusterBudgets({ stateDir, logger, ...(rateWindows ? { rateWindows } : {}) }));
    // Loaded only in a pod: the local proxy never speaks gRPC to an operator.
    const { startPushClient } = await import('./config/push-client.ts');
    const podName = env[PROXY_ENV.podName];
    const podNamespace = env[PROXY_ENV.podNamespace];
    link.#client = startPushClient({
      address,
      caFile: env[PROXY_ENV.operatorCaFile] ?? SIDECAR_OPERATOR_CA_FILE,
      tokenFile: env[PROXY_ENV.tokenFile] ?? SIDECAR_TOKEN_FILE,
      stateDir,
      store,
      logger,
      auditReport: () => link.#auditReport(),
      aliasHealthReport: () => link.#aliasHealthReport(),
      bypassReports: { take: (max) => link.#takeBypassEntries(max) },
      ...(link.budgets ? { budgets: link.budgets } : {}),
      ...(podName ? { podName } : {}),
      ...(podNamespace ? { podNamespace } : {}),
    });
    await link.#client.ready;
    return link;
  }

  /** From now on the operator hears how the engine's audit fan-out delivers. */
  reportAudit(audit: AuditController): void {
    this.#auditReporter = new AuditReporter(audit);
  }

  /** From now on the operator hears how the engine's model aliases are served (ADR 0724). */
  reportAliasHealth(engine: AliasHealthSource): void {
    this.#aliases = engine;
  }

  /** From now on the operator hears of provider calls around the sidecar, and records them as Events (ADR 1605). */
  reportBypass(queue: BypassReportQueue): void {
    this.#bypass = queue;
    queue.open();
  }

  async stop(): Promise<void> {
    await this.#client?.stop();
  }

  #takeBypassEntries(max: number): BypassEntryMessage[] {
    return this.#bypass?.take(max) ?? [];
  }

  #auditReport(): AuditReport | undefined {
    return this.#auditReporter?.report();
  }

  #aliasHealthReport(): AliasHealthReportMessage | undefined {
    return this.#aliases && aliasHealthMessage(this.#aliases);
  }
}

/**
 * budgets.store redis (ADR 1311): the webhook names the chart's store, and the sidecar counts its rate limits
 * there with the server and the other sidecars; the operator's ConfigMap ledger keeps the spend. Loaded only
 * then (ioredis).
 */
async function sharedRateWindows(env: NodeJS.ProcessEnv, logger: Logger): Promise<RedisRateWindows | undefined> {
  const url = env[PROXY_ENV.budgetRedisUrl];
  if (!url) return undefined;
  const { RedisRateWindows } = await import('./budgets/redis-rate-windows.ts');
  return new RedisRateWindows({
    url,
    keyPrefix: env[PROXY_ENV.budgetRedisKeyPrefix] || DEFAULT_REDIS_KEY_PREFIX,
    ...(env[PROXY_ENV.budgetRedisPassword] ? { passwordEnv: PROXY_ENV.budgetRedisPassword } : {}),
    logger,
  });
}
