// spec.provenance.enforcement of ProxyConfig: whether the operator has Tetragon watch, or stop, connections
// from the namespace's pods to provider endpoints that do not come from the sidecar (ADR 1602). The operator
// reads these two fields and the sidecar never does: render() leaves them out of the snapshot.

import type { SchemaNode } from './crd-schema.ts';

export const ENFORCEMENT_MODES = ['off', 'audit', 'enforce'] as const;
export const ENFORCEMENT_ACTIONS = ['sigkill', 'override'] as const;
export type EnforcementAction = (typeof ENFORCEMENT_ACTIONS)[number];

/** Added to the provenance section's properties in the CRD only. */
export const ENFORCEMENT_PROPERTIES: Readonly<Record<'enforcement' | 'enforcementAction', SchemaNode>> = {
  enforcement: {
    type: 'string',
    description:
      "off (default): no policy. audit: a Tetragon TracingPolicyNamespaced reports every connection from a container other than the sidecar to a provider endpoint. enforce: the same policy stops it (enforcementAction). Needs Tetragon's CRD (docs/provenance.md).",
    enum: [...ENFORCEMENT_MODES],
  },
  enforcementAction: {
    type: 'string',
    description:
      'enforce: sigkill (default; kills the process at tcp_connect, needs bpf_send_signal, kernel 5.3+) or override (connect() fails with ECONNREFUSED at security_socket_connect, needs CONFIG_BPF_KPROBE_OVERRIDE and kernel 5.7+).',
    enum: [...ENFORCEMENT_ACTIONS],
  },
};
