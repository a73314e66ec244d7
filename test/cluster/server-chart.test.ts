// The chart's central server (server.enabled): what `helm template` renders for it, compared with a reviewed
// golden file; the schema's refusal of a server that could identify nobody; the rendered config file started
// as a real `tollgate proxy` with the Deployment's own arguments (it must come up in server mode and refuse a
// call without a token); and `helm install` into a real kube-apiserver.
//
// This control plane has no kubelet, so the Deployment's pods never run here; test/kind runs pods.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppsV1Api, AutoscalingV2Api, CoreV1Api, PolicyV1Api, type KubeConfig, type V1Deployment } from '@kubernetes/client-node';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { startProxyProcess } from '../e2e/proxy-process.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');
const GOLDEN = join(import.meta.dirname, 'testdata', 'server-chart.golden.yaml');
const RELEASE = 'tollgate';
const NS = 'tollgate-system';
const KUBE_VERSION = ['--kube-version', '1.34.0'];
const SERVER_TEMPLATES = [
  'templates/server-config.yaml',
  'templates/server-deployment.yaml',
  'templates/server-service.yaml',
  'templates/server-availability.yaml',
  'templates/server-proxy-config.yaml',
];

type Manifest = { kind: string; metadata: { name: string; labels?: Record<string, string> }; [key: string]: unknown };

let cp: ControlPlane;
let kc: KubeConfig;

async function template(...args: string[]): Promise<Manifest[]> {
  const result = await cp.helm(['template', RELEASE, CHART, '-n', NS, ...KUBE_VERSION, ...args]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJSON() as Manifest)
    .filter(Boolean);
}

const isServer = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/component'] === 'server';

beforeAll(async () => {
  cp = await startControlPlane();
  kc = cp.kubeConfig;
});

afterAll(async () => {
  await cp?.stop();
});

describe('helm template with server.enabled', () => {
  it('lints', async () => {
    const result = await cp.helm(['lint', CHART, '--strict', ...KUBE_VERSION, '-f', join(CHART, 'ci', 'server-values.yaml')]);
    expect(result.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it('renders nothing of the server by default', async () => {
    expect((await template()).filter(isServer)).toEqual([]);
  });

  it('renders the server manifests of ci/server-values.yaml exactly as the golden file (UPDATE_GOLDEN=1 rewrites it)', async () => {
    const rendered = (await template('-f', join(CHART, 'ci', 'server-values.yaml'))).filter(isServer);
    expect(rendered.map((m) => `${m.kind}/${m.metadata.name}`).sort()).toEqual([
      'ConfigMap/tollgate-server',
      'Deployment/tollgate-server',
      'HorizontalPodAutoscaler/tollgate-server',
      'PodDisruptionBudget/tollgate-server',
      'ProxyConfig/tollgate-server',
      'Service/tollgate-server',
      'ServiceAccount/tollgate-server',
    ]);
    // The text helm renders, as a reviewer reads it.
    const result = await cp.helm([
      'template',
      RELEASE,
      CHART,
      '-n',
      NS,
      ...KUBE_VERSION,
      '-f',
      join(CHART, 'ci', 'server-values.yaml'),
      ...SERVER_TEMPLATES.flatMap((t) => ['--show-only', t]),
    ]);
    expect(result.code).toBe(0);
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(GOLDEN)) {
      mkdirSync(join(GOLDEN, '..'), { recursive: true });
      writeFileSync(GOLDEN, result.stdout);
      if (process.env.UPDATE_GOLDEN !== '1') throw new Error(`${GOLDEN} was missing and has been written: review it and run again`);
    }
    expect(result.stdout).toBe(readFileSync(GOLDEN, 'utf8'));
  });

  it('without autoscaling, the Deployment has replicas and no HPA is rendered', async () => {
    const rendered = (await template('--set', 'server.enabled=true', '--set', 'server.replicas=3', '--set-json', 'server.config.server.auth={"accessTokens":{}}')).filter(isServer);
    expect(rendered.find((m) => m.kind === 'Deployment')).toMatchObject({ spec: { replicas: 3 } });
    expect(rendered.some((m) => m.kind === 'HorizontalPodAutoscaler')).toBe(false);
  });

  it('a price or upstream change in the values changes its ProxyConfig and rolls no pod; an auth change rolls them', async () => {
    const base = ['-f', join(CHART, 'ci', 'server-values.yaml')];
    const render = async (...set: string[]) => {
      const all = (await template(...base, ...set)).filter(isServer);
      const deployment = all.find((m) => m.kind === 'Deployment') as unknown as V1Deployment;
      return { checksum: deployment.spec!.template.metadata!.annotations!['checksum/config'], proxyConfig: all.find((m) => m.kind === 'ProxyConfig') as { spec?: unknown } };
    };
    const before = await render();
    const priced = await render('--set-json', 'server.config.pricing={"models":[{"provider":"openai","model":"gpt-4o-mini","input_per_million":0.2,"output_per_million":0.8}]}');
    expect(priced.checksum).toBe(before.checksum);
    expect(priced.proxyConfig.spec).toMatchObject({ pricing: { models: [{ model: 'gpt-4o-mini', input_per_million: 0.2 }] } });
    const moved = await render('--set', 'server.config.upstreams.alpha.location=europe-west4');
    expect(moved.checksum).toBe(before.checksum);
    const auth = await render('--set-json', 'server.config.server.auth.admins=["someone-else@corp.example"]');
    expect(auth.checksum).not.toBe(before.checksum);
    // Without the ProxyConfig, the config file is all there is: every change rolls the pods.
    const off = await render('--set', 'server.proxyConfig.enabled=false');
    const offPriced = await render('--set', 'server.proxyConfig.enabled=false', '--set-json', 'server.config.pricing={"models":[]}');
    expect(off.proxyConfig).toBeUndefined();
    expect(offPriced.checksum).not.toBe(off.checksum);
  });

  it('refuses the server ProxyConfig when the operator watches another namespace', async () => {
    const result = await cp.helm(['template', RELEASE, CHART, '-n', NS, ...KUBE_VERSION, '-f', join(CHART, 'ci', 'server-values.yaml'), '--set', 'operator.watchNamespace=shop']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('the operator watches only shop, so it never sees the server');
  });

  it('refuses a server with no way to identify callers, and keys the chart sets itself', async () => {
    const none = await cp.helm(['template', RELEASE, CHART, '-n', NS, ...KUBE_VERSION, '--set', 'server.enabled=true']);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain("at '/server/config/server/auth': 'anyOf' failed");
    expect(none.stderr).toContain("at '/server/config/server/auth/oidc': minItems: got 0, want 1");
    const reserved = await cp.helm([
      'template',
      RELEASE,
      CHART,
      '-n',
      NS,
      ...KUBE_VERSION,
      '--set',
      'server.enabled=true',
      '--set-json',
      'server.config={"mode":"proxy","server":{"port":1,"auth":{"accessTokens":{}}}}',
    ]);
    expect(reserved.stderr).toContain("at '/server/config': additional properties 'mode' not allowed");
    expect(reserved.stderr).toContain("at '/server/config/server': additional properties 'port' not allowed");
  });

  it('renders a config file the engine starts with, in server mode, refusing a call without a token', async () => {
    const rendered = await template('-f', join(CHART, 'ci', 'server-values.yaml'));
    const deployment = rendered.find((m) => m.kind === 'Deployment' && isServer(m)) as unknown as V1Deployment;
    const args = deployment.spec!.template.spec!.containers[0]!.args!;
    expect(args).toEqual(['proxy', '--config', '/etc/tollgate/tollgate.yaml']);
    const configMap = rendered.find((m) => m.kind === 'ConfigMap' && isServer(m)) as unknown as { data: Record<string, string> };
    const config = parseYaml(configMap.data['tollgate.yaml']!) as { storage: Record<string, unknown> };
    expect(config).toMatchObject({
      mode: 'server',
      server: { host: '0.0.0.0', port: 8080 },
      credentials: { openaiApiKeyFile: '/var/run/secrets/tollgate/credentials/openai-api-key' },
    });

    // As the container runs it, except where the spans go (this machine has no /var/lib/tollgate), and on
    // loopback at a port the harness picks (--host and --port win over the file).
    const local = { ...config, storage: { ...config.storage, path: 'spans.db' } };
    const proxy = await startProxyProcess({
      configYaml: stringify(local),
      args: ['--host', '127.0.0.1'],
      // /healthz needs an identity in server mode: up means it answers 401.
      ready: async (url) => (await fetch(`${url}/healthz`)).status === 401,
    });
    try {
      const started = proxy.logs.find((line) => line.msg === 'tollgate proxy listening');
      expect(started).toMatchObject({ mode: 'server', auth: { required: true, strategies: ['iap', 'oidc', 'accessTokens'], health: 'required' } });
      const call = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"model":"gpt-4o-mini","messages":[]}',
      });
      expect(call.status).toBe(401);
      expect(call.headers.get('www-authenticate')).toContain('error="invalid_token"');
    } finally {
      await proxy.stop();
    }
  });
});

describe('helm install with server.enabled into the real control plane', () => {
  beforeAll(async () => {
    // --no-hooks: no kube-controller-manager here runs the post-install self-test Job (the kind suite runs it).
    const result = await cp.helm(['install', RELEASE, CHART, '-n', NS, '--create-namespace', '--no-hooks', '-f', join(CHART, 'ci', 'server-values.yaml')]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('STATUS: deployed');
  });

  it('created the server Deployment, Service, ConfigMap, ProxyConfig, ServiceAccount, PDB and HPA', async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const deployment = await apps.readNamespacedDeployment({ namespace: NS, name: 'tollgate-server' });
    const container = deployment.spec!.template.spec!.containers[0]!;
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/healthz', port: 'tollgate-health', scheme: 'HTTP' });
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'tollgate-health', scheme: 'HTTP' });
    expect(container.env).toContainEqual({ name: 'TOLLGATE_HEALTH_PORT', value: '15181' });
    expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(deployment.spec!.template.spec!.automountServiceAccountToken).toBe(false);
    expect(deployment.spec!.template.metadata!.labels!['app.kubernetes.io/part-of']).toBe('tollgate');

    const core = kc.makeApiClient(CoreV1Api);
    const service = await core.readNamespacedService({ namespace: NS, name: 'tollgate-server' });
    expect(service.spec?.selector).toEqual({ 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'server' });
    expect(service.spec?.ports).toEqual([expect.objectContaining({ name: 'http', port: 80, targetPort: 'http' })]);
    const configMap = await core.readNamespacedConfigMap({ namespace: NS, name: 'tollgate-server' });
    expect(parseYaml(configMap.data!['tollgate.yaml']!)).toMatchObject({ mode: 'server' });
    const proxyConfig = await cp.kubectl(['get', 'proxyconfig', '-n', NS, 'tollgate-server', '-o', 'jsonpath={.spec.upstreams.alpha.location}']);
    expect(proxyConfig.stdout).toBe('us-central1');
    const account = await core.readNamespacedServiceAccount({ namespace: NS, name: 'tollgate-server' });
    expect(account.metadata?.annotations?.['iam.gke.io/gcp-service-account']).toBe('tollgate@proj.iam.gserviceaccount.com');

    const pdb = await kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ namespace: NS, name: 'tollgate-server' });
    expect(pdb.spec?.minAvailable).toBe(1);
    const hpa = await kc.makeApiClient(AutoscalingV2Api).readNamespacedHorizontalPodAutoscaler({ namespace: NS, name: 'tollgate-server' });
    expect(hpa.spec).toMatchObject({ minReplicas: 2, maxReplicas: 6, scaleTargetRef: { kind: 'Deployment', name: 'tollgate-server' } });
  });
});
