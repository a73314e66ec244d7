import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube-client/api-client.ts';
import { eventTarget } from './events/event-target.ts';
import { slimPod } from './missing-sidecar-watcher.ts';
import { skipReason } from './predicates.ts';

type Pod = V1Pod & KubeObject;

const owner = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9f', uid: 'rs-1', controller: true };

function pod(overrides: { annotations?: Record<string, string>; hostNetwork?: boolean; initContainers?: string[] } = {}): Pod {
  return {
    metadata: {
      name: 'web-7d9f-x1',
      namespace: 'shop',
      uid: 'pod-1',
      resourceVersion: '42',
      ownerReferences: [owner],
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(50_000), ...overrides.annotations },
      labels: { app: 'web' },
    },
    spec: {
      containers: [{ name: 'app', image: 'registry.example.com/shop/web:1.0', env: [{ name: 'A', value: 'b' }] }],
      initContainers: (overrides.initContainers ?? []).map((name) => ({ name, image: 'x' })),
      ...(overrides.hostNetwork ? { hostNetwork: true } : {}),
    },
    status: { phase: 'Running', podIP: '10.0.0.7' },
  };
}

const context = (p: V1Pod, labels: Record<string, string> = {}) => ({ pod: p, namespace: 'shop', namespaceLabels: labels, ownNamespace: 'tollgate-system' });

describe('the pods the missing-sidecar watcher caches', () => {
  it('keep nothing but what the skip predicates and the Event read', () => {
    const slim = slimPod(pod({ annotations: { 'tollgate.dev/inject': 'true' } }));
    expect(JSON.stringify(slim).length).toBeLessThan(500);
    expect(slim.metadata.annotations).toEqual({ 'tollgate.dev/inject': 'true' });
    expect(slim.spec?.containers).toEqual([{ name: 'app' }]);
    expect(slim.status).toEqual({ phase: 'Running' });
    expect(eventTarget(slim, 'shop')).toEqual({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9f', namespace: 'shop', uid: 'rs-1' });
  });

  it.each([
    ['opted in by annotation, no sidecar', pod({ annotations: { 'tollgate.dev/inject': 'true' } }), {}],
    ['opted in by namespace', pod(), { 'tollgate.dev/injection': 'enabled' }],
    ['opted out', pod({ annotations: { 'tollgate.dev/inject': 'false' } }), { 'tollgate.dev/injection': 'enabled' }],
    ['not opted in', pod(), {}],
    ['host network', pod({ annotations: { 'tollgate.dev/inject': 'true' }, hostNetwork: true }), {}],
    ['injected (status annotation)', pod({ annotations: { 'tollgate.dev/inject': 'true', 'tollgate.dev/status': '{}' } }), {}],
    ['injected (native sidecar container)', pod({ annotations: { 'tollgate.dev/inject': 'true' }, initContainers: ['tollgate-proxy'] }), {}],
  ])('give the same skip decision as the full pod: %s', (_case, full, labels) => {
    expect(skipReason(context(slimPod(full), labels))?.reason).toBe(skipReason(context(full, labels))?.reason);
  });

  it("skip every pod of Tollgate's own namespace but the chart's self-test pods, which opt in (ADR 0812)", () => {
    const own = (p: Pod) => ({ pod: p, namespace: 'tollgate-system', namespaceLabels: {}, ownNamespace: 'tollgate-system' });
    const selftest = pod({ annotations: { 'tollgate.dev/inject': 'true' } });
    selftest.metadata.labels = { ...selftest.metadata.labels, 'tollgate.dev/selftest': 'true' };
    expect(skipReason(own(pod({ annotations: { 'tollgate.dev/inject': 'true' } })))?.reason).toBe('TollgateNamespace');
    expect(skipReason(own(selftest))).toBeUndefined();
    expect(skipReason(own(slimPod(selftest)))).toBeUndefined();
  });
});
