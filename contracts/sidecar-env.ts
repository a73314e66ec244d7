// What the injection webhook tells the sidecar it injects: the environment variables it sets and the paths it
// mounts. The webhook writes them (webhook/src/sidecar-container.ts), the proxy reads them (sidecar/src/main.ts
// and the modules it configures); both take the names from here, so a renamed variable is one edit that both
// sides follow, not a sidecar that silently starts without its operator. Lint refuses `TOLLGATE_*` literals in
// sidecar/ and webhook/ (eslint.config.js).

/** Environment variables the proxy reads. The webhook sets all but `host` and `lmstudioPort` (a developer's). */
export const PROXY_ENV = {
  /** host:port of the operator's config push: set, the proxy takes its config from the operator. */
  operatorAddress: 'TOLLGATE_OPERATOR_ADDRESS',
  operatorCaFile: 'TOLLGATE_OPERATOR_CA_FILE',
  /** The projected service-account token the proxy shows the operator. */
  tokenFile: 'TOLLGATE_TOKEN_FILE',
  podName: 'TOLLGATE_POD_NAME',
  podNamespace: 'TOLLGATE_POD_NAMESPACE',
  /** One of the pod's own names: kubelet probes the health port with it as Host (ADR 1000). */
  podIp: 'TOLLGATE_POD_IP',
  /** The node's IP, where the node's Tetragon agent listens (audit). */
  hostIp: 'TOLLGATE_HOST_IP',
  /** The Tetragon agent's socket, when the chart mounts it (audit.hostSocket). */
  auditSocket: 'TOLLGATE_AUDIT_SOCKET',
  /** The state volume; set means "in a pod". */
  stateDir: 'TOLLGATE_STATE_DIR',
  port: 'TOLLGATE_PORT',
  /** A health-only listener on all interfaces, for kubelet probes. */
  healthPort: 'TOLLGATE_HEALTH_PORT',
  logLevel: 'TOLLGATE_LOG_LEVEL',
  host: 'TOLLGATE_HOST',
  /**
   * The chart's counter store when budgets.store is redis (ADR 1311): the sidecar counts its rate limits there,
   * with the central server and every other sidecar on the same key prefix. The password, when the store has
   * one, only from a Secret (the webhook sets it by secretKeyRef).
   */
  budgetRedisUrl: 'TOLLGATE_BUDGET_REDIS_URL',
  budgetRedisKeyPrefix: 'TOLLGATE_BUDGET_REDIS_KEY_PREFIX',
  budgetRedisPassword: 'TOLLGATE_BUDGET_REDIS_PASSWORD',
  lmstudioPort: 'TOLLGATE_LMSTUDIO_PORT',
} as const;

/** The state volume's mount point: config snapshot, credential files, spend outbox, spans. */
export const SIDECAR_STATE_DIR = '/var/run/tollgate';
/** Where the projected service-account token is mounted, and its file. */
export const SIDECAR_TOKEN_DIR = '/var/run/secrets/tollgate';
export const SIDECAR_TOKEN_FILE = `${SIDECAR_TOKEN_DIR}/token`;
/** Where the operator's CA (from a pod annotation, by the downward API) is mounted, and its file. */
export const SIDECAR_OPERATOR_CA_DIR = '/var/run/secrets/tollgate-ca';
export const SIDECAR_OPERATOR_CA_FILE = `${SIDECAR_OPERATOR_CA_DIR}/ca.crt`;
