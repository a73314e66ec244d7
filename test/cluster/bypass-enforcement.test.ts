// Opt-in bypass enforcement (ADR 1602) on a real API server, with the `tollgate operator` command running as the
// chart's operator ServiceAccount: spec.provenance.enforcement on a ProxyConfig becomes a Tetragon
// TracingPolicyNamespaced in its namespace once Tetragon's CRD is served (a stub of it here: the real group,
// version, kind and plural, its spec kept as sent), with Post under audit, Sigkill or Override under enforce,
// and gone under off (even when the status forgot it was applied); without the CRD the ProxyConfig says so in a
// condition and an Event. Then the policy's addresses against a scripted resolver (the one thing not real
// here: DNS answers are what the test is about): they rotate, fail and expire.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyConfigSpec } from '../../crds/index.ts';
import { isStatus, type RequestOptions } from '../../kube-client/api-client.ts';
import { type EnforcementDeps, reconcileBypassPolicy } from '../../operator/src/enforcement/bypass-enforcement.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { crdEstablished } from './crd-established.ts';
import {
  apply,
  ensureNamespace,
  eventsFor,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  putProxyConfig,
  readyCondition,
  startOperatorProcess,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';

const NS = 'agents';
const POLICY = `/apis/cilium.io/v1alpha1/namespaces/${NS}/tracingpoliciesnamespaced/tollgate-bypass-default`;

const TETRAGON_CRD_STUB = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'tracingpoliciesnamespaced.cilium.io' },
  spec: {
    group: 'cilium.io',
    names: { kind: 'TracingPolicyNamespaced', listKind: 'TracingPolicyNamespacedList', plural: 'tracingpoliciesnamespaced', singular: 'tracingpolicynamespaced' },
    scope: 'Namespaced',
    versions: [
      {
        name: 'v1alpha1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
      },
    ],
  },
};

/** Providers at IP literals, so the addresses need no DNS: the Vertex and Bedrock routes' hosts need a location or region it does not give. */
function spec(enforcement: 'off' | 'audit' | 'enforce', enforcementAction?: 'sigkill' | 'override'): ProxyConfigSpec {
  return {
    upstreams: { beta: { baseUrl: 'https://203.0.113.10' }, 'gamma-direct': { baseUrl: 'https://198.51.100.20:8443' } },
    provenance: { enforcement, ...(enforcementAction ? { enforcementAction } : {}), bypass: { resolveIntervalMs: 1_000 } },
  };
}

interface Policy {
  metadata: { ownerReferences?: { kind: string; name: string }[] };
  spec: { containerSelector: unknown; kprobes: { call: string; selectors: { matchArgs: { operator: string; values: string[] }[]; matchActions: object[] }[] }[] };
}

describe('bypass enforcement: the operator renders a Tetragon policy for a ProxyConfig that opts in', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let operator: OperatorProcess | undefined;
  let dir: ReturnType<typeof tempDir>;

  const policy = () => api.get<Policy>(POLICY).catch((error: unknown) => (isStatus(error, 404) ? undefined : Promise.reject(error as Error)));
  const condition = async () => (await getProxyConfig(api, NS, 'default')).status?.conditions?.find((c) => c.type === 'BypassEnforcement');

  beforeAll(async () => {
    dir = tempDir('tollgate-bypass-enforcement-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const kubeconfig = await installOperatorPrerequisites(cp, dir.path, { 'operator.bypassEnforcement': 'true' });
    await ensureNamespace(api, NS);
    operator = startOperatorProcess({ kubeconfig, identity: 'enforcement-operator', grpcPort: await freePort(), logDir: dir.path });
  });

  afterAll(async () => {
    await operator?.stop();
    await cp?.stop();
    dir?.remove();
  });

  it('without the CRD: a condition and an Event; with it: audit (Post), enforce (Sigkill, Override), off (deleted)', async () => {
    await putProxyConfig(api, NS, 'default', spec('audit'));
    const absent = await eventually('the TetragonCrdAbsent condition', async () => ((await condition())?.reason === 'TetragonCrdAbsent' ? condition() : undefined));
    expect(absent).toMatchObject({ status: 'False' });
    expect(absent.message).toContain('spec.provenance.enforcement is audit, but this cluster does not serve tracingpoliciesnamespaced.cilium.io/v1alpha1');
    const event = await eventually('a TetragonCrdAbsent Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'TetragonCrdAbsent'));
    expect(event).toMatchObject({ type: 'Warning', regarding: { kind: 'ProxyConfig', name: 'default' } });
    // The sidecars' config is unaffected: the operator's fields are not in the snapshot the sidecar validates.
    expect(readyCondition(await getProxyConfig(api, NS, 'default'))).toMatchObject({ status: 'True', reason: 'Accepted' });

    await apply(cp, [TETRAGON_CRD_STUB]);
    await crdEstablished(cp.kubeConfig, 'tracingpoliciesnamespaced.cilium.io');
    const audit = await eventually('the audit policy', policy);
    expect(audit.metadata.ownerReferences).toMatchObject([{ kind: 'ProxyConfig', name: 'default' }]);
    expect(audit.spec.containerSelector).toEqual({ matchExpressions: [{ key: 'name', operator: 'NotIn', values: ['tollgate-proxy'] }] });
    expect(audit.spec.kprobes).toMatchObject([
      {
        call: 'tcp_connect',
        selectors: [
          {
            matchArgs: [
              { operator: 'DAddr', values: ['198.51.100.20/32', '203.0.113.10/32'] },
              { operator: 'DPort', values: ['443', '8443'] },
            ],
            matchActions: [{ action: 'Post' }],
          },
        ],
      },
    ]);
    expect(await eventually('the Audit condition', async () => ((await condition())?.reason === 'Audit' ? condition() : undefined))).toMatchObject({ status: 'True' });

    await putProxyConfig(api, NS, 'default', spec('enforce'));
    const sigkill = await eventually(
      'the Sigkill policy',
      async () => ((await policy())?.spec.kprobes[0]!.selectors[0]!.matchActions[0] as { action?: string })?.action === 'Sigkill' || undefined,
    );
    expect(sigkill).toBe(true);
    await putProxyConfig(api, NS, 'default', spec('enforce', 'override'));
    const override = await eventually('the Override policy', async () => {
      const p = await policy();
      return p?.spec.kprobes[0]!.call === 'security_socket_connect' ? p : undefined;
    });
    expect(override.spec.kprobes[0]!.selectors[0]!.matchActions).toEqual([{ action: 'Override', argError: -111 }]);
    expect(override.spec.kprobes[0]!.selectors[0]!.matchArgs.map((m) => m.operator)).toEqual(['SAddr', 'SPort']);

    await putProxyConfig(api, NS, 'default', spec('off'));
    await eventually('the policy deleted', async () => ((await policy()) === undefined ? true : undefined));
    await eventually('the condition gone', async () => ((await condition()) === undefined ? true : undefined));

    // A policy left behind while the status does not show the condition (the operator crashed between the apply
    // and the status write, or a GitOps tool dropped the status): off still deletes it.
    await api.post(POLICY.slice(0, POLICY.lastIndexOf('/')), { ...override, metadata: { name: 'tollgate-bypass-default', namespace: NS } });
    expect(await policy()).toBeDefined();
    await putProxyConfig(api, NS, 'default', { ...spec('off'), provenance: { enforcement: 'off', bypass: { resolveIntervalMs: 2_000 } } });
    await eventually('the leftover policy deleted', async () => ((await policy()) === undefined ? true : undefined));
  });

  it('addresses: a rotated answer adds to the set, a failed one keeps it, an address unseen for 5 intervals goes; unchanged is not applied again', async () => {
    const ns = 'dns-answers';
    await ensureNamespace(api, ns);
    await apply(cp, [TETRAGON_CRD_STUB]);
    await crdEstablished(cp.kubeConfig, 'tracingpoliciesnamespaced.cilium.io');
    const path = `/apis/cilium.io/v1alpha1/namespaces/${ns}/tracingpoliciesnamespaced/tollgate-bypass-resolved`;
    const daddr = async () => (await api.get<Policy>(path).catch(() => undefined))?.spec.kprobes[0]!.selectors[0]!.matchArgs[0]!.values;
    const patches: string[] = [];
    const counting = new (class extends KubeApi {
      override request<T>(method: Parameters<KubeApi['request']>[0], p: string, opts?: RequestOptions): Promise<T> {
        if (method === 'PATCH') patches.push(p);
        return super.request<T>(method, p, opts);
      }
    })(cp.kubeConfig);
    let answer: string[] | undefined;
    let now = 0;
    const asked = new Set<string>();
    const deps = (): EnforcementDeps => ({
      api: counting,
      resolve: async (host) => {
        asked.add(host);
        return answer ?? Promise.reject(new Error(`queryA ETIMEOUT ${host}`));
      },
      recent: new Map(),
      now: () => now,
    });
    const pc = {
      metadata: { name: 'resolved', namespace: ns, generation: 1 },
      spec: { upstreams: { beta: { baseUrl: 'https://api.example.test' } }, provenance: { enforcement: 'audit', bypass: { resolveIntervalMs: 60_000 } } },
    } satisfies Parameters<typeof reconcileBypassPolicy>[0];
    const operator = deps();

    answer = ['192.0.2.1', '192.0.2.2'];
    expect((await reconcileBypassPolicy(pc, operator)).condition).toMatchObject({ status: 'True', reason: 'Audit' });
    expect(await daddr()).toEqual(['192.0.2.1/32', '192.0.2.2/32']);

    // One minute later the CDN answers with another address: the earlier ones stay.
    now = 60_000;
    answer = ['192.0.2.3'];
    await reconcileBypassPolicy(pc, operator);
    expect(await daddr()).toEqual(['192.0.2.1/32', '192.0.2.2/32', '192.0.2.3/32']);

    // DNS fails: the set stays, and the condition says so; the same answer again is no new apply.
    now = 120_000;
    answer = undefined;
    const failed = await reconcileBypassPolicy(pc, operator);
    expect(failed.condition).toMatchObject({ status: 'True', reason: 'Audit' });
    expect(failed.condition!.message).toContain('not resolved (last known addresses kept): api.example.test');
    expect(await daddr()).toEqual(['192.0.2.1/32', '192.0.2.2/32', '192.0.2.3/32']);
    expect(patches).toHaveLength(2);

    // 192.0.2.1 and .2 were last seen at 0: at 300 s (5 intervals of 60 s) they go, .3 (seen now) stays.
    now = 300_000;
    answer = ['192.0.2.3'];
    await reconcileBypassPolicy(pc, operator);
    expect(await daddr()).toEqual(['192.0.2.3/32']);
    expect(patches).toHaveLength(3);

    // A restarted operator that cannot resolve anything leaves the applied policy alone rather than deleting it.
    answer = undefined;
    const restarted = await reconcileBypassPolicy(pc, deps());
    expect(restarted.condition).toMatchObject({ status: 'False', reason: 'ProviderAddressesUnresolved' });
    expect(await daddr()).toEqual(['192.0.2.3/32']);
    expect([...asked]).toEqual(['api.example.test']);
  });

  it('an operator without the chart value operator.bypassEnforcement: the condition says the apply is forbidden; off goes on', async () => {
    const ns = 'no-policy-rbac';
    await ensureNamespace(api, ns);
    await apply(cp, [TETRAGON_CRD_STUB]);
    await crdEstablished(cp.kubeConfig, 'tracingpoliciesnamespaced.cilium.io');
    // The chart's operator role rendered without the value has no rule on cilium.io (test/cluster/helm.test.ts): as a user with none.
    const unprivileged = new KubeApi(await cp.userKubeConfig('system:serviceaccount:tollgate-system:no-policies', ['system:serviceaccounts']));
    const deps: EnforcementDeps = { api: unprivileged, resolve: async () => Promise.reject(new Error('no DNS needed')), recent: new Map(), now: () => 0 };
    const pc = { metadata: { name: 'forbidden', namespace: ns, generation: 1 }, spec: spec('enforce') };
    const outcome = await reconcileBypassPolicy(pc, deps);
    expect(outcome.condition).toMatchObject({ status: 'False', reason: 'PolicyForbidden' });
    expect(outcome.condition!.message).toContain(`the operator may not apply tracingpoliciesnamespaced.cilium.io in ${ns} (the chart's operator.bypassEnforcement grants it)`);
    // Off sends a DELETE that is forbidden too: nothing this operator could have applied, so no error.
    expect(await reconcileBypassPolicy({ ...pc, metadata: { ...pc.metadata, generation: 2 }, spec: spec('off') }, deps)).toEqual({});
  });
});
