// Wires the webhook together: TLS (self-managed or files), the admission app, Events and, under failurePolicy
// Ignore, the missing-sidecar watcher. main.ts parses flags and calls this; cluster tests call it directly.

import type { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { KubeApi } from '../../kube-client/api-client.ts';
import { deploymentOwner } from '../../kube-client/owner-reference.ts';
import { cachedNamespaceLabels } from './admission/namespace-labels.ts';
import { cachedAuditLookup } from './admission/proxy-config-audit.ts';
import type { PodAdmissionDeps } from './admission/pod-admission.ts';
import { buildWebhookApp, reloadServingCertificate } from './app.ts';
import { clusterSupportsNativeSidecars } from './cluster-version.ts';
import { createPodEventQueue, type PodEventQueue } from './events/pod-event-queue.ts';
import { missingSidecarWatcher, type MissingSidecarWatcher } from './missing-sidecar-watcher.ts';
import { operatorCaFromConfigMap, operatorCaFromFile } from './operator-ca.ts';
import type { KeyPairPem } from '../../contracts/pki.ts';
import { certificateFiles, type CertificateFiles } from './tls/certificate-files.ts';
import { selfManagedCertificates, type SelfManagedCertificates } from './tls/self-managed-certificates.ts';
import type { WebhookOptions } from './webhook-options.ts';
import { WebhookMetrics } from './metrics/webhook-metrics.ts';

export interface WebhookRuntime {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Extra IP SANs for the self-managed certificate (tests serve on 127.0.0.1). */
  ipAddresses?: string[];
  certificateIntervalMs?: number;
  certificatePropagationMs?: number;
  /** Defaults to failurePolicy === 'Ignore'. */
  watchMissingSidecars?: boolean;
  /** Overrides cluster version discovery for native sidecars (tests). */
  nativeSidecarSupported?: boolean;
  /** The metrics to count into (default: a new registry served on /metrics). */
  metrics?: WebhookMetrics;
}

export interface WebhookServer {
  app: FastifyInstance;
  metrics: WebhookMetrics;
  port: number;
  events: PodEventQueue;
  certificates?: SelfManagedCertificates;
  stop(): Promise<void>;
}

/** The certificate source: self-managed (a Secret, the caBundle patched in) or files; and the first certificate. */
async function servingCertificates(
  options: WebhookOptions,
  runtime: WebhookRuntime,
  api: KubeApi,
  onServingCertificate: (pair: KeyPairPem) => void,
): Promise<{ certificates?: SelfManagedCertificates; files?: CertificateFiles; first: KeyPairPem | undefined }> {
  const { logger } = runtime;
  if (options.certificateMode !== 'self-managed') {
    const files = certificateFiles({ directory: options.certDir, logger, onServingCertificate });
    return { files, first: await files.load() };
  }
  const service = options.serviceName;
  const ns = options.namespace;
  const certificates = selfManagedCertificates({
    api,
    logger,
    namespace: ns,
    secretName: options.tlsSecret,
    webhookConfigurationName: options.webhookConfigName,
    ...(options.ownerDeployment ? { owner: await deploymentOwner(api, ns, options.ownerDeployment) } : {}),
    dnsNames: [`${service}.${ns}.svc`, `${service}.${ns}.svc.cluster.local`, service],
    ipAddresses: runtime.ipAddresses ?? [],
    caValidityHours: options.caValidityHours,
    servingValidityHours: options.certValidityHours,
    ...(runtime.certificateIntervalMs ? { intervalMs: runtime.certificateIntervalMs } : {}),
    ...(runtime.certificatePropagationMs !== undefined ? { propagationMs: runtime.certificatePropagationMs } : {}),
    onServingCertificate,
  });
  await certificates.reconcile();
  // The self-managed pass hands its certificate through onServingCertificate.
  return { certificates, first: undefined };
}

export async function startWebhook(options: WebhookOptions, runtime: WebhookRuntime): Promise<WebhookServer> {
  const { logger } = runtime;
  const api = new KubeApi(runtime.kubeConfig);
  const nativeSupported = runtime.nativeSidecarSupported ?? (options.sidecar.nativeSidecar === 'false' ? false : await clusterSupportsNativeSidecars(api));
  logger.info({ nativeSidecarSupported: nativeSupported, mode: options.sidecar.nativeSidecar }, 'native sidecar support');

  const namespaceLabels = cachedNamespaceLabels(api);
  const events = createPodEventQueue({ api, logger });
  const operatorCa = options.operatorCaFile
    ? operatorCaFromFile(options.operatorCaFile, logger)
    : operatorCaFromConfigMap({ api, namespace: options.namespace, name: options.operatorCaConfigMap, logger });
  const metrics = runtime.metrics ?? new WebhookMetrics();
  const admission: PodAdmissionDeps = {
    metrics,
    logger,
    ownNamespace: options.namespace,
    defaults: () => options.sidecar,
    operatorCaPem: () => operatorCa.current(),
    nativeSidecarSupported: () => nativeSupported,
    namespaceLabels,
    events,
    auditEnabled: cachedAuditLookup(api),
    ...(options.audit?.hostSocket ? { auditHostSocketDir: options.audit.socketDir } : {}),
  };

  // The first certificate must exist before the server can start; later ones are swapped into it.
  let app: FastifyInstance | undefined;
  let initial: KeyPairPem | undefined;
  let servingPem: string | undefined;
  const onServingCertificate = (pair: KeyPairPem) => {
    servingPem = pair.certPem;
    if (app) reloadServingCertificate(app, pair);
    else initial = pair;
  };
  const { certificates, files, first } = await servingCertificates(options, runtime, api, onServingCertificate);
  if (first) initial = first;
  if (!initial) throw new Error('no serving certificate available');

  const selfManaged = certificates;
  const notReady = (): string[] => [
    ...(operatorCa.loaded() ? [] : [`the operator's CA (${operatorCa.describe()}): sidecars cannot be injected without it`]),
    ...(selfManaged && selfManaged.caBundle === ''
      ? [`our caBundle in MutatingWebhookConfiguration ${options.webhookConfigName}: the API server would not trust this server`]
      : []),
  ];
  metrics.watchCertificates({ serving: () => servingPem, ...(certificates ? { ca: () => certificates.caBundle } : {}) });
  app = buildWebhookApp({ logger, admission, tls: initial, metrics: metrics.exposition, notReady });
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  if (certificates) await certificates.start();
  if (files) await files.start();

  let watcher: MissingSidecarWatcher | undefined;
  if (runtime.watchMissingSidecars ?? options.failurePolicy === 'Ignore') {
    watcher = missingSidecarWatcher({ api, logger, ownNamespace: options.namespace, namespaceLabels, events });
    watcher.start();
  }
  logger.info({ port, certificateMode: options.certificateMode, failurePolicy: options.failurePolicy }, 'webhook listening');

  const server = app;
  return {
    app: server,
    metrics,
    port,
    events,
    ...(certificates ? { certificates } : {}),
    async stop() {
      await watcher?.stop();
      certificates?.stop();
      files?.stop();
      operatorCa.stop();
      await server.close();
      await events.flush();
    },
  };
}
