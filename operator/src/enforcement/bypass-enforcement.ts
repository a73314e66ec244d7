// Keeps a ProxyConfig's Tetragon bypass policy in step with spec.provenance.enforcement (ADR 1602): applied
// (server-side) while audit or enforce, deleted when off. Applied only where Tetragon's TracingPolicyNamespaced
// CRD is served (discovery); otherwise the BypassEnforcement condition says the CRD is absent. Provider host
// names are resolved here and again every bypass.resolveIntervalMs, since their addresses move.

import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import type { ProxyConfigSpec } from '../../../crds/index.ts';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { bypassPolicyName, renderBypassPolicy, TRACING_POLICY_NAMESPACED } from '../render-bypass-policy.ts';
import { providerEndpoints } from './provider-endpoints.ts';

export const ENFORCEMENT_CONDITION = 'BypassEnforcement';
const DEFAULT_RESOLVE_INTERVAL_MS = 60_000;
const FIELD_MANAGER = 'tollgate-operator';

export type HostResolver = (host: string) => Promise<string[]>;

export const resolveWithDns: HostResolver = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

export interface EnforcementDeps {
  api: KubeApi;
  resolve: HostResolver;
  /**
   * The last outcome per ProxyConfig, with the generation and time it was reached: a ProxyConfig is reconciled
   * whenever its sidecars come and go, and the policy needs another look only when its spec changed or the
   * resolve interval passed.
   */
  recent: Map<string, { generation: number | undefined; at: number; outcome: EnforcementOutcome }>;
  now: () => number;
}

export interface EnforcementOutcome {
  /** The BypassEnforcement condition; undefined when enforcement is off (the condition goes). */
  condition?: { status: 'True' | 'False'; reason: string; message: string };
  requeueAfterMs?: number;
}

/** spec.provenance's enforcement fields (ADR 1602) and the settings of the provenance section they share. */
function settings(spec: ProxyConfigSpec | undefined) {
  const p = spec?.provenance;
  const off = p === undefined || p.enabled === false;
  return {
    mode: off ? 'off' : (p.enforcement ?? 'off'),
    action: p?.enforcementAction ?? 'sigkill',
    sidecarContainer: p?.sidecarContainer ?? 'tollgate-proxy',
    intervalMs: p?.bypass?.resolveIntervalMs ?? DEFAULT_RESOLVE_INTERVAL_MS,
  } as const;
}

function policyPath(namespace: string, name?: string): string {
  const { group, version, plural } = TRACING_POLICY_NAMESPACED;
  return `/apis/${group}/${version}/namespaces/${namespace}/${plural}${name ? `/${name}` : ''}`;
}

/** Whether the API server serves Tetragon's TracingPolicyNamespaced (discovery needs no RBAC rule). */
async function tetragonCrdServed(api: KubeApi): Promise<boolean> {
  try {
    const list = await api.get<{ resources?: { name: string }[] }>(`/apis/${TRACING_POLICY_NAMESPACED.group}/${TRACING_POLICY_NAMESPACED.version}`);
    return (list.resources ?? []).some((r) => r.name === TRACING_POLICY_NAMESPACED.plural);
  } catch (error) {
    if (isStatus(error, 404)) return false;
    throw error;
  }
}

async function deletePolicy(api: KubeApi, namespace: string, name: string): Promise<void> {
  try {
    await api.request('DELETE', policyPath(namespace, bypassPolicyName(name)));
  } catch (error) {
    // Gone already, or the CRD itself is gone and the policy with it.
    if (!isStatus(error, 404)) throw error;
  }
}

/** Every provider address: IP literals as they are, host names through the resolver; a name that does not resolve is reported, not fatal. */
async function providerAddresses(spec: ProxyConfigSpec | undefined, resolve: HostResolver) {
  const { endpoints, unknown } = providerEndpoints(spec);
  const hosts = [...new Set(endpoints.map((e) => e.host))];
  const results = await Promise.allSettled(hosts.map((h) => (isIP(h) ? Promise.resolve([h]) : resolve(h))));
  const unresolved = hosts.filter((_, i) => results[i]!.status === 'rejected');
  // Loopback is where apps reach the sidecar (and a local model runtime): never a provider to watch, nor its port.
  const byHost = new Map(hosts.map((h, i) => [h, results[i]!.status === 'fulfilled' ? (results[i] as PromiseFulfilledResult<string[]>).value.filter((a) => !isLoopback(a)) : []]));
  const reached = endpoints.filter((e) => byHost.get(e.host)!.length > 0);
  return { addresses: reached.flatMap((e) => byHost.get(e.host)!), ports: reached.map((e) => e.port), unresolved, unknown };
}

function isLoopback(address: string): boolean {
  return address.startsWith('127.') || address === '::1';
}

function uncovered(unresolved: string[], unknown: string[]): string {
  const parts = [
    ...(unresolved.length ? [`not resolved: ${unresolved.join(', ')}`] : []),
    ...(unknown.length ? [`host depends on the sidecar's defaults: ${unknown.join(', ')}`] : []),
  ];
  return parts.length ? `; ${parts.join('; ')}` : '';
}

type PolicyOwner = { metadata: { name: string; namespace: string; uid?: string; generation?: number }; spec?: ProxyConfigSpec };

/** `hadPolicy`: the ProxyConfig's status still shows the condition, so a policy may exist to delete. */
export async function reconcileBypassPolicy(pc: PolicyOwner, hadPolicy: boolean, deps: EnforcementDeps): Promise<EnforcementOutcome> {
  const key = `${pc.metadata.namespace}/${pc.metadata.name}`;
  const s = settings(pc.spec);
  const mode = s.mode;
  if (mode === 'off') {
    deps.recent.delete(key);
    if (hadPolicy) await deletePolicy(deps.api, pc.metadata.namespace, pc.metadata.name);
    return {};
  }
  const recent = deps.recent.get(key);
  const now = deps.now();
  if (recent && recent.generation === pc.metadata.generation && now - recent.at < s.intervalMs) return { ...recent.outcome, requeueAfterMs: recent.at + s.intervalMs - now };
  const outcome = await applyPolicy(pc, { ...s, mode }, deps);
  deps.recent.set(key, { generation: pc.metadata.generation, at: now, outcome });
  return outcome;
}

async function applyPolicy(pc: PolicyOwner, s: ReturnType<typeof settings> & { mode: 'audit' | 'enforce' }, deps: EnforcementDeps): Promise<EnforcementOutcome> {
  const { name, namespace, uid } = pc.metadata;
  const requeueAfterMs = s.intervalMs;
  if (!(await tetragonCrdServed(deps.api))) {
    const message = `spec.provenance.enforcement is ${s.mode}, but this cluster does not serve ${TRACING_POLICY_NAMESPACED.plural}.${TRACING_POLICY_NAMESPACED.group}/${TRACING_POLICY_NAMESPACED.version}: install Tetragon; no connection is watched or stopped until then`;
    return { condition: { status: 'False', reason: 'TetragonCrdAbsent', message }, requeueAfterMs };
  }
  const found = await providerAddresses(pc.spec, deps.resolve);
  const policy = renderBypassPolicy({
    proxyConfig: { name, namespace, uid },
    mode: s.mode,
    action: s.action,
    sidecarContainer: s.sidecarContainer,
    addresses: found.addresses,
    ports: found.ports,
  });
  const missed = uncovered(found.unresolved, found.unknown);
  if (!policy) {
    await deletePolicy(deps.api, namespace, name);
    return { condition: { status: 'False', reason: 'NoProviderAddresses', message: `no provider address is known${missed}` }, requeueAfterMs };
  }
  try {
    await deps.api.request('PATCH', policyPath(namespace, bypassPolicyName(name)), {
      body: policy,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: true },
    });
  } catch (error) {
    // Tetragon's own CRD refuses a policy its version does not know (an operator spelling, a field).
    if (!isStatus(error, 422) && !isStatus(error, 400)) throw error;
    return { condition: { status: 'False', reason: 'PolicyRejected', message: (error as Error).message }, requeueAfterMs };
  }
  const spec = (policy as { spec: { kprobes: { selectors: { matchArgs: { values: string[] }[] }[] }[] } }).spec;
  const [addresses, ports] = spec.kprobes[0]!.selectors[0]!.matchArgs.map((m) => m.values);
  const how = s.mode === 'audit' ? 'reports' : s.action === 'sigkill' ? 'kills the process at' : 'refuses (ECONNREFUSED)';
  const message = `TracingPolicyNamespaced ${bypassPolicyName(name)} ${how} connections to ${addresses!.length} provider address(es) on port(s) ${ports!.join(', ')} from every container but ${s.sidecarContainer}${missed}`;
  return { condition: { status: 'True', reason: s.mode === 'audit' ? 'Audit' : 'Enforce', message }, requeueAfterMs };
}
