// The injection webhook against a real kube-apiserver: the webhook runs in this process over TLS on
// 127.0.0.1, a MutatingWebhookConfiguration points the API server at it, and every assertion reads what the
// API server stored after calling it. The caBundle is never written by the test: the webhook's self-managed
// certificates publish it, as in a cluster. The webhook acts as the chart's ServiceAccount with the chart's RBAC.

import { connect } from 'node:tls';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { createCertificateAuthority, isIssuedBy, issueCertificate } from '../../contracts/pki.ts';
import { asChartServiceAccount, CHART_NAMES } from './chart-rbac.ts';
import { sidecarContainer, sidecarVolumes } from '../../webhook/src/sidecar-container.ts';
import type { WebhookServer } from '../../webhook/src/webhook-server.ts';
import {
  appPod,
  capturedLogger,
  createPod,
  creationError,
  ensureNamespace,
  eventsAbout,
  operatorCaFile,
  probeWebhook,
  startLocalWebhook,
  testWebhookOptions,
  waitFor,
  webhookConfiguration,
  type CapturedLog,
} from './webhook-fixtures.ts';

const OWN_NAMESPACE = 'tollgate-system';
// The chart lets its webhook patch only the configuration it installs.
const CONFIG_NAME = CHART_NAMES.webhookConfiguration;

let cp: ControlPlane;
let kc: KubeConfig;
let webhookKc: KubeConfig;
let port: number;
let webhook: WebhookServer | undefined;
let log: CapturedLog;
let operatorCa: { path: string; pem: string };

const core = () => kc.makeApiClient(CoreV1Api);
const admissionApi = () => kc.makeApiClient(AdmissionregistrationV1Api);

async function start(): Promise<WebhookServer> {
  webhook = await startLocalWebhook(
    testWebhookOptions({ port, namespace: OWN_NAMESPACE, webhookConfigName: CONFIG_NAME, operatorCaFile: operatorCa.path }),
    webhookKc,
    log.logger,
    { certificateIntervalMs: 250, certificatePropagationMs: 2_000, watchMissingSidecars: true },
  );
  return webhook;
}

async function stored(namespace: string, name: string): Promise<V1Pod> {
  return core().readNamespacedPod({ namespace, name });
}

function sidecarOf(pod: V1Pod) {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].filter((c) => c.name === 'tollgate-proxy');
}

async function setFailurePolicy(policy: 'Ignore' | 'Fail'): Promise<void> {
  await admissionApi().patchMutatingWebhookConfiguration(
    { name: CONFIG_NAME, body: [{ op: 'replace', path: '/webhooks/0/failurePolicy', value: policy }] },
    setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
  );
}

beforeAll(async () => {
  // With the admission plugin some clusters enable: adding the owner to an older Secret needs delete on it (ADR 0810).
  cp = await startControlPlane({ admissionPlugins: ['OwnerReferencesPermissionEnforcement'] });
  kc = cp.kubeConfig;
  log = capturedLogger();
  operatorCa = await operatorCaFile();
  port = await freePort();
  await ensureNamespace(kc, OWN_NAMESPACE);
  await ensureNamespace(kc, 'shop', { 'tollgate.dev/injection': 'enabled' });
  await ensureNamespace(kc, 'plain');
  webhookKc = await asChartServiceAccount(cp, 'webhook', { namespace: OWN_NAMESPACE });
  // Registered before the webhook runs and without a caBundle: the webhook must publish its own CA.
  await admissionApi().createMutatingWebhookConfiguration({
    body: webhookConfiguration({ name: CONFIG_NAME, url: `https://127.0.0.1:${port}/mutate`, ownNamespace: OWN_NAMESPACE }),
  });
  await start();
});

afterAll(async () => {
  await webhook?.stop();
  await cp?.stop();
});

describe('injection through the API server', () => {
  it('publishes its CA into every webhook of the configuration', async () => {
    const config = await admissionApi().readMutatingWebhookConfiguration({ name: CONFIG_NAME });
    for (const w of config.webhooks ?? []) {
      expect(Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString()).toBe(webhook!.certificates!.caBundle);
    }
    const secret = await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' });
    expect(Object.keys(secret.data ?? {}).sort()).toEqual(['ca-bundle.crt', 'ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
  });

  it('injects a native sidecar into a pod of an opted-in namespace, exactly as built', async () => {
    await createPod(kc, 'shop', appPod('web-1'));
    const pod = await stored('shop', 'web-1');
    const expected = sidecarContainer(
      {
        image: 'ghcr.io/tollgate/tollgate:0.1.0',
        port: 8181,
        native: true,
        injectEnv: false,
        resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } },
      },
      testWebhookOptions({ port, namespace: OWN_NAMESPACE, webhookConfigName: CONFIG_NAME, operatorCaFile: '' }).sidecar,
    );
    expect(pod.spec!.initContainers).toHaveLength(1);
    expect(pod.spec!.initContainers![0]).toMatchObject(JSON.parse(JSON.stringify(expected)));
    expect(pod.spec!.initContainers![0]!.restartPolicy).toBe('Always');
    expect(pod.spec!.containers.map((c) => c.name)).toEqual(['app']);
    expect(pod.spec!.volumes).toMatchObject(JSON.parse(JSON.stringify(sidecarVolumes())));
    expect(pod.metadata!.annotations!['tollgate.dev/operator-ca']).toBe(operatorCa.pem);
    expect(JSON.parse(pod.metadata!.annotations!['tollgate.dev/status']!)).toEqual({
      version: '0.1.0',
      container: 'tollgate-proxy',
      image: 'ghcr.io/tollgate/tollgate:0.1.0',
      native: true,
      port: 8181,
      injectEnv: [],
    });
  });

  it('injects through the pod annotation in a namespace without the label, with overrides and SDK variables', async () => {
    await createPod(
      kc,
      'plain',
      appPod('agent', {
        'tollgate.dev/inject': 'true',
        'tollgate.dev/native-sidecar': 'false',
        'tollgate.dev/sidecar-port': '9191',
        'tollgate.dev/sidecar-memory': '512Mi',
        'tollgate.dev/inject-env': 'true',
      }),
    );
    const pod = await stored('plain', 'agent');
    expect(pod.spec!.initContainers ?? []).toEqual([]);
    const sidecar = pod.spec!.containers.find((c) => c.name === 'tollgate-proxy')!;
    expect(sidecar.ports).toMatchObject([{ containerPort: 9191 }, { name: 'tollgate-health', containerPort: 15181 }]);
    expect(sidecar.resources).toMatchObject({ requests: { memory: '512Mi' }, limits: { memory: '512Mi' } });
    const env = Object.fromEntries((pod.spec!.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toEqual({
      OPENAI_BASE_URL: 'http://127.0.0.1:9191/proxy/beta/v1',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9191/proxy/gamma-direct',
      ANTHROPIC_VERTEX_BASE_URL: 'http://127.0.0.1:9191/proxy/gamma-cloud/v1',
      ANTHROPIC_BEDROCK_BASE_URL: 'http://127.0.0.1:9191/proxy/gamma-cloudb',
      GOOGLE_VERTEX_BASE_URL: 'http://127.0.0.1:9191/proxy/alpha',
    });
  });

  it('leaves pods alone that did not opt in or opted out, and reports the opt-out on the owner', async () => {
    await createPod(kc, 'plain', appPod('bystander'));
    expect(sidecarOf(await stored('plain', 'bystander'))).toEqual([]);

    const owner = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'batch-7d9f', uid: '6f1c0e7a-0000-4000-8000-000000000001', controller: true };
    await createPod(kc, 'shop', appPod('batch-7d9f-x1', { 'tollgate.dev/inject': 'false' }, { metadata: { ownerReferences: [owner] } }));
    expect(sidecarOf(await stored('shop', 'batch-7d9f-x1'))).toEqual([]);
    const events = await waitFor('a Skipped Event on the ReplicaSet', async () => {
      const found = await eventsAbout(kc, 'shop', 'batch-7d9f');
      return found.length > 0 ? found : undefined;
    });
    expect(events[0]).toMatchObject({ reason: 'Skipped', type: 'Normal', reportingController: 'tollgate.dev/webhook', regarding: { kind: 'ReplicaSet', name: 'batch-7d9f' } });
    expect(events[0]!.note).toContain('OptedOut');
  });

  it('reports an injection as an Event on the owner', async () => {
    const owner = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-5c6b', uid: '6f1c0e7a-0000-4000-8000-000000000002', controller: true };
    await createPod(kc, 'shop', appPod('api-5c6b-q2', undefined, { metadata: { ownerReferences: [owner] } }));
    const events = await waitFor('an Injected Event', async () => {
      const found = await eventsAbout(kc, 'shop', 'api-5c6b');
      return found.length > 0 ? found : undefined;
    });
    expect(events[0]).toMatchObject({ reason: 'Injected', action: 'Inject', regarding: { kind: 'ReplicaSet', uid: owner.uid } });
  });

  it('refuses a pod with a bad override, naming the annotation, and stores nothing', async () => {
    const message = await creationError(kc, 'shop', appPod('bad-cpu', { 'tollgate.dev/sidecar-cpu': 'two cores' }));
    expect(message).toContain('denied the request');
    expect(message).toContain('annotation tollgate.dev/sidecar-cpu: "two cores" is not a cpu quantity');
    await expect(stored('shop', 'bad-cpu')).rejects.toMatchObject({ code: 404 });
  });

  it('never touches its own namespace', async () => {
    await createPod(kc, OWN_NAMESPACE, appPod('own', { 'tollgate.dev/inject': 'true' }));
    expect(sidecarOf(await stored(OWN_NAMESPACE, 'own'))).toEqual([]);
  });
});

describe('reinvocation', () => {
  let relabeller: Server;

  afterAll(async () => {
    await admissionApi()
      .deleteMutatingWebhookConfiguration({ name: 'zz-relabel' })
      .catch(() => undefined);
    relabeller?.close();
  });

  it('changes nothing when a later webhook mutates the pod and the API server calls Tollgate again', async () => {
    // A second webhook, ordered after Tollgate's configuration, adds a label; with reinvocationPolicy IfNeeded
    // the API server then calls Tollgate once more with the already-injected pod.
    const ca = await createCertificateAuthority({ commonName: 'relabel-ca' });
    const leaf = await issueCertificate(ca, { commonName: '127.0.0.1', ipAddresses: ['127.0.0.1'], usage: 'server' });
    relabeller = createServer({ key: leaf.keyPem, cert: leaf.certPem }, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const review = JSON.parse(body) as { request: { uid: string; object: V1Pod } };
        const labels = review.request.object.metadata?.labels;
        const patch = labels ? [{ op: 'add', path: '/metadata/labels/relabelled', value: 'true' }] : [{ op: 'add', path: '/metadata/labels', value: { relabelled: 'true' } }];
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request.uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') },
          }),
        );
      });
    });
    const relabelPort = await freePort();
    await new Promise<void>((r) => relabeller.listen(relabelPort, '127.0.0.1', r));
    await ensureNamespace(kc, 'reinvoke', { 'tollgate.dev/injection': 'enabled' });
    await admissionApi().createMutatingWebhookConfiguration({
      body: {
        metadata: { name: 'zz-relabel' },
        webhooks: [
          {
            name: 'relabel.test.tollgate.dev',
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            failurePolicy: 'Fail',
            clientConfig: { url: `https://127.0.0.1:${relabelPort}/`, caBundle: Buffer.from(ca.certPem).toString('base64') },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'reinvoke' } },
            rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
          },
        ],
      },
    });
    // The API server learns about a new configuration asynchronously: create pods until one is relabelled.
    let n = 0;
    const pod = await waitFor('a pod mutated by both webhooks', async () => {
      const created = await createPod(kc, 'reinvoke', appPod(`twice-${n++}`));
      return created.metadata?.labels?.relabelled === 'true' ? created : undefined;
    });
    expect(sidecarOf(pod)).toHaveLength(1);
    expect(pod.spec!.volumes!.filter((v) => v.name.startsWith('tollgate-'))).toHaveLength(3);
    const reinvoked = log.lines.filter((l) => l.pod === pod.metadata!.name && l.reason === 'AlreadyInjected');
    expect(reinvoked.length).toBeGreaterThanOrEqual(1);
  });
});

describe('when the webhook is down', () => {
  it('under Ignore creates the pod without the sidecar and reports it once the webhook is back', async () => {
    await setFailurePolicy('Ignore');
    await webhook!.stop();
    webhook = undefined;
    let n = 0;
    const pod = await waitFor('a pod admitted without the webhook', async () => {
      try {
        return await createPod(kc, 'shop', appPod(`unprotected-${n++}`));
      } catch {
        return undefined; // the Fail policy had not reached the API server's cache yet
      }
    });
    expect(sidecarOf(pod)).toEqual([]);

    await start();
    const events = await waitFor('a SidecarMissing Event', async () => {
      const found = await eventsAbout(kc, 'shop', pod.metadata!.name!);
      return found.find((e) => e.reason === 'SidecarMissing');
    });
    expect(events).toMatchObject({ type: 'Warning', regarding: { kind: 'Pod', name: pod.metadata!.name } });
  });

  it('under Fail refuses the pod', async () => {
    await setFailurePolicy('Fail');
    await webhook!.stop();
    webhook = undefined;
    let n = 0;
    const message = await waitFor('a refused creation', async () => {
      try {
        await createPod(kc, 'shop', appPod(`refused-${n++}`));
        return undefined; // created: the Ignore policy was still cached
      } catch (error) {
        return JSON.stringify((error as { body?: unknown }).body);
      }
    });
    expect(message).toContain('failed calling webhook');
    await start();
  });
});

describe('certificate rotation', () => {
  function servedCertificate(): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        const cert = socket.getPeerX509Certificate();
        socket.end();
        if (cert) resolve(cert.toString());
        else reject(new Error('no certificate'));
      });
      socket.on('error', reject);
    });
  }

  it('rotates the serving certificate and the CA while pods are admitted under Fail, with no failed admission', async () => {
    await setFailurePolicy('Fail');
    const before = await servedCertificate();
    const caBefore = (await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' })).data!['ca.crt']!;

    let stop = false;
    const failures: string[] = [];
    let created = 0;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          const pod = await createPod(kc, 'shop', appPod(`rotating-${i}`));
          if (sidecarOf(pod).length !== 1) failures.push(`rotating-${i}: no sidecar`);
          created += 1;
        } catch (error) {
          failures.push(`rotating-${i}: ${JSON.stringify((error as { body?: unknown }).body)}`);
        }
      }
    })();

    await webhook!.certificates!.reconcile('serving');
    const afterServing = await waitFor('a new serving certificate', async () => {
      const now = await servedCertificate();
      return now !== before ? now : undefined;
    });
    expect(isIssuedBy(afterServing, Buffer.from(caBefore, 'base64').toString())).toBe(true);

    await webhook!.certificates!.reconcile('ca');
    const secret = await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' });
    const newCa = Buffer.from(secret.data!['ca.crt']!, 'base64').toString();
    expect(newCa).not.toBe(Buffer.from(caBefore, 'base64').toString());
    // The background loop switches the serving certificate to the new CA once the bundle had time to spread.
    const onNewCa = await waitFor('a serving certificate from the new CA', async () => {
      const now = await servedCertificate();
      return isIssuedBy(now, newCa) ? now : undefined;
    });
    const createdBeforeSwitch = created;
    await waitFor('more admissions after the switch', async () => created >= createdBeforeSwitch + 5 || undefined);
    stop = true;
    await loop;

    expect(new X509Certificate(onNewCa).checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(failures).toEqual([]);
    expect(created).toBeGreaterThan(5);
    const config = await admissionApi().readMutatingWebhookConfiguration({ name: CONFIG_NAME });
    const bundle = Buffer.from(config.webhooks![0]!.clientConfig.caBundle!, 'base64').toString();
    expect(bundle).toContain(newCa.trim());
  });

  it('re-patches the caBundle when it drifts', async () => {
    await admissionApi().patchMutatingWebhookConfiguration(
      { name: CONFIG_NAME, body: [{ op: 'remove', path: '/webhooks/0/clientConfig/caBundle' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    await waitFor('the caBundle restored', async () => {
      const config = await admissionApi().readMutatingWebhookConfiguration({ name: CONFIG_NAME });
      const bundle = Buffer.from(config.webhooks![0]!.clientConfig.caBundle ?? '', 'base64').toString();
      return bundle === webhook!.certificates!.caBundle || undefined;
    });
  });
});

describe('readiness and ownership', () => {
  it('is ready while its caBundle is in the configuration and the operator CA is loaded', async () => {
    expect(await probeWebhook(port, '/readyz')).toEqual({ status: 200, body: JSON.stringify({ status: 'ok' }) });
  });

  it('a replica that has no operator CA yet is live but not ready, names what it waits for, and becomes ready when the CA appears', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-webhook-ready-'));
    const caPath = join(dir, 'ca.crt');
    const secondPort = await freePort();
    const second = await startLocalWebhook(
      testWebhookOptions({ port: secondPort, namespace: OWN_NAMESPACE, webhookConfigName: CONFIG_NAME, operatorCaFile: caPath }),
      webhookKc,
      log.logger,
      { certificateIntervalMs: 250 },
    );
    try {
      expect((await probeWebhook(secondPort, '/healthz')).status).toBe(200);
      const notReady = await probeWebhook(secondPort, '/readyz');
      expect(notReady.status).toBe(503);
      expect(JSON.parse(notReady.body)).toEqual({ status: 'not ready', waiting: [`the operator's CA (${caPath}): sidecars cannot be injected without it`] });
      // Written as the kubelet writes a Secret volume's file: the next probe sees it, no poll interval to wait out.
      writeFileSync(caPath, operatorCa.pem);
      expect((await probeWebhook(secondPort, '/readyz')).status).toBe(200);
    } finally {
      await second.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is not ready while its caBundle cannot be in the configuration, and ready again once it is', async () => {
    // The background pass is paused so each state is seen; reconcile() runs the same pass on demand.
    webhook!.certificates!.stop();
    try {
      await admissionApi().deleteMutatingWebhookConfiguration({ name: CONFIG_NAME });
      await webhook!.certificates!.reconcile();
      const notReady = await probeWebhook(port, '/readyz');
      expect(notReady.status).toBe(503);
      expect(JSON.parse(notReady.body).waiting).toEqual([`our caBundle in MutatingWebhookConfiguration ${CONFIG_NAME}: the API server would not trust this server`]);
      // Re-created without a caBundle (as `helm upgrade` may leave it): the next pass patches it in, then ready.
      await admissionApi().createMutatingWebhookConfiguration({
        body: webhookConfiguration({ name: CONFIG_NAME, url: `https://127.0.0.1:${port}/mutate`, ownNamespace: OWN_NAMESPACE }),
      });
      await webhook!.certificates!.reconcile();
      expect((await probeWebhook(port, '/readyz')).status).toBe(200);
      const config = await admissionApi().readMutatingWebhookConfiguration({ name: CONFIG_NAME });
      expect(Buffer.from(config.webhooks![0]!.clientConfig.caBundle ?? '', 'base64').toString()).toBe(webhook!.certificates!.caBundle);
    } finally {
      await webhook!.certificates!.start();
    }
  });

  it('names its Deployment as owner of the TLS Secret, adding it to the Secret an older webhook wrote', async () => {
    const secretBefore = await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' });
    expect(secretBefore.metadata!.ownerReferences).toBeUndefined();
    const deployment = await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: OWN_NAMESPACE,
      body: {
        metadata: { name: CHART_NAMES.webhook },
        spec: {
          selector: { matchLabels: { app: 'tollgate-webhook' } },
          template: { metadata: { labels: { app: 'tollgate-webhook' } }, spec: { containers: [{ name: 'webhook', image: 'ghcr.io/tollgate/tollgate:0.1.0' }] } },
        },
      },
    });
    const secondPort = await freePort();
    const second = await startLocalWebhook(
      {
        ...testWebhookOptions({ port: secondPort, namespace: OWN_NAMESPACE, webhookConfigName: CONFIG_NAME, operatorCaFile: operatorCa.path }),
        ownerDeployment: CHART_NAMES.webhook,
      },
      webhookKc,
      log.logger,
      { certificateIntervalMs: 250 },
    );
    try {
      const secret = await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' });
      expect(secret.metadata!.ownerReferences).toEqual([{ apiVersion: 'apps/v1', kind: 'Deployment', name: CHART_NAMES.webhook, uid: deployment.metadata!.uid }]);
      // Adopted, not rotated: the certificates are the ones the API server already trusts.
      expect(secret.data).toEqual(secretBefore.data);
      // The replica without the flag rewrites the Secret on renewal; it keeps the owner it finds.
      await webhook!.certificates!.reconcile('serving');
      const renewed = await core().readNamespacedSecret({ namespace: OWN_NAMESPACE, name: 'tollgate-webhook-tls' });
      expect(renewed.data!['tls.crt']).not.toBe(secret.data!['tls.crt']);
      expect(renewed.metadata!.ownerReferences).toEqual(secret.metadata!.ownerReferences);
    } finally {
      await second.stop();
    }
  });
});
