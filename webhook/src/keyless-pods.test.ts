// Keyless app containers (docs/security.md): whatever the ProxyConfig holds, the pod the webhook produces gives
// provider keys to the tollgate-proxy container only. The sidecar gets them later, over the operator's
// authenticated push; nothing in the pod spec of any other container names a credential Secret, a key, or a
// volume the sidecar keeps them in.

import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { planInjection, type InjectionInput } from './inject.ts';
import { applyPatch } from '../testdata/apply-patch.ts';
import { TEST_DEFAULTS } from '../testdata/sidecar-defaults.ts';
import { credentialExposure, type Credentials } from '../../test/support/credential-exposure.ts';

// A ProxyConfig with keys, as a user writes it: the Secrets it names and the values they hold.
const PROXY_CONFIG = {
  apiVersion: 'tollgate.dev/v1alpha1',
  kind: 'ProxyConfig',
  metadata: { name: 'default', namespace: 'shop' },
  spec: {
    credentials: { openaiApiKey: { secretName: 'llm-api-keys', key: 'openai' }, anthropicApiKey: { secretName: 'llm-api-keys', key: 'anthropic' } },
    audit: { sinks: [{ name: 'collector', kind: 'grpc', address: 'audit-collector.security:4317' }] },
  },
};
const CREDENTIALS: Credentials = {
  // The budget store's password is the sidecar's too.
  secretNames: [PROXY_CONFIG.spec.credentials.openaiApiKey.secretName, 'tollgate-redis'],
  values: ['sk-proj-unit-0000000000000000', 'sk-ant-unit-1111111111111111', 'redis-password-2222'],
};

const app = (annotations: Record<string, string>): V1Pod => ({
  metadata: { name: 'agent-1', annotations: { 'tollgate.dev/proxy-config': PROXY_CONFIG.metadata.name, ...annotations } },
  spec: {
    initContainers: [{ name: 'migrate', image: 'example.invalid/migrate:1', volumeMounts: [{ name: 'work', mountPath: '/work' }] }],
    containers: [
      { name: 'app', image: 'example.invalid/app:1', env: [{ name: 'MODE', value: 'agent' }], volumeMounts: [{ name: 'work', mountPath: '/work' }] },
      { name: 'worker', image: 'example.invalid/worker:1', envFrom: [{ configMapRef: { name: 'worker-settings' } }] },
    ],
    volumes: [{ name: 'work', emptyDir: {} }],
  },
});

function input(pod: V1Pod, overrides: Partial<InjectionInput> = {}): InjectionInput {
  return {
    pod,
    namespace: PROXY_CONFIG.metadata.namespace,
    namespaceLabels: { 'tollgate.dev/injection': 'enabled' },
    ownNamespace: 'tollgate-system',
    defaults: { ...TEST_DEFAULTS, budgetStore: { url: 'redis://tollgate-redis:6379', keyPrefix: 'tollgate', passwordSecret: { name: 'tollgate-redis', key: 'password' } } },
    nativeSidecarSupported: true,
    operatorCaPem: '-----BEGIN CERTIFICATE-----\nMIIBtestCA\n-----END CERTIFICATE-----\n',
    // The ProxyConfig enables audit and the chart allows the agent's socket: the most the sidecar ever gets.
    audit: { hostSocketDir: '/var/run/tetragon' },
    ...overrides,
  };
}

function injected(pod: V1Pod, overrides: Partial<InjectionInput> = {}): V1Pod {
  const decision = planInjection(input(pod, overrides));
  if (decision.kind !== 'inject') throw new Error(`expected an injection, got ${decision.kind}`);
  return applyPatch(pod, decision.patch);
}

describe('keyless app containers', () => {
  it('gives no container but tollgate-proxy a credential Secret, a key, or a sidecar volume (native and classic, SDK variables on)', () => {
    for (const native of [true, false]) {
      const pod = injected(app({ 'tollgate.dev/inject-env': 'true' }), { nativeSidecarSupported: native });
      expect(credentialExposure(pod, 'tollgate-proxy', CREDENTIALS)).toEqual([]);
      // The app containers got exactly the SDK base URLs, all on loopback to the sidecar, and no mounts.
      const appEnv = pod.spec!.containers.find((c) => c.name === 'app')!.env!;
      expect(appEnv.map((e) => e.name)).toEqual([
        'MODE',
        'OPENAI_BASE_URL',
        'ANTHROPIC_BASE_URL',
        'ANTHROPIC_VERTEX_BASE_URL',
        'ANTHROPIC_BEDROCK_BASE_URL',
        'GOOGLE_VERTEX_BASE_URL',
      ]);
      expect(appEnv.slice(1).every((e) => e.value?.startsWith('http://127.0.0.1:8181/proxy/') && e.valueFrom === undefined)).toBe(true);
      expect(pod.spec!.containers.find((c) => c.name === 'app')!.volumeMounts).toEqual([{ name: 'work', mountPath: '/work' }]);
      expect(pod.spec!.initContainers!.find((c) => c.name === 'migrate')!.volumeMounts).toEqual([{ name: 'work', mountPath: '/work' }]);
    }
  });

  it('keeps what it adds to the sidecar: the token, the state directory, the Tetragon socket and the store password', () => {
    const pod = injected(app({}));
    const sidecar = pod.spec!.initContainers!.find((c) => c.name === 'tollgate-proxy')!;
    expect(sidecar.volumeMounts!.map((m) => m.name).sort()).toEqual(['tollgate-operator-ca', 'tollgate-state', 'tollgate-tetragon', 'tollgate-token']);
    expect(sidecar.env).toContainEqual({ name: 'TOLLGATE_BUDGET_REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'tollgate-redis', key: 'password' } } });
    // The check can fail: it reads the sidecar's own spec as exposure when asked about it from outside.
    expect(credentialExposure(pod, 'someone-else', CREDENTIALS)).toContain('tollgate-proxy: env TOLLGATE_BUDGET_REDIS_PASSWORD from Secret tollgate-redis');
  });

  it("refuses a pod whose own container mounts one of the sidecar's volumes, which the patch would make valid", () => {
    for (const [volume, where] of [
      ['tollgate-state', 'containers'],
      ['tollgate-token', 'initContainers'],
    ] as const) {
      const pod = app({});
      pod.spec![where]![0]!.volumeMounts!.push({ name: volume, mountPath: '/stolen' });
      const decision = planInjection(input(pod));
      const name = where === 'containers' ? 'app' : 'migrate';
      expect(decision).toMatchObject({
        kind: 'refuse',
        message: `tollgate: container ${name} mounts ${volume}: only the Tollgate sidecar may mount its volumes`,
      });
    }
  });
});
