// The Helm chart: lint and template with several values files (a bad one must fail with the schema's
// message), then `helm install` into a real kube-apiserver and the resources it created. Finally the issue's
// Done-when: after the install, an annotated pod created through the API server is stored with the sidecar
// exactly as docs/webhook-and-chart.md documents it.
//
// This control plane has no kubelet or scheduler, so the installed webhook Deployment never runs a pod.
// The webhook therefore runs in this process, started with the very flags the chart rendered into that
// Deployment and authenticated as the chart's webhook ServiceAccount (so its RBAC is what is exercised), and
// the installed MutatingWebhookConfiguration's clientConfig is re-pointed from the Service to
// https://127.0.0.1:PORT/mutate. Everything else (selectors, failurePolicy, caBundle publication, namespace
// exclusions) is the chart's own configuration.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1Container,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { parseWebhookOptions } from '../../webhook/src/webhook-options.ts';
import { parseOperatorArgs } from '../../operator/src/options.ts';
import { planInjection } from '../../webhook/src/inject.ts';
import type { WebhookServer } from '../../webhook/src/webhook-server.ts';
import { appPod, capturedLogger, createPod, ensureNamespace, operatorCaFile, startLocalWebhook, waitFor } from './webhook-fixtures.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');
const RELEASE = 'tollgate';
const NS = 'tollgate-system';
const KUBE_VERSION = ['--kube-version', '1.34.0'];

let cp: ControlPlane;
let kc: KubeConfig;
let webhook: WebhookServer | undefined;

type Manifest = { kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> }; [key: string]: unknown };

async function template(...values: string[]): Promise<Manifest[]> {
  return templateWith(...values.flatMap((v) => ['-f', join(CHART, 'ci', v)]));
}

/** `helm template` of the release with these flags (values files, --set); it must render without a word on stderr. */
async function templateWith(...flags: string[]): Promise<Manifest[]> {
  const result = await cp.helm(['template', RELEASE, CHART, '-n', NS, ...KUBE_VERSION, ...flags]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJSON() as Manifest)
    .filter(Boolean);
}

function find(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  if (!found) throw new Error(`${kind} ${name} not rendered`);
  return found;
}

function containerArgs(deployment: Manifest | V1Deployment): string[] {
  return (deployment as V1Deployment).spec!.template.spec!.containers[0]!.args!;
}

beforeAll(async () => {
  cp = await startControlPlane();
  kc = cp.kubeConfig;
});

afterAll(async () => {
  await webhook?.stop();
  await cp?.stop();
});

describe('helm lint and template', () => {
  it.each(['default-values.yaml', 'cert-manager-values.yaml', 'custom-values.yaml'])('lints with %s', async (file) => {
    const result = await cp.helm(['lint', CHART, '--strict', ...KUBE_VERSION, '-f', join(CHART, 'ci', file)]);
    expect(result.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(result.code).toBe(0);
  });

  it('renders the defaults: two webhook entries and the self-test one, self-managed TLS, 2 replicas each, PDBs', async () => {
    const manifests = await template('default-values.yaml');
    const config = find(manifests, 'MutatingWebhookConfiguration', RELEASE) as Manifest & { webhooks: Array<Record<string, unknown>> };
    expect(config.webhooks.map((w) => w.name)).toEqual(['namespace.inject.tollgate.dev', 'pod.inject.tollgate.dev', 'selftest.inject.tollgate.dev']);
    // The self-test entry (ADR 0812): only labelled pods of the release namespace, and never Tollgate's own.
    expect(config.webhooks[2]).toMatchObject({
      failurePolicy: 'Fail',
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [NS] }] },
      objectSelector: {
        matchExpressions: [
          { key: 'tollgate.dev/selftest', operator: 'In', values: ['true'] },
          { key: 'app.kubernetes.io/part-of', operator: 'NotIn', values: ['tollgate'] },
        ],
      },
      clientConfig: { service: { name: 'tollgate-webhook', namespace: NS, path: '/mutate' } },
    });
    for (const w of config.webhooks.slice(0, 2)) {
      expect(w).toMatchObject({
        sideEffects: 'None',
        timeoutSeconds: 5,
        admissionReviewVersions: ['v1'],
        reinvocationPolicy: 'IfNeeded',
        failurePolicy: 'Ignore',
        rules: [{ operations: ['CREATE'], resources: ['pods'] }],
        objectSelector: { matchExpressions: [{ key: 'app.kubernetes.io/part-of', operator: 'NotIn', values: ['tollgate'] }] },
        clientConfig: { service: { name: 'tollgate-webhook', namespace: NS, path: '/mutate' } },
      });
    }
    expect(config.metadata.annotations).toBeUndefined();
    for (const name of ['tollgate-webhook', 'tollgate-operator']) {
      expect(find(manifests, 'Deployment', name)).toMatchObject({ spec: { replicas: 2 } });
      expect(find(manifests, 'PodDisruptionBudget', name)).toMatchObject({ spec: { minAvailable: 1 } });
      expect(find(manifests, 'Service', name)).toBeDefined();
    }
    expect(containerArgs(find(manifests, 'Deployment', 'tollgate-webhook'))).toContain('--cert-mode=self-managed');
    expect(manifests.filter((m) => m.kind === 'Certificate')).toEqual([]);
  });

  it('renders cert-manager mode: Certificates, CA injection annotation, file certificates, no webhook Secret RBAC', async () => {
    const manifests = await template('cert-manager-values.yaml');
    const config = find(manifests, 'MutatingWebhookConfiguration', RELEASE) as Manifest & { webhooks: Array<Record<string, unknown>> };
    expect(config.metadata.annotations).toEqual({ 'cert-manager.io/inject-ca-from': `${NS}/tollgate-webhook` });
    expect(config.webhooks.map((w) => w.name)).toEqual(['namespace.inject.tollgate.dev', 'selftest.inject.tollgate.dev']);
    expect(config.webhooks[0]).toMatchObject({ failurePolicy: 'Fail' });
    expect(find(manifests, 'Certificate', 'tollgate-webhook')).toMatchObject({
      spec: {
        secretName: 'tollgate-webhook-tls',
        issuerRef: { kind: 'ClusterIssuer', name: 'corporate-ca' },
        dnsNames: [`tollgate-webhook.${NS}.svc`, `tollgate-webhook.${NS}.svc.cluster.local`],
      },
    });
    expect(containerArgs(find(manifests, 'Deployment', 'tollgate-webhook'))).toEqual(expect.arrayContaining(['--cert-mode=files', '--failure-policy=Fail']));
    expect(containerArgs(find(manifests, 'Deployment', 'tollgate-operator'))).toContain('--tls-cert=/etc/tollgate/operator-tls/tls.crt');
    expect(containerArgs(find(manifests, 'Deployment', 'tollgate-operator'))).toContain('--tls-ca=/etc/tollgate/operator-tls/ca.crt');
    // The webhook's Role only reads the CA the operator publishes: no Secret or Deployment access.
    const role = find(manifests, 'Role', 'tollgate-webhook') as Manifest & { rules: Array<{ resources: string[] }> };
    expect(role.rules.flatMap((r) => r.resources)).toEqual(['configmaps']);
    // The webhook creates nothing here (cert-manager owns its Secret), so it needs no owner and no Deployment access.
    expect(containerArgs(find(manifests, 'Deployment', 'tollgate-webhook'))).not.toContain('--owner-deployment=tollgate-webhook');
  });

  it('renders custom values into the sidecar flags, the selector and default ProxyConfigs', async () => {
    const manifests = await template('custom-values.yaml');
    const args = containerArgs(find(manifests, 'Deployment', 'tollgate-webhook'));
    expect(args).toEqual(
      expect.arrayContaining([
        '--sidecar-image=registry.example.com/tollgate/sidecar:1.2.3',
        '--sidecar-cpu-request=100m',
        '--sidecar-memory-limit=512Mi',
        '--native-sidecar=false',
        '--sidecar-image-pull-policy=Always',
        '--log-level=debug',
      ]),
    );
    const config = find(manifests, 'MutatingWebhookConfiguration', RELEASE) as Manifest & { webhooks: Array<{ timeoutSeconds: number; namespaceSelector: unknown }> };
    expect(config.webhooks[0]!.timeoutSeconds).toBe(10);
    expect(config.webhooks[0]!.namespaceSelector).toEqual({
      matchExpressions: [
        { key: 'tollgate.dev/injection', operator: 'In', values: ['enabled'] },
        { key: 'team', operator: 'In', values: ['llm'] },
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', NS] },
      ],
    });
    expect(manifests.filter((m) => m.kind === 'ProxyConfig').map((m) => m.metadata.namespace)).toEqual(['shop', 'research']);
    expect(find(manifests, 'Deployment', 'tollgate-operator')).toMatchObject({ spec: { replicas: 3 } });
    expect(find(manifests, 'Role', 'tollgate-operator')).toBeDefined();
  });

  it('grants the Tetragon bypass policy verbs only with operator.bypassEnforcement: true', async () => {
    const rules = (m: Manifest[]) =>
      (find(m, 'ClusterRole', 'tollgate-operator') as unknown as { rules: { apiGroups: string[] }[] }).rules.filter((r) => r.apiGroups.includes('cilium.io'));
    expect(rules(await template('default-values.yaml'))).toEqual([]);
    expect(rules(await templateWith('--set', 'operator.bypassEnforcement=true'))).toEqual([
      { apiGroups: ['cilium.io'], resources: ['tracingpoliciesnamespaced'], verbs: ['create', 'patch', 'delete'] },
    ]);
  });

  it('refuses bad values at install time with the schema message naming each field', async () => {
    const result = await cp.helm(['template', RELEASE, CHART, '-n', NS, ...KUBE_VERSION, '-f', join(CHART, 'ci', 'bad-values.yaml.invalid')]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toContain("at '/webhook/timeoutSeconds': maximum: got 30, want 10");
    expect(result.stderr).toContain("at '/certificates/mode': value must be one of 'self-managed', 'cert-manager'");
  });
});

describe('budgets.store redis', () => {
  it('gives injected sidecars the store the server counts in: the webhook started with the rendered flags injects its URL and key prefix', async () => {
    const manifests = await templateWith(
      '--set',
      'server.enabled=true',
      '--set-json',
      'server.config.server.auth={"accessTokens":{}}',
      '--set',
      'budgets.store=redis',
      '--set',
      'budgets.redis.deploy=true',
      '--set',
      'budgets.redis.keyPrefix=acme:spend',
    );
    // The Deployment's args: the command, then the flags.
    const options = parseWebhookOptions(containerArgs(find(manifests, 'Deployment', 'tollgate-webhook')).slice(1), { POD_NAMESPACE: NS });
    if (options === 'help') throw new Error('help');
    const decision = planInjection({
      pod: appPod('web-1'),
      namespace: 'shop',
      namespaceLabels: { 'tollgate.dev/injection': 'enabled' },
      ownNamespace: NS,
      defaults: options.sidecar,
      nativeSidecarSupported: true,
      operatorCaPem: '-----BEGIN CERTIFICATE-----\nMIIBtestCA\n-----END CERTIFICATE-----\n',
    });
    if (decision.kind !== 'inject') throw new Error(`not injected: ${JSON.stringify(decision)}`);
    // A native sidecar is added as an init container (or as the pod's first list of them).
    const container = decision.patch.flatMap((op) => ('value' in op ? [op.value].flat() : [])).find((v) => (v as V1Container | null)?.name === 'tollgate-proxy') as
      V1Container | undefined;
    // The release's own Redis (the Service <release>-redis), under the prefix the server's ledger uses; no password.
    expect(container?.env?.filter((e) => e.name.startsWith('TOLLGATE_BUDGET_'))).toEqual([
      { name: 'TOLLGATE_BUDGET_REDIS_URL', value: `redis://tollgate-redis.${NS}.svc:6379` },
      { name: 'TOLLGATE_BUDGET_REDIS_KEY_PREFIX', value: 'acme:spend' },
    ]);
    // The central server's config names the same store and prefix: one set of counters for all.
    const serverConfig = manifests.find((m) => m.kind === 'ConfigMap' && JSON.stringify(m).includes('kind: redis'));
    expect(JSON.stringify(serverConfig)).toContain(`url: redis://tollgate-redis.${NS}.svc:6379`);
    expect(JSON.stringify(serverConfig)).toContain('keyPrefix: acme:spend');
    // A password only by reference to a Secret in the pod's namespace.
    const withSecret = await templateWith(
      '--set',
      'budgets.store=redis',
      '--set',
      'budgets.redis.url=redis://redis.store.svc:6379',
      '--set',
      'budgets.redis.passwordSecret.name=redis-auth',
    );
    const secretFlags = containerArgs(find(withSecret, 'Deployment', 'tollgate-webhook'));
    expect(secretFlags).toEqual(
      expect.arrayContaining([
        '--budget-redis-url=redis://redis.store.svc:6379',
        '--budget-redis-key-prefix=tollgate:budgets',
        '--budget-redis-password-secret=redis-auth/password',
      ]),
    );
    // The operator keeps the cluster ledger on the same store (ADR 1314), its password from the Secret in the
    // release namespace, by reference only.
    const operator = find(withSecret, 'Deployment', 'tollgate-operator') as V1Deployment;
    const operatorEnv = operator.spec!.template.spec!.containers[0]!.env!;
    expect(operatorEnv.find((e) => e.name === 'TOLLGATE_LEDGER_REDIS_PASSWORD')).toEqual({
      name: 'TOLLGATE_LEDGER_REDIS_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'redis-auth', key: 'password' } },
    });
    const operatorSettings = parseOperatorArgs(containerArgs(operator).slice(1), { POD_NAMESPACE: NS, TOLLGATE_LEDGER_REDIS_PASSWORD: 'from-the-secret' }, 'host', 1);
    expect(operatorSettings.ledgerRedis).toEqual({ url: 'redis://redis.store.svc:6379', keyPrefix: 'tollgate:budgets', passwordEnv: 'TOLLGATE_LEDGER_REDIS_PASSWORD' });
    // The default store, configmaps, gives the sidecars none, and the operator keeps its ConfigMaps.
    const defaultOperator = containerArgs(find(await template('default-values.yaml'), 'Deployment', 'tollgate-operator')).slice(1);
    expect(parseOperatorArgs(defaultOperator, { POD_NAMESPACE: NS }, 'host', 1).ledgerRedis).toBeUndefined();
    const defaults = parseWebhookOptions(containerArgs(find(await template('default-values.yaml'), 'Deployment', 'tollgate-webhook')).slice(1), { POD_NAMESPACE: NS });
    expect(defaults !== 'help' && defaults.sidecar.budgetStore).toBeUndefined();
  });
});

describe('helm install into the real control plane', () => {
  beforeAll(async () => {
    await ensureNamespace(kc, 'shop');
    const result = await cp.helm([
      'install',
      RELEASE,
      CHART,
      '-n',
      NS,
      '--create-namespace',
      // No kube-controller-manager runs here, so the post-install self-test Job would never run (the kind suite runs it).
      '--no-hooks',
      '--set',
      'defaultProxyConfig.enabled=true',
      '--set',
      'defaultProxyConfig.namespaces={shop}',
      '--set-json',
      'budgetPolicies=[{"name":"team-monthly","namespace":"shop","spec":{"users":["*"],"limitUsd":"25","alertThresholds":[80,100]}}]',
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('STATUS: deployed');
    expect(result.stdout).toContain('kubectl label namespace NAMESPACE tollgate.dev/injection=enabled');
  });

  it('created the CRD, Deployments, Services, PDBs, RBAC, webhook configuration and the default ProxyConfig', async () => {
    const crd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: 'proxyconfigs.tollgate.dev' });
    expect(crd.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');

    const apps = kc.makeApiClient(AppsV1Api);
    for (const name of ['tollgate-webhook', 'tollgate-operator']) {
      const d = await apps.readNamespacedDeployment({ namespace: NS, name });
      expect(d.spec?.replicas).toBe(2);
      expect(d.spec?.template.metadata?.labels?.['app.kubernetes.io/part-of']).toBe('tollgate');
      expect(d.spec?.template.spec?.affinity?.podAntiAffinity).toBeDefined();
      expect(d.spec?.template.spec?.containers[0]?.readinessProbe).toBeDefined();
      const pdb = await kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ namespace: NS, name });
      expect(pdb.spec?.minAvailable).toBe(1);
    }
    const webhookSvc = await kc.makeApiClient(CoreV1Api).readNamespacedService({ namespace: NS, name: 'tollgate-webhook' });
    expect(webhookSvc.spec?.selector?.['app.kubernetes.io/component']).toBe('webhook');
    // The push Service has no selector: the leader writes its EndpointSlice (ADR 0721).
    const pushSvc = await kc.makeApiClient(CoreV1Api).readNamespacedService({ namespace: NS, name: 'tollgate-operator' });
    expect(pushSvc.spec?.selector).toBeUndefined();
    expect(pushSvc.spec?.ports).toEqual([expect.objectContaining({ name: 'grpc', port: 8443 })]);

    // The operator's probes go to its health port, which standbys serve too (ADR 0720).
    const operator = (await apps.readNamespacedDeployment({ namespace: NS, name: 'tollgate-operator' })).spec?.template.spec?.containers[0];
    expect(operator?.args).toContain('--health-port=8081');
    expect(operator?.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health', scheme: 'HTTP' });
    expect(operator?.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health', scheme: 'HTTP' });
    expect(operator?.ports).toContainEqual(expect.objectContaining({ name: 'health', containerPort: 8081 }));
    expect(operator?.args).toContain('--push-service=tollgate-operator');
    expect(operator?.env).toContainEqual({ name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } });
    const canOperator = async (args: string[]) => (await cp.kubectl(['auth', 'can-i', ...args, `--as=system:serviceaccount:${NS}:tollgate-operator`])).stdout.trim();
    expect(await canOperator(['update', 'endpointslices.discovery.k8s.io/tollgate-operator', '-n', NS])).toBe('yes');
    expect(await canOperator(['create', 'endpointslices.discovery.k8s.io', '-n', NS])).toBe('yes');
    expect(await canOperator(['update', 'endpointslices.discovery.k8s.io/other', '-n', NS])).toBe('no');
    expect(await canOperator(['update', 'endpointslices.discovery.k8s.io/tollgate-operator', '-n', 'shop'])).toBe('no');

    // Budgets: the BudgetPolicy CRD, the policy from the values, and the operator's RBAC for both and its ledger.
    const budgetCrd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: 'budgetpolicies.tollgate.dev' });
    expect(budgetCrd.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');
    const policy = await cp.kubectl(['get', 'budgetpolicy', 'team-monthly', '-n', 'shop', '-o', 'jsonpath={.spec.limitUsd}/{.spec.period}']);
    expect(policy.stdout).toBe('25/month');
    expect(await canOperator(['watch', 'budgetpolicies.tollgate.dev', '-A'])).toBe('yes');
    expect(await canOperator(['patch', 'budgetpolicies.tollgate.dev', '--subresource=status', '-n', 'shop'])).toBe('yes');
    expect(await canOperator(['update', 'configmaps', '-n', NS])).toBe('yes');
    expect(await canOperator(['update', 'configmaps', '-n', 'shop'])).toBe('no');

    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    // Nothing of Cilium's by default: the Tetragon bypass policy needs operator.bypassEnforcement (ADR 1602). Read
    // from the role: `kubectl auth can-i` cannot name a resource whose CRD this cluster does not have.
    const cilium = (await rbac.readClusterRole({ name: 'tollgate-operator' })).rules!.filter((r) => r.apiGroups?.includes('cilium.io'));
    expect(cilium).toEqual([]);
    const webhookRole = await rbac.readClusterRole({ name: 'tollgate-webhook' });
    expect(webhookRole.rules).toContainEqual(expect.objectContaining({ resources: ['mutatingwebhookconfigurations'], resourceNames: ['tollgate'], verbs: ['get', 'patch'] }));
    // Nothing cluster-wide on Secrets for the webhook.
    expect(webhookRole.rules!.some((r) => r.resources?.includes('secrets'))).toBe(false);
    await rbac.readNamespacedRole({ namespace: NS, name: 'tollgate-webhook' });

    // Uninstall leaves nothing behind (ADR 0807): each component names its own Deployment as the owner of what
    // it creates, and may read that one Deployment only. The webhook is Ready once an admission would inject.
    expect(operator?.args).toContain('--owner-deployment=tollgate-operator');
    expect(await canOperator(['get', 'deployments.apps/tollgate-operator', '-n', NS])).toBe('yes');
    expect(await canOperator(['get', 'deployments.apps/tollgate-webhook', '-n', NS])).toBe('no');
    const webhookContainer = (await apps.readNamespacedDeployment({ namespace: NS, name: 'tollgate-webhook' })).spec?.template.spec?.containers[0];
    expect(webhookContainer?.args).toContain('--owner-deployment=tollgate-webhook');
    expect(webhookContainer?.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'https', scheme: 'HTTPS' });
    expect(webhookContainer?.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'https', scheme: 'HTTPS' });
    const canWebhook = async (args: string[]) => (await cp.kubectl(['auth', 'can-i', ...args, `--as=system:serviceaccount:${NS}:tollgate-webhook`])).stdout.trim();
    expect(await canWebhook(['get', 'deployments.apps/tollgate-webhook', '-n', NS])).toBe('yes');
    expect(await canWebhook(['list', 'deployments.apps', '-n', NS])).toBe('no');
    await rbac.readClusterRoleBinding({ name: 'tollgate-operator-tokenreview' });

    const config = await kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: RELEASE });
    expect(config.webhooks?.map((w) => [w.name, w.failurePolicy, w.timeoutSeconds, w.sideEffects])).toEqual([
      ['namespace.inject.tollgate.dev', 'Ignore', 5, 'None'],
      ['pod.inject.tollgate.dev', 'Ignore', 5, 'None'],
      ['selftest.inject.tollgate.dev', 'Fail', 5, 'None'],
    ]);

    const proxyConfig = await kc
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject({ group: 'tollgate.dev', version: 'v1alpha1', namespace: 'shop', plural: 'proxyconfigs', name: 'default' });
    expect((proxyConfig as Manifest).metadata.name).toBe('default');
  });

  it('gives the webhook ServiceAccount exactly the access it needs (as that ServiceAccount)', async () => {
    const can = async (args: string[]) => (await cp.kubectl(['auth', 'can-i', ...args, `--as=system:serviceaccount:${NS}:tollgate-webhook`])).stdout.trim();
    expect(await can(['patch', 'mutatingwebhookconfigurations/tollgate'])).toBe('yes');
    expect(await can(['patch', 'mutatingwebhookconfigurations/other'])).toBe('no');
    expect(await can(['update', 'secrets/tollgate-webhook-tls', '-n', NS])).toBe('yes');
    expect(await can(['get', 'secrets/tollgate-operator-tls', '-n', NS])).toBe('no');
    // The operator's CA comes from the ConfigMap it publishes, watched by name (ADR 0809).
    expect(await can(['watch', 'configmaps/tollgate-operator-ca', '-n', NS])).toBe('yes');
    expect(await can(['get', 'configmaps/other', '-n', NS])).toBe('no');
    expect(await can(['get', 'secrets', '-n', 'shop'])).toBe('no');
    // whether a pod's ProxyConfig enables audit (docs/audit.md)
    expect(await can(['get', 'proxyconfigs.tollgate.dev', '-n', 'shop'])).toBe('yes');
    expect(await can(['list', 'proxyconfigs.tollgate.dev', '-n', 'shop'])).toBe('no');
    expect(await can(['create', 'events.events.k8s.io', '-n', 'shop'])).toBe('yes');
    expect(await can(['create', 'pods', '-n', 'shop'])).toBe('no');
  });

  it('Done-when: an annotated pod is stored with the sidecar exactly as documented', async () => {
    const manifest = (await cp.helm(['get', 'manifest', RELEASE, '-n', NS])).stdout;
    const deployment = parseAllDocuments(manifest)
      .map((d) => d.toJSON() as Manifest)
      .find((m) => m?.kind === 'Deployment' && m.metadata.name === 'tollgate-webhook')!;
    const [command, ...flags] = containerArgs(deployment);
    expect(command).toBe('webhook');

    // The chart's flags, except where the pod would listen and where the mounted operator CA would be.
    const operatorCa = await operatorCaFile();
    const port = await freePort();
    const parsed = parseWebhookOptions([...flags, '--host=127.0.0.1', `--port=${port}`, `--operator-ca-file=${operatorCa.path}`], { POD_NAMESPACE: NS });
    if (parsed === 'help') throw new Error('help');

    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    const installed = await admission.readMutatingWebhookConfiguration({ name: RELEASE });
    await admission.patchMutatingWebhookConfiguration(
      {
        name: RELEASE,
        body: installed.webhooks!.flatMap((_w, i) => [
          { op: 'remove', path: `/webhooks/${i}/clientConfig/service` },
          { op: 'add', path: `/webhooks/${i}/clientConfig/url`, value: `https://127.0.0.1:${port}/mutate` },
        ]),
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );

    const asWebhookSa = await cp.userKubeConfig(`system:serviceaccount:${NS}:tollgate-webhook`, ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated']);
    webhook = await startLocalWebhook(parsed, asWebhookSa, capturedLogger().logger);

    // Until the API server's webhook cache has the new URL and caBundle, Ignore lets pods through untouched.
    let n = 0;
    const pod: V1Pod = await waitFor('an injected pod', async () => {
      const created = await createPod(kc, 'shop', appPod(`chat-${n++}`, { 'tollgate.dev/inject': 'true' }));
      return created.spec?.initContainers?.some((c) => c.name === 'tollgate-proxy') ? created : undefined;
    });
    const stored = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: 'shop', name: pod.metadata!.name! });

    const doc = readFileSync(join(ROOT, 'docs', 'webhook-and-chart.md'), 'utf8');
    const block = /<!-- injected-pod:begin -->\s*```yaml\n([\s\S]*?)```\s*<!-- injected-pod:end -->/.exec(doc);
    if (!block) throw new Error('docs/webhook-and-chart.md lacks the injected-pod block');
    const documented = parseYaml(block[1]!) as V1Pod;
    expect(stored.spec!.initContainers).toMatchObject(documented.spec!.initContainers!);
    expect(stored.spec!.volumes).toMatchObject(documented.spec!.volumes!);
    expect(stored.spec!.serviceAccountName).toBe(documented.spec!.serviceAccountName);
    expect(stored.spec!.containers.map((c) => c.name)).toEqual(documented.spec!.containers.map((c) => c.name));
    expect(JSON.parse(stored.metadata!.annotations!['tollgate.dev/status']!)).toEqual(JSON.parse(documented.metadata!.annotations!['tollgate.dev/status']!));
    expect(stored.metadata!.annotations!['tollgate.dev/operator-ca']).toBe(operatorCa.pem);
  });
});
