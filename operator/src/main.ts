// `tollgate operator`: parse flags, connect to the API server, run until SIGTERM/SIGINT, then stop cleanly
// (leader work stops and the Lease is released, so a standby takes over at its next retry).

import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { startOperator } from './operator.ts';
import { OPERATOR_USAGE, parseOperatorArgs, UsageError } from './options.ts';

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

  const operator = startOperator({
    kubeConfig,
    logger,
    identity: settings.identity,
    leaseNamespace: settings.namespace,
    leaseName: settings.leaseName,
    grpcHost: settings.grpcHost,
    grpcPort: settings.grpcPort,
    tls: settings.tls,
    ...(settings.watchNamespace ? { watchNamespace: settings.watchNamespace } : {}),
    leaseDurationMs: settings.leaseDurationMs,
    renewDeadlineMs: settings.renewDeadlineMs,
    retryPeriodMs: settings.retryPeriodMs,
  });
  logger.info({ namespace: settings.namespace, lease: settings.leaseName, grpcPort: settings.grpcPort }, 'operator started');

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  logger.info({ signal }, 'shutting down');
  await operator.stop();
  logger.info('operator stopped');
  return 0;
}
