// What the chart decides for every injected sidecar (the defaults), and what a pod may change by annotation.
// Plain data with no Kubernetes client imports: the patch builder is a pure function of these.

export type NativeSidecarMode = 'auto' | 'true' | 'false';

export interface ResourceAmounts {
  cpu: string;
  memory: string;
}

export interface SidecarDefaults {
  /** Image reference, e.g. ghcr.io/tollgate/sidecar:0.1.0. */
  image: string;
  /** Tollgate version recorded in the status annotation. */
  version: string;
  port: number;
  resources: { requests: ResourceAmounts; limits: ResourceAmounts };
  nativeSidecar: NativeSidecarMode;
  /** host:port of the operator Service's gRPC config-push port. */
  operatorAddress: string;
  /** Passed to the sidecar as TOLLGATE_LOG_LEVEL. */
  logLevel: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** The chart's budgets.store redis (ADR 1311): where every sidecar counts its rate limits. */
  budgetStore?: BudgetStoreSettings;
}

/** A Redis-compatible counter store, as the sidecar is told it; the password only by Secret reference. */
export interface BudgetStoreSettings {
  url: string;
  keyPrefix: string;
  /** A Secret in the pod's namespace and its key holding the store's password. */
  passwordSecret?: { name: string; key: string };
}

/** The fully resolved settings for one pod: defaults with its valid annotation overrides applied. */
export interface ResolvedSidecar {
  image: string;
  port: number;
  resources: { requests: ResourceAmounts; limits: ResourceAmounts };
  native: boolean;
  injectEnv: boolean;
  proxyConfig?: string;
}

/** The proxy's port in the pod when neither the chart nor the pod's annotation names one. */
export const DEFAULT_PORT = 8181;
export const TOKEN_AUDIENCE = 'tollgate';
/** The sidecar's health-only listener (all interfaces), for kubelet probes; the proxy itself stays on loopback. */
export const SIDECAR_HEALTH_PORT = 15181;
export const SIDECAR_HEALTH_PORT_NAME = 'tollgate-health';
/** The kubelet refreshes a projected token at 80% of its life; an hour keeps a stolen token short-lived. */
export const TOKEN_EXPIRATION_SECONDS = 3600;
/** UID/GID of the sidecar image's non-root user (the distroless "nonroot" convention). */
export const SIDECAR_UID = 65532;

export const VOLUMES = {
  token: 'tollgate-token',
  operatorCa: 'tollgate-operator-ca',
  state: 'tollgate-state',
} as const;
