import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../../kube-client/api-client.ts';
import { selfManagedCertificates } from './self-managed-certificates.ts';

let server: Server | undefined;
afterEach(() => server?.close());

/** An API server on its way down: every request answers 503 with a Status, as kube-apiserver does then. */
async function apiServerShuttingDown(): Promise<KubeApi> {
  server = createServer((_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'apiserver is shutting down', reason: 'ServiceUnavailable', code: 503 }));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return new KubeApi(kubeConfig);
}

describe('self-managed webhook certificates', () => {
  it('a pass that fails against the API server is the caller’s error only: nothing is left to end the process', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const certificates = selfManagedCertificates({
        api: await apiServerShuttingDown(),
        logger: pino({ level: 'silent' }),
        namespace: 'tollgate',
        secretName: 'tollgate-webhook-tls',
        webhookConfigurationName: 'tollgate',
        dnsNames: ['tollgate-webhook.tollgate.svc'],
        onServingCertificate: () => undefined,
      });
      await expect(certificates.reconcile()).rejects.toThrow('apiserver is shutting down');
      // A second pass queues behind the failed one and fails on its own, not with the first one's error.
      await expect(certificates.reconcile('serving')).rejects.toThrow('apiserver is shutting down');
      // Node emits 'unhandledRejection' for a promise left unhandled as soon as the microtask queue drains at the
      // end of the current turn of the event loop; the next turn (setImmediate) comes after that report, if any.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
