// Keeps a ProxyConfig's Tetragon bypass policy in step with spec.provenance.enforcement (ADR 1602): applied
// (server-side) while audit or enforce, deleted when off. Applied only where Tetragon's TracingPolicyNamespaced
// CRD is served (discovery); otherwise the BypassEnforcement condition says the CRD is absent. Provider host
// names are resolved here and again every bypass.resolveIntervalMs, since their addresses move: an address
// stays in the policy for a few intervals after it was last in an answer (CDN answers rotate), a name that does
// not resolve keeps its last known addresses, and the policy is applied again only when it changed.

import { isIP } from 'node:net';
import type { ProxyConfigSpec } from '../../../crds/index.ts';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { bypassPolicyName, exemptContainers, renderBypassPolicy, TRACING_POLICY_NAMESPACED } from '../render-bypass-policy.ts';
import { type HostResolver, resolveHosts } from './provider-dns.ts';
import { providerEndpoints } from './provider-endpoints.ts';

export const ENFORCEMENT_CONDITION = 'BypassEnforcement';
const DEFAULT_RESOLVE_INTERVAL_MS = 60_000;
const FIELD_MANAGER = 'tollgate-operator';
/** How many resolve intervals an address stays after the last answer that had it. */
const KEEP_UNSEEN_INTERVALS = 5;

/** Per host name (or IP literal), each address known for it and when an answer last had it. */
type KnownAddresses = Map<string, Map<string, number>>;

interface Recent {
  mode: 'off' | 'audit' | 'enforce';
  generation: number | undefined;
  at: number;
  outcome: EnforcementOutcome;
  known: KnownAddresses;
  /** The policy as last applied (JSON), so an unchanged one is not applied again. */
  applied?: string | undefined;
}

export interface EnforcementDeps {
  api: KubeApi;
  resolve: HostResolver;
  /**
   * The last outcome per ProxyConfig, with the generation and time it was reached: a ProxyConfig is reconciled
   * whenever its sidecars come and go, and the policy needs another look only when its spec changed or the
   * resolve interval passed.
   */
  recent: Map<string, Recent>;
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
    // Gone already, or the CRD itself is gone and the policy with it. Forbidden: the chart grants no verb on
    // policies (operator.bypassEnforcement off), so this operator cannot have applied one either.
    if (!isStatus(error, 404) && !isStatus(error, 403)) throw error;
  }
}

/**
 * Every provider address: IP literals as they are, host names through the resolver, merged with what was known
 * (`before`). An address missing from a name's answer stays until KEEP_UNSEEN_INTERVALS intervals after it was
 * last seen; a name that does not resolve keeps what it had and is reported, not fatal.
 */
async function providerAddresses(spec: ProxyConfigSpec | undefined, deps: EnforcementDeps, before: KnownAddresses, intervalMs: number) {
  const { endpoints, unknown } = providerEndpoints(spec);
  const hosts = [...new Set(endpoints.map((e) => e.host))];
  const answers = await resolveHosts(
    hosts.filter((h) => !isIP(h)),
    deps.resolve,
  );
  const now = deps.now();
  const known: KnownAddresses = new Map();
  const unresolved: string[] = [];
  for (const host of hosts) {
    const answer = isIP(host) ? [host] : answers.get(host);
    const had = before.get(host) ?? new Map<string, number>();
    if (answer === undefined) unresolved.push(host);
    const kept = answer === undefined ? [...had] : [...had].filter(([, seen]) => now - seen < KEEP_UNSEEN_INTERVALS * intervalMs);
    known.set(host, new Map([...kept, ...(answer ?? []).map((a) => [a, now] as const)]));
  }
  // Loopback is where apps reach the sidecar (and a local model runtime): never a provider to watch, nor its port.
  const of = (host: string) => [...known.get(host)!.keys()].filter((a) => !isLoopback(a));
  const reached = endpoints.filter((e) => of(e.host).length > 0);
  return { known, addresses: reached.flatMap((e) => of(e.host)), ports: reached.map((e) => e.port), unresolved, unknown };
}

function isLoopback(address: string): boolean {
  return address.startsWith('127.') || address === '::1';
}

function uncovered(unresolved: string[], unknown: string[]): string {
  const parts = [
    ...(unresolved.length ? [`not resolved (last known addresses kept): ${unresolved.join(', ')}`] : []),
    ...(unknown.length ? [`host depends on the sidecar's defaults: ${unknown.join(', ')}`] : []),
  ];
  return parts.length ? `; ${parts.join('; ')}` : '';
}

type PolicyOwner = { metadata: { name: string; namespace: string; uid?: string; generation?: number }; spec?: ProxyConfigSpec };

/**
 * Off: the policy is deleted wherever the CRD is served, whether or not the status remembers applying one (a
 * crash before the status write, a status a GitOps tool dropped), once per generation in this process.
 */
export async function reconcileBypassPolicy(pc: PolicyOwner, deps: EnforcementDeps): Promise<EnforcementOutcome> {
  const key = `${pc.metadata.namespace}/${pc.metadata.name}`;
  const s = settings(pc.spec);
  const mode = s.mode;
  const recent = deps.recent.get(key);
  const now = deps.now();
  const generation = pc.metadata.generation;
  if (mode === 'off') {
    if (recent?.mode === 'off' && recent.generation === generation) return {};
    if (await tetragonCrdServed(deps.api)) await deletePolicy(deps.api, pc.metadata.namespace, pc.metadata.name);
    deps.recent.set(key, { mode, generation, at: now, outcome: {}, known: new Map() });
    return {};
  }
  if (recent?.mode === mode && recent.generation === generation && now - recent.at < s.intervalMs) return { ...recent.outcome, requeueAfterMs: recent.at + s.intervalMs - now };
  // The addresses known carry over a spec change; the last apply does not, so a changed spec is applied once.
  const before = recent === undefined || recent.mode === 'off' ? undefined : recent.generation === generation ? recent : { ...recent, applied: undefined };
  const next = await applyPolicy(pc, { ...s, mode }, deps, before);
  deps.recent.set(key, { mode, generation, at: now, ...next });
  return next.outcome;
}

type Applied = Pick<Recent, 'outcome' | 'known' | 'applied'>;

async function applyPolicy(pc: PolicyOwner, s: ReturnType<typeof settings> & { mode: 'audit' | 'enforce' }, deps: EnforcementDeps, recent: Recent | undefined): Promise<Applied> {
  const { name, namespace, uid } = pc.metadata;
  const requeueAfterMs = s.intervalMs;
  const known = recent?.known ?? new Map<string, Map<string, number>>();
  if (!(await tetragonCrdServed(deps.api))) {
    const message = `spec.provenance.enforcement is ${s.mode}, but this cluster does not serve ${TRACING_POLICY_NAMESPACED.plural}.${TRACING_POLICY_NAMESPACED.group}/${TRACING_POLICY_NAMESPACED.version}: install Tetragon; no connection is watched or stopped until then`;
    return { outcome: { condition: { status: 'False', reason: 'TetragonCrdAbsent', message }, requeueAfterMs }, known };
  }
  const found = await providerAddresses(pc.spec, deps, known, s.intervalMs);
  const policy = renderBypassPolicy({
    proxyConfig: { name, namespace, uid },
    mode: s.mode,
    action: s.action,
    sidecarContainer: s.sidecarContainer,
    addresses: found.addresses,
    ports: found.ports,
  });
  const missed = uncovered(found.unresolved, found.unknown);
  const failed = (reason: string, message: string, applied = recent?.applied): Applied => ({
    outcome: { condition: { status: 'False', reason, message }, requeueAfterMs },
    known: found.known,
    applied,
  });
  if (!policy && found.unresolved.length > 0) {
    // A DNS outage must not turn enforcement off: a policy applied before stays as it was.
    return failed('ProviderAddressesUnresolved', `no provider address is known yet; a policy applied before is left as it was${missed}`);
  }
  if (!policy) {
    await deletePolicy(deps.api, namespace, name);
    return failed('NoProviderAddresses', `no provider address is known${missed}`, undefined);
  }
  const applied = JSON.stringify(policy);
  if (applied !== recent?.applied) {
    const refused = await patchPolicy(deps.api, namespace, name, policy);
    if (refused) return failed(refused.reason, refused.message);
  }
  const spec = (policy as { spec: { kprobes: { selectors: { matchArgs: { values: string[] }[] }[] }[] } }).spec;
  const [addresses, ports] = spec.kprobes[0]!.selectors[0]!.matchArgs.map((m) => m.values);
  const how = s.mode === 'audit' ? 'reports' : s.action === 'sigkill' ? 'kills the process at' : 'refuses (ECONNREFUSED)';
  const message = `TracingPolicyNamespaced ${bypassPolicyName(name)} ${how} connections to ${addresses!.length} provider address(es) on port(s) ${ports!.join(', ')} from every container but ${exemptContainers(s.sidecarContainer).join(', ')}${missed}`;
  return { outcome: { condition: { status: 'True', reason: s.mode === 'audit' ? 'Audit' : 'Enforce', message }, requeueAfterMs }, known: found.known, applied };
}

/** Server-side apply; a refusal the ProxyConfig can do something about comes back as a condition, anything else throws. */
async function patchPolicy(api: KubeApi, namespace: string, name: string, policy: object): Promise<{ reason: string; message: string } | undefined> {
  try {
    await api.request('PATCH', policyPath(namespace, bypassPolicyName(name)), {
      body: policy,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: true },
    });
    return undefined;
  } catch (error) {
    // Tetragon's own CRD refuses a policy its version does not know (an operator spelling, a field).
    if (isStatus(error, 422) || isStatus(error, 400)) return { reason: 'PolicyRejected', message: (error as Error).message };
    if (isStatus(error, 403)) {
      return {
        reason: 'PolicyForbidden',
        message: `the operator may not apply ${TRACING_POLICY_NAMESPACED.plural}.${TRACING_POLICY_NAMESPACED.group} in ${namespace} (the chart's operator.bypassEnforcement grants it): ${(error as Error).message}`,
      };
    }
    throw error;
  }
}
