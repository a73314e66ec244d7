// Helpers for cluster tests of the operator and the config push: install the CRDs and the chart's RBAC for the
// operator, run `tollgate operator` as a child process (as the chart's ServiceAccount), create pods with service accounts
// and mint their projected tokens through the TokenRequest API, and wait for things to happen.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { BUDGET_POLICY, crdManifests, PROXY_CONFIG, type ProxyConfig, type ProxyConfigSpec } from '../../crds/index.ts';
import { KubeApi } from '../../kube-client/api-client.ts';
import type { ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { waitFor } from '../support/wait-for.ts';
import { asChartServiceAccount, CHART_NAMES } from './chart-rbac.ts';
import { crdEstablished } from './crd-established.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = join(ROOT, 'cmd/tollgate.ts');
export const OPERATOR_NAMESPACE = 'tollgate-system';

/** The tests' one polling helper (test/support/wait-for.ts), under the name these cluster tests have always used. */
export { waitFor as eventually };

export async function apply(cp: ControlPlane, objects: object[] | string): Promise<void> {
  const input = typeof objects === 'string' ? objects : objects.map((o) => stringify(o)).join('---\n');
  const result = await cp.kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], { input });
  if (result.code !== 0) throw new Error(`kubectl apply failed: ${result.stderr}`);
}

/** CRDs, the operator namespace and the chart's operator RBAC; returns a kubeconfig file for the chart's operator ServiceAccount. */
export async function installOperatorPrerequisites(cp: ControlPlane, workDir: string, chartValues: Record<string, string> = {}): Promise<string> {
  await apply(cp, crdManifests());
  await crdEstablished(cp.kubeConfig, `${PROXY_CONFIG.plural}.${PROXY_CONFIG.group}`);
  await crdEstablished(cp.kubeConfig, `${BUDGET_POLICY.plural}.${BUDGET_POLICY.group}`);
  await apply(cp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OPERATOR_NAMESPACE } }]);
  const kc = await asChartServiceAccount(cp, 'operator', { namespace: OPERATOR_NAMESPACE, set: chartValues });
  const path = join(workDir, 'operator.kubeconfig');
  writeFileSync(path, kc.exportConfig(), { mode: 0o600 });
  return path;
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export interface OperatorProcess extends ManagedProcess {
  identity: string;
  kill(): void;
}

/** `node cmd/tollgate.ts operator ...` as a child that never outlives the test. */
export function startOperatorProcess(opts: {
  kubeconfig: string;
  identity: string;
  grpcPort: number;
  logDir: string;
  /** The pod IP the replica publishes as the push Service's endpoint while it leads (ADR 0721). */
  podIP?: string;
  extraArgs?: string[];
}): OperatorProcess {
  const proc = startManagedProcess({
    name: `operator ${opts.identity}`,
    command: process.execPath,
    args: [
      CLI,
      'operator',
      `--kubeconfig=${opts.kubeconfig}`,
      `--namespace=${OPERATOR_NAMESPACE}`,
      `--identity=${opts.identity}`,
      '--grpc-host=127.0.0.1',
      `--grpc-port=${opts.grpcPort}`,
      '--log-level=debug',
      // Every test operator gets a loopback health port of its own (two run at once in failover tests).
      '--health-host=127.0.0.1',
      '--health-port=0',
      ...(opts.podIP ? [`--pod-ip=${opts.podIP}`] : []),
      ...(opts.extraArgs ?? []),
    ],
    logPath: join(opts.logDir, `${opts.identity}.log`),
  });
  return Object.assign(proc, {
    identity: opts.identity,
    kill() {
      try {
        process.kill(-proc.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    },
  });
}

export async function leaseHolder(api: KubeApi, name = 'tollgate-operator'): Promise<string | undefined> {
  try {
    const lease = await api.get<{ spec?: { holderIdentity?: string } }>(`/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/${name}`);
    return lease.spec?.holderIdentity || undefined;
  } catch {
    return undefined;
  }
}

/** The CA the operator generated for its push server (tollgate-operator-tls), written to a file. */
export async function operatorCaFile(api: KubeApi, dir: string): Promise<string> {
  const secret = await waitFor('the operator TLS Secret', async () => {
    const s = await api.get<{ data?: Record<string, string> }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/secrets/tollgate-operator-tls`);
    return s.data?.['ca.crt'] ? s : undefined;
  });
  const path = join(dir, 'operator-ca.crt');
  writeFileSync(path, Buffer.from(secret.data!['ca.crt']!, 'base64'));
  return path;
}

export function proxyConfigPath(namespace: string, name?: string): string {
  const base = `/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}/namespaces/${namespace}/${PROXY_CONFIG.plural}`;
  return name ? `${base}/${name}` : base;
}

export async function putProxyConfig(api: KubeApi, namespace: string, name: string, spec: ProxyConfigSpec, annotations?: Record<string, string>): Promise<ProxyConfig> {
  const body = { apiVersion: PROXY_CONFIG.apiVersion, kind: PROXY_CONFIG.kind, metadata: { name, namespace, ...(annotations ? { annotations } : {}) }, spec };
  try {
    return await api.post<ProxyConfig>(proxyConfigPath(namespace), body);
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 409) throw error;
    // Replace the whole spec without a read-modify-write race against the operator's status writes.
    return api.patch<ProxyConfig>(proxyConfigPath(namespace, name), [{ op: 'replace', path: '/spec', value: spec }], { contentType: 'application/json-patch+json' });
  }
}

export function getProxyConfig(api: KubeApi, namespace: string, name: string): Promise<ProxyConfig> {
  return api.get<ProxyConfig>(proxyConfigPath(namespace, name));
}

export function readyCondition(pc: ProxyConfig) {
  return pc.status?.conditions?.find((c) => c.type === 'Ready');
}

export interface EventRecord {
  reason: string;
  type: string;
  note?: string;
  regarding: { name: string; kind: string };
  related?: { name: string; kind: string };
  reportingController?: string;
}

export async function eventsFor(api: KubeApi, namespace: string, name: string): Promise<EventRecord[]> {
  const list = await api.get<{ items: EventRecord[] }>(`/apis/events.k8s.io/v1/namespaces/${namespace}/events`);
  return list.items.filter((e) => e.regarding?.name === name);
}

export async function ensureNamespace(api: KubeApi, name: string): Promise<void> {
  try {
    await api.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 409) throw error;
  }
}

/**
 * Creates or replaces a Secret. It carries the label tollgate.dev/credentials=true unless `labelled` is false:
 * the operator sees only labelled Secrets (docs/decisions/0722).
 */
export async function putSecret(api: KubeApi, namespace: string, name: string, data: Record<string, string>, opts: { labelled?: boolean } = {}): Promise<void> {
  const labels = opts.labelled === false ? {} : { 'tollgate.dev/credentials': 'true' };
  const body = { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace, labels }, stringData: data };
  try {
    await api.post(`/api/v1/namespaces/${namespace}/secrets`, body);
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 409) throw error;
    await api.put(`/api/v1/namespaces/${namespace}/secrets/${name}`, body);
  }
}

export interface PodWithToken {
  namespace: string;
  name: string;
  uid: string;
  /** A projected service-account token (audience tollgate) bound to the pod, written to a file. */
  tokenFile: string;
}

/**
 * A pod (it stays Pending: there is no scheduler) running as service account `app`, and a token for it from
 * the TokenRequest API, bound to the pod as the kubelet would mint it.
 */
export async function podWithToken(
  api: KubeApi,
  opts: { namespace: string; name: string; annotations?: Record<string, string>; labels?: Record<string, string>; dir: string; audience?: string },
): Promise<PodWithToken> {
  try {
    await api.post(`/api/v1/namespaces/${opts.namespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'app' } });
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 409) throw error;
  }
  const pod = await api.post<{ metadata: { uid: string } }>(`/api/v1/namespaces/${opts.namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: opts.name, ...(opts.annotations ? { annotations: opts.annotations } : {}), ...(opts.labels ? { labels: opts.labels } : {}) },
    spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
  });
  const request = await api.post<{ status: { token: string } }>(`/api/v1/namespaces/${opts.namespace}/serviceaccounts/app/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: [opts.audience ?? 'tollgate'],
      expirationSeconds: 3600,
      boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: opts.name, uid: pod.metadata.uid },
    },
  });
  const tokenFile = join(opts.dir, `${opts.namespace}-${opts.name}-${opts.audience ?? 'tollgate'}.token`);
  writeFileSync(tokenFile, request.status.token, { mode: 0o600 });
  return { namespace: opts.namespace, name: opts.name, uid: pod.metadata.uid, tokenFile };
}

export { KubeApi };

/** The chart's operator Deployment as an object only (no controller-manager runs it here), for owner references; its UID. */
export async function postOperatorDeployment(api: KubeApi): Promise<string> {
  const deployment = await api.post<{ metadata: { uid: string } }>(`/apis/apps/v1/namespaces/${OPERATOR_NAMESPACE}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: CHART_NAMES.operator },
    spec: {
      selector: { matchLabels: { app: 'tollgate-operator' } },
      template: { metadata: { labels: { app: 'tollgate-operator' } }, spec: { containers: [{ name: 'operator', image: 'ghcr.io/tollgate/tollgate:0.1.0' }] } },
    },
  });
  return deployment.metadata.uid;
}

/**
 * `tollgate proxy` as the sidecar of `pod`, as the webhook starts it: the operator's address and CA, the pod's
 * token, its name and namespace, and a state directory under `dir/<pod>` (started again for the same pod, it
 * keeps that directory: a container restart).
 */
export async function startPodSidecar(opts: { pod: PodWithToken; dir: string; grpcPort: number; caFile: string }): Promise<{ proc: ManagedProcess; url: string; pod: string }> {
  const { pod } = opts;
  const port = await freePort();
  const work = join(opts.dir, pod.name);
  mkdirSync(work, { recursive: true });
  const proc = startManagedProcess({
    name: `sidecar ${pod.name}`,
    command: 'sh',
    args: ['-c', `cd "${work}" && exec "${process.execPath}" "${CLI}" proxy --port ${port}`],
    logPath: join(opts.dir, `${pod.name}.log`),
    env: {
      PATH: process.env.PATH,
      HOME: work,
      TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${opts.grpcPort}`,
      TOLLGATE_OPERATOR_CA_FILE: opts.caFile,
      TOLLGATE_TOKEN_FILE: pod.tokenFile,
      TOLLGATE_STATE_DIR: join(work, 'state'),
      TOLLGATE_POD_NAME: pod.name,
      TOLLGATE_POD_NAMESPACE: pod.namespace,
    },
  });
  return { proc, url: `http://127.0.0.1:${port}`, pod: pod.name };
}
