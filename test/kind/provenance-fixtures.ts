// What the provenance kind test deploys (issue 39): the node agent that stands in for Tetragon (a DaemonSet of
// the test-tools image, ADR 1606), a real Tetragon where one can run, and the app namespace's ProxyConfig with
// provenance on, pointed at the node's agent.

import { stringify } from 'yaml';
import { APP_NAMESPACE, FAKE_BASE_URL, MODEL } from './tollgate-fixtures.ts';

export const AGENT_NAMESPACE = 'node-agents';
/** Tetragon's gRPC port (sidecar/src/audit/audit-placement.ts): the node agent and Tetragon both listen there. */
const AGENT_PORT = 54321;
/** The fake provider's Service as `bypass.extraHosts` names it (the beta route's upstream too). */
export const FAKE_PROVIDER_HOST = new URL(FAKE_BASE_URL).host;
/** The price of a call in the app namespace (the fake bills one million input tokens). */
export const PROVENANCE_CALL_USD = 3;

const join = (objects: object[]) => objects.map((o) => stringify(o)).join('---\n');

/** A ServiceAccount that may read the pods (both agents name an event's pod from them), bound cluster-wide. */
function podReader(name: string): object[] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: AGENT_NAMESPACE } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['nodes'], verbs: ['get'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: AGENT_NAMESPACE }],
    },
  ];
}

const nodeNameEnv = { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } };

/**
 * The node agent on every node: the node's PIDs (hostPID) and network (hostNetwork: it listens on the node's
 * address, where a sidecar finds Tetragon). Root with the capabilities reading another process's /proc/<pid>/fd
 * and exe links takes (ptrace read access), nothing else.
 */
export function nodeAgentManifests(image: string): string {
  const labels = { app: 'tetragon-node-agent' };
  return join([
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: AGENT_NAMESPACE } },
    ...podReader('tetragon-node-agent'),
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'tetragon-node-agent', namespace: AGENT_NAMESPACE },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'tetragon-node-agent',
            hostPID: true,
            hostNetwork: true,
            dnsPolicy: 'ClusterFirstWithHostNet',
            containers: [
              {
                name: 'agent',
                image,
                imagePullPolicy: 'Never',
                args: ['test/kind/in-pod/tetragon-node-agent.ts', '--listen', `0.0.0.0:${AGENT_PORT}`, '--every-ms', '50'],
                env: [nodeNameEnv],
                ports: [{ name: 'grpc', containerPort: AGENT_PORT }],
                readinessProbe: { tcpSocket: { port: AGENT_PORT }, periodSeconds: 2 },
                resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                securityContext: {
                  runAsUser: 0,
                  runAsNonRoot: false,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'], add: ['SYS_PTRACE', 'DAC_READ_SEARCH'] },
                },
              },
            ],
          },
        },
      },
    },
  ]);
}

/** The tcp_connect policy of docs/provenance.md, as a file Tetragon loads at start (no CRD needed). */
const TCP_CONNECT_POLICY = stringify({
  apiVersion: 'cilium.io/v1alpha1',
  kind: 'TracingPolicy',
  metadata: { name: 'tollgate-tcp-connect' },
  spec: { kprobes: [{ call: 'tcp_connect', syscall: false, args: [{ index: 0, type: 'sock' }] }] },
});

/**
 * Tetragon itself, as little as runs it (its Helm chart cannot be pulled here): privileged, the node's PIDs,
 * network, /proc and BPF file system, the Kubernetes API for pod names, the policy from a file, gRPC on the
 * node's address. Untested where no Tetragon image can be had (ADR 1606).
 */
export function tetragonManifests(image: string): string {
  const labels = { app: 'tetragon' };
  return join([
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: AGENT_NAMESPACE } },
    ...podReader('tetragon'),
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'tetragon-policies', namespace: AGENT_NAMESPACE }, data: { 'tcp-connect.yaml': TCP_CONNECT_POLICY } },
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'tetragon', namespace: AGENT_NAMESPACE },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'tetragon',
            hostPID: true,
            hostNetwork: true,
            dnsPolicy: 'ClusterFirstWithHostNet',
            containers: [
              {
                name: 'tetragon',
                image,
                imagePullPolicy: 'IfNotPresent',
                args: [
                  `--server-address=0.0.0.0:${AGENT_PORT}`,
                  '--enable-k8s-api',
                  '--enable-tracing-policy-crd=false',
                  '--tracing-policy-dir=/etc/tetragon/tetragon.tp.d',
                  '--procfs=/procRoot',
                  '--export-filename=',
                ],
                env: [nodeNameEnv],
                securityContext: { privileged: true },
                volumeMounts: [
                  { name: 'proc', mountPath: '/procRoot', readOnly: true },
                  { name: 'bpf', mountPath: '/sys/fs/bpf', mountPropagation: 'Bidirectional' },
                  { name: 'btf', mountPath: '/sys/kernel/btf', readOnly: true },
                  { name: 'policies', mountPath: '/etc/tetragon/tetragon.tp.d', readOnly: true },
                ],
                readinessProbe: { tcpSocket: { port: AGENT_PORT }, periodSeconds: 2 },
              },
            ],
            volumes: [
              { name: 'proc', hostPath: { path: '/proc', type: 'Directory' } },
              { name: 'bpf', hostPath: { path: '/sys/fs/bpf', type: 'DirectoryOrCreate' } },
              { name: 'btf', hostPath: { path: '/sys/kernel/btf', type: 'Directory' } },
              { name: 'policies', configMap: { name: 'tetragon-policies' } },
            ],
          },
        },
      },
    },
  ]);
}

/**
 * The app namespace's ProxyConfig: beta to the fake provider with the Secret's key, and provenance with full
 * command lines (so a span names the exact command) and the fake's Service among the provider endpoints. No
 * `address`: the sidecar finds the agent at its node's IP, which the webhook gives it because provenance is on.
 */
export function provenanceProxyConfig(): string {
  return stringify({
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'ProxyConfig',
    metadata: { name: 'default', namespace: APP_NAMESPACE },
    spec: {
      pricing: { models: [{ provider: 'openai', model: MODEL, input_per_million: PROVENANCE_CALL_USD, output_per_million: 0 }] },
      upstreams: { beta: { baseUrl: FAKE_BASE_URL } },
      credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
      provenance: {
        arguments: 'all',
        attributionWindowMs: 5_000,
        bypass: { enabled: true, extraHosts: [FAKE_PROVIDER_HOST], resolveIntervalMs: 5_000 },
      },
    },
  });
}
