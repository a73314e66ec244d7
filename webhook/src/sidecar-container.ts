// The injected container and its volumes: a pure function of the resolved settings.

import type { V1Container, V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { ANNOTATIONS, SIDECAR_CONTAINER_NAME } from './annotations.ts';
import { PROXY_ENV, SIDECAR_OPERATOR_CA_DIR, SIDECAR_OPERATOR_CA_FILE, SIDECAR_STATE_DIR, SIDECAR_TOKEN_DIR, SIDECAR_TOKEN_FILE } from '../../contracts/sidecar-env.ts';
import {
  SIDECAR_HEALTH_PORT,
  SIDECAR_HEALTH_PORT_NAME,
  SIDECAR_UID,
  TOKEN_AUDIENCE,
  TOKEN_EXPIRATION_SECONDS,
  VOLUMES,
  type ResolvedSidecar,
  type SidecarDefaults,
} from './sidecar-settings.ts';

export function sidecarContainer(sidecar: ResolvedSidecar, defaults: SidecarDefaults): V1Container {
  // The proxy listens on loopback only: it attaches this pod's credentials, so on the pod IP any workload in
  // the cluster could spend them. Kubelet probes reach a separate listener that serves nothing but
  // /healthz (TOLLGATE_HEALTH_PORT; ADR 0803).
  const probe = (periodSeconds: number, failureThreshold: number) => ({
    httpGet: { path: '/healthz', port: SIDECAR_HEALTH_PORT_NAME },
    periodSeconds,
    failureThreshold,
    timeoutSeconds: 2,
  });
  return {
    name: SIDECAR_CONTAINER_NAME,
    image: sidecar.image,
    ...(defaults.imagePullPolicy ? { imagePullPolicy: defaults.imagePullPolicy } : {}),
    args: ['proxy', '--port', String(sidecar.port)],
    ...(sidecar.native ? { restartPolicy: 'Always' } : {}),
    ports: [
      { name: 'tollgate-proxy', containerPort: sidecar.port, protocol: 'TCP' },
      { name: SIDECAR_HEALTH_PORT_NAME, containerPort: SIDECAR_HEALTH_PORT, protocol: 'TCP' },
    ],
    env: [
      { name: PROXY_ENV.operatorAddress, value: defaults.operatorAddress },
      { name: PROXY_ENV.operatorCaFile, value: SIDECAR_OPERATOR_CA_FILE },
      { name: PROXY_ENV.tokenFile, value: SIDECAR_TOKEN_FILE },
      { name: PROXY_ENV.podName, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: PROXY_ENV.podNamespace, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
      // One of the pod's own names: kubelet probes the health port with it as Host (ADR 1000).
      { name: PROXY_ENV.podIp, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      { name: PROXY_ENV.stateDir, value: SIDECAR_STATE_DIR },
      { name: PROXY_ENV.port, value: String(sidecar.port) },
      { name: PROXY_ENV.healthPort, value: String(SIDECAR_HEALTH_PORT) },
      { name: PROXY_ENV.logLevel, value: defaults.logLevel },
      ...budgetStoreEnv(defaults),
    ],
    resources: {
      requests: { ...sidecar.resources.requests },
      limits: { ...sidecar.resources.limits },
    },
    // The startup probe holds back the app containers of a native sidecar until the proxy answers.
    startupProbe: probe(1, 60),
    readinessProbe: probe(10, 3),
    livenessProbe: probe(20, 3),
    securityContext: {
      runAsNonRoot: true,
      runAsUser: SIDECAR_UID,
      runAsGroup: SIDECAR_UID,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    volumeMounts: [
      { name: VOLUMES.token, mountPath: SIDECAR_TOKEN_DIR, readOnly: true },
      { name: VOLUMES.operatorCa, mountPath: SIDECAR_OPERATOR_CA_DIR, readOnly: true },
      { name: VOLUMES.state, mountPath: SIDECAR_STATE_DIR },
    ],
  };
}

/** budgets.store redis: the store's URL and key prefix, and its password from a Secret, never as a value (ADR 1311). */
function budgetStoreEnv(defaults: SidecarDefaults): V1EnvVar[] {
  const store = defaults.budgetStore;
  if (store === undefined) return [];
  return [
    { name: PROXY_ENV.budgetRedisUrl, value: store.url },
    { name: PROXY_ENV.budgetRedisKeyPrefix, value: store.keyPrefix },
    ...(store.passwordSecret ? [{ name: PROXY_ENV.budgetRedisPassword, valueFrom: { secretKeyRef: { name: store.passwordSecret.name, key: store.passwordSecret.key } } }] : []),
  ];
}

export function sidecarVolumes(): V1Volume[] {
  return [
    {
      name: VOLUMES.token,
      projected: {
        sources: [{ serviceAccountToken: { audience: TOKEN_AUDIENCE, expirationSeconds: TOKEN_EXPIRATION_SECONDS, path: 'token' } }],
      },
    },
    {
      // The CA travels in a pod annotation and is projected as a file: no ConfigMap has to exist in the pod's
      // namespace first (ADR 0801).
      name: VOLUMES.operatorCa,
      downwardAPI: {
        items: [{ path: 'ca.crt', fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${ANNOTATIONS.operatorCa}']` } }],
      },
    },
    { name: VOLUMES.state, emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
  ];
}

export const TETRAGON_VOLUME = 'tollgate-tetragon';

/**
 * What a sidecar with audit on needs to reach its node's Tetragon agent: the node IP (the agent's TCP port),
 * and, only when the chart allows it (audit.hostSocket), the agent's socket directory from the host,
 * read-only. The hostPath is the trade-off: it ties the pod to the node's filesystem and Pod Security
 * "restricted"/"baseline" refuse it (docs/audit.md, ADR 1102).
 */
export function auditAccess(hostSocketDir: string | undefined): { env: V1EnvVar[]; mounts: V1VolumeMount[]; volumes: V1Volume[] } {
  const env: V1EnvVar[] = [{ name: PROXY_ENV.hostIp, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } }];
  if (!hostSocketDir) return { env, mounts: [], volumes: [] };
  env.push({ name: PROXY_ENV.auditSocket, value: `unix://${hostSocketDir}/tetragon.sock` });
  return {
    env,
    mounts: [{ name: TETRAGON_VOLUME, mountPath: hostSocketDir, readOnly: true }],
    volumes: [{ name: TETRAGON_VOLUME, hostPath: { path: hostSocketDir, type: 'Directory' } }],
  };
}
