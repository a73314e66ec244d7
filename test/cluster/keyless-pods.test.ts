// Keyless app containers on a real API server (docs/security.md): a namespace whose ProxyConfig names API keys
// in a Secret, the real webhook (audit on, the chart's audit.hostSocket allowed), and the pod spec as the API
// server stored it: only tollgate-proxy can reach a key; a pod that tries to mount the sidecar's volumes is
// refused and not stored.

import { AdmissionregistrationV1Api, CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crdManifests, PROXY_CONFIG } from '../../crds/index.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { credentialExposure, type Credentials } from '../support/credential-exposure.ts';
import type { WebhookServer } from '../../webhook/src/webhook-server.ts';
import {
  appPod,
  capturedLogger,
  createPod,
  creationError,
  ensureNamespace,
  operatorCaFile,
  startLocalWebhook,
  testWebhookOptions,
  waitFor,
  webhookConfiguration,
} from './webhook-fixtures.ts';

const OWN_NAMESPACE = 'tollgate-system';
const NAMESPACE = 'agents';
const CREDENTIALS: Credentials = { secretNames: ['llm-api-keys'], values: ['sk-proj-cluster-3333333333333333', 'sk-ant-cluster-4444444444444444'] };

function sidecarOf(pod: V1Pod): V1Container | undefined {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) => c.name === 'tollgate-proxy');
}

const agentPod = (name: string, appMounts: { name: string; mountPath: string }[] = []): V1Pod =>
  appPod(
    name,
    { 'tollgate.dev/inject-env': 'true' },
    {
      spec: {
        initContainers: [{ name: 'migrate', image: 'registry.example.com/shop/migrate:1.0' }],
        containers: [
          { name: 'app', image: 'registry.example.com/shop/agent:1.0', volumeMounts: [{ name: 'work', mountPath: '/work' }, ...appMounts] },
          { name: 'tool', image: 'registry.example.com/shop/tool:1.0', envFrom: [{ configMapRef: { name: 'tool-settings' } }] },
        ],
        volumes: [{ name: 'work', emptyDir: {} }],
      },
    },
  );

describe('keyless app containers through the real webhook', () => {
  let cp: ControlPlane;
  let webhook: WebhookServer | undefined;

  beforeAll(async () => {
    cp = await startControlPlane();
    const applied = await cp.kubectl(['apply', '-f', '-'], { input: crdManifests() });
    expect(applied, applied.stderr).toMatchObject({ code: 0 });
    await waitFor('the ProxyConfig CRD', async () => (await cp.kubectl(['get', PROXY_CONFIG.plural, '-A'])).code === 0 || undefined);
    await ensureNamespace(cp.kubeConfig, OWN_NAMESPACE);
    await ensureNamespace(cp.kubeConfig, NAMESPACE, { 'tollgate.dev/injection': 'enabled' });
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'llm-api-keys', labels: { 'tollgate.dev/credentials': 'true' } },
        stringData: { openai: CREDENTIALS.values[0]!, anthropic: CREDENTIALS.values[1]! },
      },
    });
    const spec = {
      credentials: { openaiApiKey: { secretName: 'llm-api-keys', key: 'openai' }, anthropicApiKey: { secretName: 'llm-api-keys', key: 'anthropic' } },
      audit: { sinks: [{ name: 'collector', kind: 'grpc', address: 'audit-collector.security:4317' }] },
    };
    const put = await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: PROXY_CONFIG.apiVersion, kind: PROXY_CONFIG.kind, metadata: { name: 'default', namespace: NAMESPACE }, spec }),
    });
    expect(put, put.stderr).toMatchObject({ code: 0 });

    const port = await freePort();
    const configName = 'tollgate-keyless-test';
    await cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
      body: webhookConfiguration({ name: configName, url: `https://127.0.0.1:${port}/mutate`, ownNamespace: OWN_NAMESPACE }),
    });
    const operatorCa = await operatorCaFile();
    webhook = await startLocalWebhook(
      {
        ...testWebhookOptions({ port, namespace: OWN_NAMESPACE, webhookConfigName: configName, operatorCaFile: operatorCa.path }),
        audit: { hostSocket: true, socketDir: '/var/run/tetragon' },
      },
      cp.kubeConfig,
      capturedLogger().logger,
    );
  });

  afterAll(async () => {
    await webhook?.stop();
    await cp?.stop();
  });

  it('stores a pod in which only tollgate-proxy can reach a key', async () => {
    let counter = 0;
    // Creates pods until the webhook (publishing its CA first) injects one.
    const pod = await waitFor('an injected pod', async () => {
      const created = await createPod(cp.kubeConfig, NAMESPACE, agentPod(`agent-${++counter}`));
      return sidecarOf(created) ? created : undefined;
    });
    const stored = await cp.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata!.name! });
    // The webhook really read this ProxyConfig (audit on): the sidecar got the agent's socket, nobody else did.
    expect(sidecarOf(stored)!.volumeMounts!.map((m) => m.name)).toContain('tollgate-tetragon');
    expect(credentialExposure(stored, 'tollgate-proxy', CREDENTIALS)).toEqual([]);
    const app = stored.spec!.containers.find((c) => c.name === 'app')!;
    expect(app.volumeMounts!.filter((m) => !m.mountPath.startsWith('/var/run/secrets/kubernetes.io'))).toEqual([{ name: 'work', mountPath: '/work' }]);
    expect(app.env!.map((e) => e.value)).toContain('http://127.0.0.1:8181/proxy/beta/v1');
  });

  it("refuses, and does not store, a pod whose app container mounts the sidecar's state directory", async () => {
    await waitFor('the webhook answering', async () => (sidecarOf(await createPod(cp.kubeConfig, NAMESPACE, agentPod(`probe-${Date.now()}`))) ? true : undefined));
    const message = await creationError(cp.kubeConfig, NAMESPACE, agentPod('thief', [{ name: 'tollgate-state', mountPath: '/stolen' }]));
    expect(message).toContain('container app mounts tollgate-state: only the Tollgate sidecar may mount its volumes');
    await expect(cp.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: NAMESPACE, name: 'thief' })).rejects.toMatchObject({ code: 404 });
  });
});
