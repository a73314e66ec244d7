// Where the engine runs, for the audit fan-out: read from the environment the webhook sets up. Kept apart from
// the fan-out itself so that an engine without an audit section never loads the gRPC and protobuf stack (ADR 0003).

/** Where the engine runs, from the environment the webhook sets up (TOLLGATE_POD_*, TOLLGATE_HOST_IP, ...). */
export interface AuditPlacement {
  podName?: string;
  podNamespace?: string;
  /** The node's IP (downward API status.hostIP). */
  hostIp?: string;
  /** The agent's socket when the chart mounts it, e.g. unix:///var/run/tetragon/tetragon.sock. */
  hostSocket?: string;
  stateDir?: string;
}

export function placementFromEnv(env: NodeJS.ProcessEnv): AuditPlacement {
  const p: AuditPlacement = {};
  if (env.TOLLGATE_POD_NAME) p.podName = env.TOLLGATE_POD_NAME;
  if (env.TOLLGATE_POD_NAMESPACE) p.podNamespace = env.TOLLGATE_POD_NAMESPACE;
  if (env.TOLLGATE_HOST_IP) p.hostIp = env.TOLLGATE_HOST_IP;
  if (env.TOLLGATE_AUDIT_SOCKET) p.hostSocket = env.TOLLGATE_AUDIT_SOCKET;
  if (env.TOLLGATE_STATE_DIR) p.stateDir = env.TOLLGATE_STATE_DIR;
  return p;
}

/** The Tetragon agent's gRPC port on the node. */
export const TETRAGON_PORT = 54321;
