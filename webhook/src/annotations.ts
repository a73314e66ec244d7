// The names users write on namespaces and pods. One table, so docs, chart and code cannot disagree.

/** Namespace label: `enabled` injects every pod in the namespace (a label, so a namespaceSelector can match it). */
export const NAMESPACE_INJECTION_LABEL = 'tollgate.dev/injection';

export const ANNOTATIONS = {
  inject: 'tollgate.dev/inject',
  injectEnv: 'tollgate.dev/inject-env',
  nativeSidecar: 'tollgate.dev/native-sidecar',
  sidecarImage: 'tollgate.dev/sidecar-image',
  sidecarCpu: 'tollgate.dev/sidecar-cpu',
  sidecarMemory: 'tollgate.dev/sidecar-memory',
  sidecarPort: 'tollgate.dev/sidecar-port',
  proxyConfig: 'tollgate.dev/proxy-config',
  /** Written by the webhook: what was injected (its presence makes reinvocation a no-op). */
  status: 'tollgate.dev/status',
  /** Written by the webhook: the operator's CA, projected into the sidecar as a file by the downward API. */
  operatorCa: 'tollgate.dev/operator-ca',
} as const;

export const SIDECAR_CONTAINER_NAME = 'tollgate-proxy';

/**
 * Pod label of the chart's self-test pods (ADR 0812): the one kind of pod injected in Tollgate's own namespace,
 * through a webhook entry that matches nothing else.
 */
export const SELFTEST_LABEL = 'tollgate.dev/selftest';

/** Namespaces the webhook never touches, whatever their labels say. */
export const SYSTEM_NAMESPACES: ReadonlySet<string> = new Set(['kube-system', 'kube-public', 'kube-node-lease']);
