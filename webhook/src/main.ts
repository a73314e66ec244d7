// `tollgate webhook`: the sidecar injection webhook. Resolves with an exit code once shut down (SIGTERM or
// SIGINT), or 2 at once for a usage error.

import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { parseWebhookOptions, WEBHOOK_USAGE, WebhookOptionsError } from './webhook-options.ts';
import { startWebhook } from './webhook-server.ts';

export async function main(argv: string[]): Promise<number> {
  let options;
  try {
    options = parseWebhookOptions(argv, process.env);
  } catch (error) {
    if (!(error instanceof WebhookOptionsError)) throw error;
    process.stderr.write(`tollgate webhook: ${error.message}\n\n${WEBHOOK_USAGE}`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(WEBHOOK_USAGE);
    return 0;
  }
  const logger = pino({ level: options.logLevel, base: { component: 'webhook' } });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const server = await startWebhook(options, { kubeConfig, logger });

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await server.stop();
  return 0;
}
