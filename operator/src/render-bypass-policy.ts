// The Tetragon TracingPolicyNamespaced of a ProxyConfig whose spec.provenance.enforcement is audit or enforce
// (ADR 1602): in its namespace, a connection from any container but the sidecar to a provider address is
// reported (audit), or stopped (enforce). Pure: the operator resolves the provider hosts to addresses first.
// Shapes and operator spellings are Tetragon's CRD's (cilium.io/v1alpha1), which the API server checks.

import { isIP } from 'node:net';
import { PROVENANCE_DEFAULTS } from '../../contracts/provenance-config.ts';
import { PROXY_CONFIG } from '../../crds/index.ts';
import type { EnforcementAction } from '../../crds/proxy-config-enforcement.ts';

export const TRACING_POLICY_NAMESPACED = { group: 'cilium.io', version: 'v1alpha1', kind: 'TracingPolicyNamespaced', plural: 'tracingpoliciesnamespaced' } as const;

/** -ECONNREFUSED: what connect() returns to the app under enforcementAction override, as if nothing listened. */
export const ECONNREFUSED = -111;

export interface BypassPolicyInput {
  proxyConfig: { name: string; namespace: string; uid?: string | undefined };
  mode: 'audit' | 'enforce';
  action: EnforcementAction;
  /** provenance.sidecarContainer: exempt as well as tollgate-proxy, the name the webhook always gives the sidecar. */
  sidecarContainer: string;
  /** Provider IP addresses (or CIDRs) the pods must not reach but through the sidecar. */
  addresses: readonly string[];
  ports: readonly number[];
}

export function bypassPolicyName(proxyConfig: string): string {
  return `tollgate-bypass-${proxyConfig}`.slice(0, 253);
}

/**
 * The containers the policy leaves alone. The webhook always names the sidecar tollgate-proxy (the provenance
 * default), whatever provenance.sidecarContainer says: a policy exempting only that field's value would have
 * enforce kill the real sidecar's own provider calls.
 */
export function exemptContainers(sidecarContainer: string): string[] {
  return [...new Set([PROVENANCE_DEFAULTS.sidecarContainer, sidecarContainer])];
}

/** An address as the CIDR Tetragon's DAddr/SAddr maps take; loopback is never a bypass (apps reach the sidecar there). */
function cidr(address: string): string | undefined {
  if (address.includes('/')) return address;
  const family = isIP(address);
  if (family === 4) return address.startsWith('127.') ? undefined : `${address}/32`;
  if (family === 6) return address === '::1' ? undefined : `${address}/128`;
  return undefined;
}

/** The policy's one kprobe: tcp_connect for audit and sigkill, security_socket_connect for override (errno needs an injectable function). */
function kprobe(input: BypassPolicyInput, cidrs: string[], ports: string[]): object {
  const enforcing = input.mode === 'enforce';
  const message = `tollgate: ${enforcing ? 'stopped' : 'seen'} a connection to a provider of ProxyConfig ${input.proxyConfig.name} around the sidecar`;
  const tags = ['tollgate', 'bypass', input.mode];
  if (enforcing && input.action === 'override') {
    // A sockaddr (the connect target) takes its destination through the source operators (Tetragon's argument types).
    return {
      call: 'security_socket_connect',
      syscall: false,
      message,
      tags,
      args: [
        { index: 0, type: 'socket' },
        { index: 1, type: 'sockaddr' },
      ],
      selectors: [
        {
          matchArgs: [
            { index: 1, operator: 'SAddr', values: cidrs },
            { index: 1, operator: 'SPort', values: ports },
          ],
          matchActions: [{ action: 'Override', argError: ECONNREFUSED }],
        },
      ],
    };
  }
  return {
    call: 'tcp_connect',
    syscall: false,
    message,
    tags,
    args: [{ index: 0, type: 'sock' }],
    selectors: [
      {
        matchArgs: [
          { index: 0, operator: 'DAddr', values: cidrs },
          { index: 0, operator: 'DPort', values: ports },
        ],
        // Post is the event alone; with Sigkill Tetragon still reports the event, with the action on it.
        matchActions: [{ action: enforcing ? 'Sigkill' : 'Post' }],
      },
    ],
  };
}

/** The policy, or undefined when no provider address is known (a policy without addresses would match nothing or, worse, everything). */
export function renderBypassPolicy(input: BypassPolicyInput): object | undefined {
  const cidrs = [...new Set(input.addresses.map(cidr).filter((c): c is string => c !== undefined))].sort();
  const ports = [...new Set(input.ports)].sort((a, b) => a - b).map(String);
  if (cidrs.length === 0 || ports.length === 0) return undefined;
  const { name, namespace, uid } = input.proxyConfig;
  return {
    apiVersion: `${TRACING_POLICY_NAMESPACED.group}/${TRACING_POLICY_NAMESPACED.version}`,
    kind: TRACING_POLICY_NAMESPACED.kind,
    metadata: {
      name: bypassPolicyName(name),
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'tollgate-operator' },
      annotations: { 'tollgate.dev/proxy-config': name },
      // Deleted with its ProxyConfig by the garbage collector.
      ...(uid ? { ownerReferences: [{ apiVersion: PROXY_CONFIG.apiVersion, kind: PROXY_CONFIG.kind, name, uid, controller: true }] } : {}),
    },
    spec: {
      // Every pod of the namespace, every container but the sidecar (Tetragon's policy filter; ADR 1602 says why not matchBinaries).
      podSelector: {},
      containerSelector: { matchExpressions: [{ key: 'name', operator: 'NotIn', values: exemptContainers(input.sidecarContainer) }] },
      kprobes: [kprobe(input, cidrs, ports)],
    },
  };
}
