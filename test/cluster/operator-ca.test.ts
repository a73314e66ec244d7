// The operator's CA reaches the webhook through the API (ADR 0809): the leading operator publishes it in a
// ConfigMap, and the webhook, watching that one ConfigMap as the chart's ServiceAccount, becomes Ready and
// injects it into the next pod as soon as it is written; no Secret volume for the kubelet to refresh. On a
// real kube-apiserver with the OwnerReferencesPermissionEnforcement admission plugin on (ADR 0810).

import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import type { WebhookServer } from '../../webhook/src/webhook-server.ts';
import { asChartServiceAccount, CHART_NAMES } from './chart-rbac.ts';
import {
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  OPERATOR_NAMESPACE,
  type OperatorProcess,
  postOperatorDeployment,
  startOperatorProcess,
  tempDir,
} from './operator-fixtures.ts';
import { appPod, capturedLogger, createPod, ensureNamespace, probeWebhook, startLocalWebhook, testWebhookOptions, webhookConfiguration } from './webhook-fixtures.ts';

const CA_CONFIG_MAP = `/api/v1/namespaces/${OPERATOR_NAMESPACE}/configmaps/${CHART_NAMES.operatorCaConfigMap}`;

describe("the operator's CA through the API", () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let kubeconfig: string;
  let webhookKc: KubeConfig;
  let webhook: WebhookServer | undefined;
  let webhookPort: number;
  let operatorUid: string;
  const operators: OperatorProcess[] = [];

  const startOperator = (identity: string) => {
    const p = startOperatorProcess({
      kubeconfig,
      identity,
      grpcPort: 0,
      logDir: dir.path,
      extraArgs: [`--lease-name=${CHART_NAMES.operator}`, `--owner-deployment=${CHART_NAMES.operator}`, `--ca-config-map=${CHART_NAMES.operatorCaConfigMap}`],
    });
    operators.push(p);
    return p;
  };
  const secretCa = async () => {
    const secret = await api.get<{ data: Record<string, string> }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/secrets/${CHART_NAMES.operatorTlsSecret}`);
    return Buffer.from(secret.data['ca.crt']!, 'base64').toString('utf8');
  };

  beforeAll(async () => {
    dir = tempDir('tollgate-operator-ca-test-');
    cp = await startControlPlane({ admissionPlugins: ['OwnerReferencesPermissionEnforcement'] });
    api = new KubeApi(cp.kubeConfig);
    kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    webhookKc = await asChartServiceAccount(cp, 'webhook', { namespace: OPERATOR_NAMESPACE });
    await ensureNamespace(cp.kubeConfig, 'shop', { 'tollgate.dev/injection': 'enabled' });
    operatorUid = await postOperatorDeployment(api);
    webhookPort = await freePort();
    await api.post(
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      webhookConfiguration({ name: CHART_NAMES.webhookConfiguration, url: `https://127.0.0.1:${webhookPort}/mutate`, ownNamespace: OPERATOR_NAMESPACE }),
    );
  });

  afterAll(async () => {
    await webhook?.stop();
    await Promise.all(operators.map((p) => p.stop(5_000)));
    await cp?.stop();
    dir?.remove();
  });

  it('a webhook started before any operator is live but not Ready, and names the ConfigMap it waits for', async () => {
    // No CA file: the chart's way, the ConfigMap (the default name is the chart's for release `tollgate`).
    webhook = await startLocalWebhook(
      testWebhookOptions({ port: webhookPort, namespace: OPERATOR_NAMESPACE, webhookConfigName: CHART_NAMES.webhookConfiguration }),
      webhookKc,
      capturedLogger().logger,
      { certificateIntervalMs: 250 },
    );
    expect((await probeWebhook(webhookPort, '/healthz')).status).toBe(200);
    const ready = await probeWebhook(webhookPort, '/readyz');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body).waiting).toEqual([
      `the operator's CA (ConfigMap ${OPERATOR_NAMESPACE}/${CHART_NAMES.operatorCaConfigMap}): sidecars cannot be injected without it`,
    ]);
  });

  it('the leading operator publishes its CA, owned by its Deployment, and the webhook is Ready within seconds', async () => {
    const started = Date.now();
    startOperator('operator-a');
    await eventually('operator-a to lead', async () => (await leaseHolder(api, CHART_NAMES.operator)) === 'operator-a', 60_000);
    await eventually('the webhook to be Ready', async () => (await probeWebhook(webhookPort, '/readyz')).status === 200 || undefined, 60_000);
    console.info(`[operator-ca] webhook Ready ${((Date.now() - started) / 1000).toFixed(1)} s after the operator process started`);
    const published = await api.get<{ data: Record<string, string>; metadata: { ownerReferences?: unknown[] } }>(CA_CONFIG_MAP);
    expect(published.data['ca.crt']).toBe(await secretCa());
    expect(published.metadata.ownerReferences).toEqual([{ apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.operator, uid: operatorUid }]);
  });

  it('a pod created now gets the CA the operator serves with', async () => {
    await createPod(cp.kubeConfig, 'shop', appPod('web-1'));
    const pod = await cp.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: 'shop', name: 'web-1' });
    expect(pod.metadata!.annotations!['tollgate.dev/operator-ca']).toBe(await secretCa());
  });

  it('a standby replica republishes a deleted CA from the Secret when it starts, without waiting for the Lease', async () => {
    await api.request('DELETE', CA_CONFIG_MAP);
    startOperator('operator-b');
    const republished = await eventually('the CA ConfigMap again', () => api.get<{ data: Record<string, string> }>(CA_CONFIG_MAP).catch(() => undefined), 60_000);
    expect(republished.data['ca.crt']).toBe(await secretCa());
    expect(await leaseHolder(api, CHART_NAMES.operator)).toBe('operator-a');
    // The webhook kept the CA it had loaded meanwhile (ADR 0808): still Ready.
    expect((await probeWebhook(webhookPort, '/readyz')).status).toBe(200);
  });
});
