// The injection webhook and audit on a real API server: a sidecar gets Tetragon access only when its pod's
// ProxyConfig enables audit: the node IP always, the agent's socket directory (read-only hostPath) only
// because this webhook runs with the chart's audit.hostSocket on.

import { AdmissionregistrationV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXY_CONFIG } from '../../crds/index.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import type { WebhookServer } from '../../webhook/src/webhook-server.ts';
import { crdManifests } from '../../crds/index.ts';
import { appPod, capturedLogger, createPod, ensureNamespace, operatorCaFile, startLocalWebhook, testWebhookOptions, waitFor, webhookConfiguration } from './webhook-fixtures.ts';

const OWN_NAMESPACE = 'tollgate-system';
const CONFIG_NAME = 'tollgate-audit-test';

function sidecarOf(pod: V1Pod): V1Container | undefined {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) => c.name === 'tollgate-proxy');
}

describe('webhook: Tetragon access for sidecars whose ProxyConfig enables audit', () => {
  let cp: ControlPlane;
  let webhook: WebhookServer | undefined;
  let counter = 0;

  /** Creates pods until the webhook (publishing its CA first) injects one; returns that pod. */
  const injectedPod = (namespace: string, annotations?: Record<string, string>) =>
    waitFor(`an injected pod in ${namespace}`, async () => {
      const pod = await createPod(cp.kubeConfig, namespace, appPod(`web-${++counter}`, annotations));
      return sidecarOf(pod) ? pod : undefined;
    });

  beforeAll(async () => {
    cp = await startControlPlane();
    const applied = await cp.kubectl(['apply', '-f', '-'], { input: crdManifests() });
    expect(applied, applied.stderr).toMatchObject({ code: 0 });
    await waitFor('the ProxyConfig CRD', async () => (await cp.kubectl(['get', PROXY_CONFIG.plural, '-A'])).code === 0 || undefined);
    await ensureNamespace(cp.kubeConfig, OWN_NAMESPACE);
    for (const ns of ['audited', 'quiet']) await ensureNamespace(cp.kubeConfig, ns, { 'tollgate.dev/injection': 'enabled' });
    const put = (namespace: string, name: string, spec: object) =>
      cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: PROXY_CONFIG.apiVersion, kind: PROXY_CONFIG.kind, metadata: { name, namespace }, spec }) });
    const audit = { audit: { sinks: [{ name: 'collector', kind: 'grpc', address: 'audit-collector.security:4317' }] } };
    expect((await put('audited', 'default', audit)).code).toBe(0);
    expect((await put('quiet', 'default', {})).code).toBe(0);
    expect((await put('quiet', 'with-audit', audit)).code).toBe(0);
    expect((await put('quiet', 'audit-off', { audit: { ...audit.audit, enabled: false } })).code).toBe(0);

    const port = await freePort();
    await cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
      body: webhookConfiguration({ name: CONFIG_NAME, url: `https://127.0.0.1:${port}/mutate`, ownNamespace: OWN_NAMESPACE }),
    });
    const operatorCa = await operatorCaFile();
    webhook = await startLocalWebhook(
      {
        ...testWebhookOptions({ port, namespace: OWN_NAMESPACE, webhookConfigName: CONFIG_NAME, operatorCaFile: operatorCa.path }),
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

  it("gives the node IP and the read-only socket directory when the pod's ProxyConfig enables audit", async () => {
    const pod = await injectedPod('audited');
    const sidecar = sidecarOf(pod)!;
    expect(sidecar.env).toContainEqual({ name: 'TOLLGATE_HOST_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } });
    expect(sidecar.env).toContainEqual({ name: 'TOLLGATE_AUDIT_SOCKET', value: 'unix:///var/run/tetragon/tetragon.sock' });
    expect(sidecar.volumeMounts).toContainEqual({ name: 'tollgate-tetragon', mountPath: '/var/run/tetragon', readOnly: true });
    expect(pod.spec!.volumes).toContainEqual({ name: 'tollgate-tetragon', hostPath: { path: '/var/run/tetragon', type: 'Directory' } });
    // only the sidecar sees it
    expect(pod.spec!.containers.find((c) => c.name === 'app')!.volumeMounts ?? []).toEqual([]);
  });

  it("gives nothing when the pod's ProxyConfig has no audit or turns it off, and follows the pod's annotation", async () => {
    for (const annotations of [undefined, { 'tollgate.dev/proxy-config': 'audit-off' }, { 'tollgate.dev/proxy-config': 'missing' }]) {
      const pod = await injectedPod('quiet', annotations);
      const sidecar = sidecarOf(pod)!;
      expect(sidecar.env?.map((e) => e.name)).not.toContain('TOLLGATE_HOST_IP');
      expect((pod.spec!.volumes ?? []).map((v) => v.name)).not.toContain('tollgate-tetragon');
    }
    const chosen = await injectedPod('quiet', { 'tollgate.dev/proxy-config': 'with-audit' });
    expect(sidecarOf(chosen)!.env?.map((e) => e.name)).toContain('TOLLGATE_AUDIT_SOCKET');
  });
});
