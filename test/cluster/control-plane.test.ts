// Proves the test control plane behaves like a real cluster in the ways the other cluster tests rely on:
// service-account tokens with audiences, RBAC for client-certificate users, kubectl, an API server restart
// that keeps data, and a stop() that leaves no process behind.

import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ApiException, AuthenticationV1Api, CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';

const NAMESPACE = 'harness-check';

/** Command lines of every live process that mentions marker. */
function processesMentioning(marker: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmdline.includes(marker)) found.push(`${entry}: ${cmdline}`);
    } catch {
      // exited while we looked
    }
  }
  return found;
}

async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (err) {
    if (err instanceof ApiException) return err.code;
    throw err;
  }
}

describe('test control plane', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;

  beforeAll(async () => {
    cp = await startControlPlane();
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  });

  afterAll(async () => {
    await cp?.stop();
  });

  it('uses the binaries that global-setup provided', () => {
    expect(cp.binDir).toBe(inject('controlPlaneBinDir'));
    expect(cp.server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('reports the pinned release on /version, not 0.0.0', async () => {
    const version = (await cp.kubectl(['version', '-o', 'json'])).stdout;
    const parsed = JSON.parse(version) as { serverVersion: { gitVersion: string; major: string } };
    expect(parsed.serverVersion.major).toBe('1');
    expect(parsed.serverVersion.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
  });

  it('mints an audience-bound, pod-bound token and reviews it', async () => {
    await core.createNamespacedServiceAccount({ namespace: NAMESPACE, body: { metadata: { name: 'metered' } } });
    const pod = await core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'app' },
        spec: { serviceAccountName: 'metered', containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
      },
    });
    const tokenRequest = await core.createNamespacedServiceAccountToken({
      name: 'metered',
      namespace: NAMESPACE,
      body: {
        spec: {
          audiences: ['tollgate'],
          expirationSeconds: 600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'app', uid: pod.metadata!.uid! },
        },
      },
    });
    const token = tokenRequest.status?.token;
    expect(token).toBeTruthy();

    const auth = cp.kubeConfig.makeApiClient(AuthenticationV1Api);
    const review = await auth.createTokenReview({ body: { spec: { token: token!, audiences: ['tollgate'] } } });
    expect(review.status?.authenticated).toBe(true);
    expect(review.status?.user?.username).toBe(`system:serviceaccount:${NAMESPACE}:metered`);
    expect(review.status?.audiences).toEqual(['tollgate']);
    expect(review.status?.user?.extra?.['authentication.kubernetes.io/pod-name']).toEqual(['app']);

    // The same token presented for another audience is refused: audiences are really checked.
    const wrongAudience = await auth.createTokenReview({ body: { spec: { token: token!, audiences: ['someone-else'] } } });
    expect(wrongAudience.status?.authenticated ?? false).toBe(false);
    expect(wrongAudience.status?.error).toMatch(/audience/);
  });

  it('applies RBAC to client-certificate users, with groups taken from the certificate', async () => {
    const user: KubeConfig = await cp.userKubeConfig('alice', ['tollgate-testers']);
    const asAlice = user.makeApiClient(CoreV1Api);
    expect(await statusOf(asAlice.listNamespacedConfigMap({ namespace: NAMESPACE }))).toBe(403);

    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'testers-read-configmaps' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'tollgate-testers' }],
      },
    });
    expect(await statusOf(asAlice.listNamespacedConfigMap({ namespace: NAMESPACE }))).toBe(200);
    // The grant is exactly as wide as the Role: other namespaces and verbs stay forbidden.
    expect(await statusOf(asAlice.listNamespacedConfigMap({ namespace: 'default' }))).toBe(403);
    expect(await statusOf(asAlice.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'x' } } }))).toBe(403);
  });

  it('runs kubectl against the admin kubeconfig', async () => {
    const res = await cp.kubectl(['get', 'namespaces', '-o', 'name']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout.split('\n')).toContain(`namespace/${NAMESPACE}`);

    const applied = await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'from-stdin', namespace: NAMESPACE } }),
    });
    expect(applied.code).toBe(0);
    const read = await core.readNamespacedConfigMap({ name: 'from-stdin', namespace: NAMESPACE });
    expect(read.metadata?.name).toBe('from-stdin');

    const failed = await cp.kubectl(['get', 'configmap', 'does-not-exist', '-n', NAMESPACE]);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toContain('not found');
  });

  it('installs a Helm chart whose kubeVersion constraint needs the real server version', async () => {
    const chart = mkdtempSync(join(tmpdir(), 'harness-chart-'));
    try {
      mkdirSync(join(chart, 'templates'));
      writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: harness-check\nversion: 0.1.0\nkubeVersion: ">=1.33.0-0"\n');
      writeFileSync(join(chart, 'templates', 'configmap.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-helm\ndata:\n  release: {{ .Release.Name | quote }}\n');
      const res = await cp.helm(['install', 'demo', chart, '--namespace', NAMESPACE]);
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
      const created = await core.readNamespacedConfigMap({ name: 'from-helm', namespace: NAMESPACE });
      expect(created.data).toEqual({ release: 'demo' });
      const list = await cp.helm(['list', '--namespace', NAMESPACE, '-o', 'json']);
      expect((JSON.parse(list.stdout) as { name: string; status: string }[]).map((r) => [r.name, r.status])).toEqual([['demo', 'deployed']]);
    } finally {
      rmSync(chart, { recursive: true, force: true });
    }
  });

  it('keeps data and serves the same clients after restartApiServer()', async () => {
    await core.createNamespacedConfigMap({
      namespace: NAMESPACE,
      body: { metadata: { name: 'survives-restart' }, data: { answer: '42' } },
    });
    await cp.restartApiServer();
    const read = await core.readNamespacedConfigMap({ name: 'survives-restart', namespace: NAMESPACE });
    expect(read.data).toEqual({ answer: '42' });
    const sa = await core.readNamespacedServiceAccount({ name: 'metered', namespace: NAMESPACE });
    expect(sa.metadata?.name).toBe('metered');
  });

  it('stop() leaves no etcd or kube-apiserver process and removes its folders', async () => {
    const marker = basename(cp.workDir);
    const before = processesMentioning(marker);
    expect(before.some((p) => p.includes('/etcd '))).toBe(true);
    expect(before.some((p) => p.includes('/kube-apiserver '))).toBe(true);

    await cp.stop();

    expect(processesMentioning(marker)).toEqual([]);
    expect(existsSync(cp.workDir)).toBe(false);
    await cp.stop(); // idempotent
  });
});
