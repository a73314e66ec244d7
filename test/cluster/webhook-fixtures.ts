// Shared by webhook.test.ts and helm.test.ts: the webhook served in this process over TLS on 127.0.0.1, the
// way envtest runs webhooks (the API server calls https://127.0.0.1:PORT/mutate), plus small API helpers.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { CoreV1Api, EventsV1Api, type KubeConfig, type V1Pod, type EventsV1Event } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { createCertificateAuthority } from '../../contracts/pki.ts';
import type { WebhookOptions } from '../../webhook/src/webhook-options.ts';
import { startWebhook, type WebhookRuntime, type WebhookServer } from '../../webhook/src/webhook-server.ts';

export const SIDECAR_IMAGE = 'ghcr.io/tollgate/tollgate:0.1.0';

export interface CapturedLog {
  logger: Logger;
  lines: Array<Record<string, unknown>>;
}

/** A real pino logger whose records the test can read (reinvocation shows up as AlreadyInjected skips). */
export function capturedLogger(): CapturedLog {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

export async function operatorCaFile(): Promise<{ path: string; pem: string }> {
  const ca = await createCertificateAuthority({ commonName: 'test-operator-ca' });
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-operator-ca-'));
  const path = join(dir, 'ca.crt');
  writeFileSync(path, ca.certPem);
  return { path, pem: ca.certPem };
}

export function testWebhookOptions(opts: { port: number; namespace: string; webhookConfigName: string; operatorCaFile?: string; tlsSecret?: string }): WebhookOptions {
  return {
    host: '127.0.0.1',
    port: opts.port,
    namespace: opts.namespace,
    logLevel: 'debug',
    failurePolicy: 'Ignore',
    certificateMode: 'self-managed',
    certDir: '/nonexistent',
    tlsSecret: opts.tlsSecret ?? 'tollgate-webhook-tls',
    serviceName: 'tollgate-webhook',
    webhookConfigName: opts.webhookConfigName,
    caValidityHours: 24 * 365,
    certValidityHours: 24 * 7,
    ...(opts.operatorCaFile ? { operatorCaFile: opts.operatorCaFile } : {}),
    operatorCaConfigMap: 'tollgate-operator-ca',
    sidecar: {
      image: SIDECAR_IMAGE,
      version: '0.1.0',
      port: 8181,
      resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } },
      nativeSidecar: 'auto',
      operatorAddress: `tollgate-operator.${opts.namespace}.svc:8443`,
      logLevel: 'info',
    },
  };
}

export function startLocalWebhook(options: WebhookOptions, kubeConfig: KubeConfig, logger: Logger, extra: Partial<WebhookRuntime> = {}): Promise<WebhookServer> {
  return startWebhook(options, { kubeConfig, logger, ipAddresses: ['127.0.0.1'], ...extra });
}

export { waitFor } from '../support/wait-for.ts';

export async function ensureNamespace(kubeConfig: KubeConfig, name: string, labels: Record<string, string> = {}): Promise<void> {
  await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name, labels } } });
}

export function appPod(name: string, annotations?: Record<string, string>, extra: Partial<V1Pod> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(annotations ? { annotations } : {}), ...extra.metadata },
    spec: { containers: [{ name: 'app', image: 'registry.example.com/shop/web:1.0' }], ...extra.spec },
  };
}

export async function createPod(kubeConfig: KubeConfig, namespace: string, pod: V1Pod): Promise<V1Pod> {
  return kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body: pod });
}

/** The API server's message for a refused creation (the ApiException body is the Status JSON). */
export async function creationError(kubeConfig: KubeConfig, namespace: string, pod: V1Pod): Promise<string> {
  try {
    await createPod(kubeConfig, namespace, pod);
  } catch (error) {
    const body = (error as { body?: unknown }).body;
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    try {
      return (JSON.parse(text) as { message: string }).message;
    } catch {
      return text;
    }
  }
  throw new Error(`pod ${pod.metadata?.name} was created, expected a refusal`);
}

export async function eventsAbout(kubeConfig: KubeConfig, namespace: string, name: string): Promise<EventsV1Event[]> {
  const list = await kubeConfig.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
  return list.items.filter((e) => e.regarding?.name === name);
}

export interface WebhookConfigurationInput {
  name: string;
  url: string;
  ownNamespace: string;
  failurePolicy?: 'Ignore' | 'Fail';
  podOptInFailurePolicy?: 'Ignore' | 'Fail';
  caBundlePem?: string;
}

/**
 * The same two entries the chart renders (ADR 0800), pointed at a URL instead of a Service: one for opted-in
 * namespaces, one for pod-annotation opt-in elsewhere (annotations cannot be selected, so that entry matches
 * every pod outside excluded namespaces and the webhook decides).
 */
export function webhookConfiguration(input: WebhookConfigurationInput): object {
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    timeoutSeconds: 5,
    reinvocationPolicy: 'IfNeeded',
    matchPolicy: 'Equivalent',
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
    clientConfig: { url: input.url, ...(input.caBundlePem ? { caBundle: Buffer.from(input.caBundlePem).toString('base64') } : {}) },
    objectSelector: { matchExpressions: [{ key: 'app.kubernetes.io/part-of', operator: 'NotIn', values: ['tollgate'] }] },
  };
  const excluded = ['kube-system', 'kube-public', 'kube-node-lease', input.ownNamespace];
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: input.name },
    webhooks: [
      {
        name: 'namespace.inject.tollgate.dev',
        failurePolicy: input.failurePolicy ?? 'Fail',
        namespaceSelector: {
          matchExpressions: [
            { key: 'tollgate.dev/injection', operator: 'In', values: ['enabled'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
          ],
        },
        ...common,
      },
      {
        name: 'pod.inject.tollgate.dev',
        failurePolicy: input.podOptInFailurePolicy ?? 'Ignore',
        namespaceSelector: {
          matchExpressions: [
            { key: 'tollgate.dev/injection', operator: 'NotIn', values: ['enabled', 'disabled'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
          ],
        },
        ...common,
      },
    ],
  };
}

/** GET over the webhook's TLS port, as the kubelet's probe does (it does not verify the certificate). */
export function probeWebhook(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
