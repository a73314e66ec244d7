// `tollgate operator`: parse flags, connect to the API server, run until SIGTERM/SIGINT, then stop cleanly
// (leader work stops and the Lease is released, so a standby takes over at its next retry).

import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { KubeApi } from '../../kube-client/api-client.ts';
import { deploymentOwner, type OwnerReference } from '../../kube-client/owner-reference.ts';
import { startHealthServer } from './health/health-server.ts';
import { OperatorMetrics } from './metrics/operator-metrics.ts';
import { startOperator } from './operator.ts';
import { OPERATOR_USAGE, parseOperatorArgs, UsageError } from './options.ts';

// Longer than any quiet spell of a working informer loop: the stale-watch limit (150 s) plus the longest
// restart backoff (30 s) plus a request timeout (30 s), with room to spare.
const INFORMER_STUCK_AFTER_MS = 5 * 60_000;

export async function main(argv: string[]): Promise<number> {
  let settings;
  try {
    settings = parseOperatorArgs(argv, process.env, hostname(), process.pid);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`tollgate operator: ${error.message}\n\n${OPERATOR_USAGE}`);
    return 2;
  }
  if (settings.help) {
    process.stdout.write(OPERATOR_USAGE);
    return 0;
  }
  const logger = pino({ level: settings.logLevel, base: { component: 'operator', identity: settings.identity } });
  const kubeConfig = new KubeConfig();
  if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
  else kubeConfig.loadFromCluster();

  let owner: OwnerReference | undefined;
  if (settings.ownerDeployment) {
    try {
      owner = await deploymentOwner(new KubeApi(kubeConfig), settings.namespace, settings.ownerDeployment);
    } catch (error) {
      logger.error({ err: error instanceof Error ? error.message : String(error) }, 'cannot read the owner Deployment');
      return 1;
    }
  }
  const metrics = new OperatorMetrics();
  const operator = startOperator({
    metrics,
    kubeConfig,
    logger,
    identity: settings.identity,
    leaseNamespace: settings.namespace,
    leaseName: settings.leaseName,
    grpcHost: settings.grpcHost,
    grpcPort: settings.grpcPort,
    tls: settings.tls,
    caConfigMap: settings.caConfigMap,
    ...(owner ? { owner } : {}),
    ...(settings.watchNamespace ? { watchNamespace: settings.watchNamespace } : {}),
    ...(settings.leaderEndpoint ? { leaderEndpoint: settings.leaderEndpoint } : {}),
    leaseDurationMs: settings.leaseDurationMs,
    renewDeadlineMs: settings.renewDeadlineMs,
    retryPeriodMs: settings.retryPeriodMs,
    aliasDegradedAfterMs: settings.aliasDegradedAfterMs,
    ...(settings.ledgerRedis ? { ledgerRedis: settings.ledgerRedis } : {}),
  });
  let health;
  try {
    health = await startHealthServer({
      host: settings.healthHost,
      port: settings.healthPort,
      informers: operator.informers,
      stuckAfterMs: INFORMER_STUCK_AFTER_MS,
      logger: logger.child({ component: 'health' }),
      podIp: settings.leaderEndpoint?.podIP,
      metrics: metrics.exposition,
    });
  } catch (error) {
    logger.error({ err: error instanceof Error ? error.message : String(error), healthPort: settings.healthPort }, 'cannot open the health port');
    await operator.stop();
    return 1;
  }
  logger.info({ namespace: settings.namespace, lease: settings.leaseName, grpcPort: settings.grpcPort, healthPort: health.port }, 'operator started');
  if (!settings.leaderEndpoint) logger.info("no pod IP (--pod-ip or POD_IP): the push Service's EndpointSlice is not managed by this replica");

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  logger.info({ signal }, 'shutting down');
  await operator.stop();
  await health.stop();
  logger.info('operator stopped');
  return 0;
}
