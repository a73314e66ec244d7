// Where the engine runs, for the audit fan-out: read from the environment the webhook sets up. Kept apart from
// the fan-out itself so that an engine without an audit section never loads the gRPC and protobuf stack (ADR 0003).

import { PROXY_ENV } from '../../../contracts/sidecar-env.ts';

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
  const [podName, podNamespace, hostIp, hostSocket, stateDir] = [PROXY_ENV.podName, PROXY_ENV.podNamespace, PROXY_ENV.hostIp, PROXY_ENV.auditSocket, PROXY_ENV.stateDir].map(
    (name) => env[name],
  );
  if (podName) p.podName = podName;
  if (podNamespace) p.podNamespace = podNamespace;
  if (hostIp) p.hostIp = hostIp;
  if (hostSocket) p.hostSocket = hostSocket;
  if (stateDir) p.stateDir = stateDir;
  return p;
}

/** The Tetragon agent's gRPC port on the node. */
export const TETRAGON_PORT = 54321;
