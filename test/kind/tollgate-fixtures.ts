// What the kind tests (and `./tollgatew cluster up`'s demo) deploy next to Tollgate (the fake upstream, an app,
// a ProxyConfig) and how they look into running containers: /proc of a container's first process (from
// inside, with kubectl exec) and the container's memory cgroup (from the machine: a kind node is a container
// whose cgroups nest in the machine's).

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { waitFor } from '../support/wait-for.ts';
import type { KindCluster } from './kind-cluster.ts';

export const APP_NAMESPACE = 'shop';
export const FAKES_NAMESPACE = 'llm-fakes';
export const OPENAI_KEY = 'sk-node-test-from-a-secret';
export const MODEL = 'gpt-4o-mini';
/** The fake bills every call one million input tokens and no output, so a call's cost is the input price. */
export const FAKE_USAGE = { input: 1_000_000, output: 0 };

const restricted = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** A fake upstream's Deployment and Service in FAKES_NAMESPACE: ports `http` (the API) and `control`. */
function fakeUpstream(name: string, image: string, env: Record<string, string>): object[] {
  const labels = { app: name };
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name, namespace: FAKES_NAMESPACE },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            automountServiceAccountToken: false,
            containers: [
              {
                name: 'fake',
                image,
                imagePullPolicy: 'Never',
                args: ['test/kind/in-pod/fake-upstream.ts'],
                env: Object.entries(env).map(([k, value]) => ({ name: k, value })),
                ports: [
                  { name: 'http', containerPort: 8080 },
                  { name: 'control', containerPort: 9090 },
                ],
                readinessProbe: { httpGet: { path: '/healthz', port: 'control' }, periodSeconds: 2 },
                resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                securityContext: restricted,
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: FAKES_NAMESPACE },
      spec: {
        selector: labels,
        ports: [
          { name: 'http', port: 8080, targetPort: 'http' },
          { name: 'control', port: 9090, targetPort: 'control' },
        ],
      },
    },
  ];
}

const fakeUrl = (name: string) => `http://${name}.${FAKES_NAMESPACE}.svc.cluster.local:8080`;

export function fakeUpstreamManifests(image: string): string {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: FAKES_NAMESPACE } },
    ...fakeUpstream('fake-openai', image, { FAKE_API_KEY: OPENAI_KEY, FAKE_BEHAVIOUR: JSON.stringify({ usage: FAKE_USAGE }) }),
  ]
    .map((o) => stringify(o))
    .join('---\n');
}

/** The upstream base URL the ProxyConfig gives route beta: the fake's Service, by its cluster DNS name. */
export const FAKE_BASE_URL = fakeUrl('fake-openai');

/**
 * A model alias across two upstreams (issue 36): an OpenAI-compatible route of the ProxyConfig's own first, the
 * Anthropic API (gamma-direct) at priority 1, with a dated model id that API takes (a target's model is sent as
 * written, but the bare family id of the price table would be replaced by its dated one). Each is a fake
 * Deployment with its own key from a Secret and its own reply text, so a caller can tell which one answered;
 * prices in USD per million input tokens (the fakes bill FAKE_USAGE, so a call costs its target's price).
 */
export const ALIAS = 'house-chat';
export const ALIAS_TARGETS = {
  primary: {
    fake: 'fake-primary',
    kind: 'openai',
    route: 'house-openai',
    model: 'house-small',
    key: 'sk-house-primary-from-a-secret',
    price: 1,
    text: 'Answered by fake-primary.',
  },
  backup: {
    fake: 'fake-backup',
    kind: 'anthropic',
    route: 'gamma-direct',
    model: 'claude-haiku-4-5-20251001',
    key: 'sk-ant-backup-from-a-secret',
    price: 3,
    text: 'Answered by fake-backup.',
  },
} as const;
const ALIAS_SECRET = 'alias-keys';

/** The alias's two fake upstreams, and the Secret with their keys in the app namespace. */
export function aliasUpstreamManifests(image: string): string {
  return [
    ...Object.values(ALIAS_TARGETS).flatMap((t) =>
      fakeUpstream(t.fake, image, { FAKE_KIND: t.kind, FAKE_API_KEY: t.key, FAKE_BEHAVIOUR: JSON.stringify({ usage: FAKE_USAGE, text: t.text }) }),
    ),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: ALIAS_SECRET, namespace: APP_NAMESPACE, labels: { 'tollgate.dev/credentials': 'true' } },
      stringData: { primary: ALIAS_TARGETS.primary.key, backup: ALIAS_TARGETS.backup.key },
    },
  ]
    .map((o) => stringify(o))
    .join('---\n');
}

export function appNamespaceManifests(): string {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APP_NAMESPACE, labels: { 'tollgate.dev/injection': 'enabled' } } },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'llm-keys', namespace: APP_NAMESPACE, labels: { 'tollgate.dev/credentials': 'true' } },
      stringData: { openai: OPENAI_KEY },
    },
    // Far above what the test spends, and alert-only: it is here so the operator writes a budget ledger, which
    // `helm uninstall` must not leave behind.
    {
      apiVersion: 'tollgate.dev/v1alpha1',
      kind: 'BudgetPolicy',
      metadata: { name: 'roomy', namespace: APP_NAMESPACE },
      spec: { users: ['*'], limitUsd: '1000000', period: 'month', enforcement: 'alert' },
    },
  ]
    .map((o) => stringify(o))
    .join('---\n');
}

/**
 * The app namespace's ProxyConfig. `withRoute` adds a configured route (`/proxy/fake-compat/*`, ADR 0723's
 * revision 2) with a price under its own provider: a field sidecars from before it do not know. `withAlias`
 * adds the model alias ALIAS over ALIAS_TARGETS (its route, gamma-direct's upstream and key, their prices).
 */
export function proxyConfigManifest(inputPerMillion: number, opts: { withRoute?: boolean; withAlias?: boolean } = {}): string {
  const route = {
    name: 'fake-compat',
    format: 'openai-chat',
    baseUrl: FAKE_BASE_URL,
    credential: { kind: 'api-key', apiKey: { secretName: 'llm-keys', key: 'openai' } },
    prices: [{ model: MODEL, input_per_million: inputPerMillion * 2, output_per_million: 0 }],
  };
  const { primary, backup } = ALIAS_TARGETS;
  const aliasRoute = {
    name: primary.route,
    format: 'openai-chat',
    baseUrl: fakeUrl(primary.fake),
    credential: { kind: 'api-key', apiKey: { secretName: ALIAS_SECRET, key: 'primary' } },
    prices: [{ model: primary.model, input_per_million: primary.price, output_per_million: 0 }],
  };
  const routes = [...(opts.withRoute ? [route] : []), ...(opts.withAlias ? [aliasRoute] : [])];
  return stringify({
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'ProxyConfig',
    metadata: { name: 'default', namespace: APP_NAMESPACE },
    spec: {
      pricing: {
        models: [
          { provider: 'openai', model: MODEL, input_per_million: inputPerMillion, output_per_million: 0 },
          ...(opts.withAlias ? [{ provider: 'anthropic', model: backup.model, input_per_million: backup.price, output_per_million: 0 }] : []),
        ],
      },
      upstreams: { beta: { baseUrl: FAKE_BASE_URL }, ...(opts.withAlias ? { [backup.route]: { baseUrl: fakeUrl(backup.fake) } } : {}) },
      credentials: {
        openaiApiKey: { secretName: 'llm-keys', key: 'openai' },
        ...(opts.withAlias ? { anthropicApiKey: { secretName: ALIAS_SECRET, key: 'backup' } } : {}),
      },
      ...(routes.length > 0 ? { routes } : {}),
      ...(opts.withAlias
        ? {
            models: {
              [ALIAS]: {
                targets: [
                  { route: primary.route, model: primary.model },
                  { route: backup.route, model: backup.model, priority: 1 },
                ],
                timeoutMs: 20_000,
              },
            },
          }
        : {}),
    },
  });
}

/** A Deployment like a user's: nothing about Tollgate but the namespace label and the SDK-variable opt-in. */
export function appDeployment(image: string): string {
  const labels = { app: 'chat' };
  return stringify({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'chat', namespace: APP_NAMESPACE },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { 'tollgate.dev/inject-env': 'true' } },
        spec: {
          containers: [
            {
              name: 'app',
              image,
              imagePullPolicy: 'Never',
              args: ['test/kind/in-pod/app.ts'],
              resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
              securityContext: restricted,
            },
          ],
        },
      },
    },
  });
}

/** A bare pod for a server-side dry run: shows what admission would store, webhook included. */
export function probePod(image: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'injection-probe', namespace: APP_NAMESPACE },
    spec: { containers: [{ name: 'app', image, imagePullPolicy: 'Never', args: ['test/kind/in-pod/app.ts'] }] },
  });
}

/**
 * Waits until the webhook injects pods of the labelled namespace (a server-side dry run shows the sidecar). A
 * Ready webhook replica has the operator's CA and its caBundle is in the configuration (its /readyz), so what
 * is left is the pod's address reaching the webhook Service's EndpointSlice and kube-proxy's rules, which the
 * API server's calls to the Service go through. Until then the chart's failurePolicy Ignore lets pods through
 * without a sidecar.
 */
export async function waitForInjection(cluster: KindCluster, image: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    'a dry-run pod in the labelled namespace to be injected',
    async () => {
      const r = await cluster.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: probePod(image) });
      if (r.code !== 0) throw new Error(`kubectl create --dry-run=server failed: ${r.stderr}`);
      const pod = JSON.parse(r.stdout) as { spec: { initContainers?: Array<{ name: string }> } };
      return pod.spec.initContainers?.some((c) => c.name === 'tollgate-proxy') || undefined;
    },
    timeoutMs,
  );
}

/** The first process of a container as seen from inside it, plus whether its root file system is writable. */
export interface ContainerProcess {
  uid: string;
  gid: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  rootWrite: string;
  nodeVersion: string;
}

// Runs with the container's own node: the images have no shell or other tools.
const INSPECT_SCRIPT = `
const fs = require('fs');
const status = fs.readFileSync('/proc/1/status', 'utf8');
const id = (k) => status.match(new RegExp('^' + k + ':\\\\s+(\\\\d+)', 'm'))[1];
const env = Object.fromEntries(fs.readFileSync('/proc/1/environ', 'utf8').split('\\0').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
let rootWrite = 'writable';
try { fs.writeFileSync('/.tollgate-write-probe', 'x'); fs.unlinkSync('/.tollgate-write-probe'); } catch (e) { rootWrite = e.code; }
console.log(JSON.stringify({ uid: id('Uid'), gid: id('Gid'), argv: fs.readFileSync('/proc/1/cmdline', 'utf8').split('\\0').filter(Boolean), cwd: fs.readlinkSync('/proc/1/cwd'), env, rootWrite, nodeVersion: process.versions.node }));
`;

export async function inspectContainer(node: KindCluster, namespace: string, pod: string, container: string): Promise<ContainerProcess> {
  const r = await node.kubectl(['exec', '-n', namespace, pod, '-c', container, '--', 'node', '-e', INSPECT_SCRIPT]);
  if (r.code !== 0) throw new Error(`kubectl exec into ${namespace}/${pod} ${container} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as ContainerProcess;
}

/** Runs client.ts in the app container and parses its one JSON line. */
export async function appClient<T>(node: KindCluster, args: string[]): Promise<T> {
  const r = await node.kubectl(['exec', '-n', APP_NAMESPACE, 'deploy/chat', '-c', 'app', '--', 'node', 'test/kind/in-pod/client.ts', ...args]);
  if (r.code !== 0) throw new Error(`client ${args.join(' ')} failed (${r.code}): ${r.stderr}${r.stdout}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as T;
}

/** A client.ts command left running in the app container of `pod` until stop() closes its stdin and parses its one JSON line. */
export function startInApp<T>(node: KindCluster, pod: string, args: string[], namespace = APP_NAMESPACE): { stop(): Promise<T> } {
  const child = node.kubectlProcess(['exec', '-i', '-n', namespace, pod, '-c', 'app', '--', 'node', 'test/kind/in-pod/client.ts', ...args]);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<T>((resolve, reject) => {
    child.once('close', (code) => {
      const line = stdout.trim().split('\n').at(-1);
      if (code !== 0 || !line) reject(new Error(`client ${args.join(' ')} in ${pod} ended with ${code}: ${stderr}${stdout}`));
      else resolve(JSON.parse(line) as T);
    });
  });
  return {
    stop() {
      child.stdin.end();
      return exited;
    },
  };
}

/** A request a fake upstream pod received, as its control port shows it. */
export interface FakeRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  json: unknown;
}

/** The latest requests (at most 200) a fake upstream pod received, read through the API server's service proxy. */
export async function fakeRequests(node: KindCluster, fake: string): Promise<FakeRequest[]> {
  const r = await node.kubectl(['get', '--raw', `/api/v1/namespaces/${FAKES_NAMESPACE}/services/${fake}:control/proxy/requests`]);
  if (r.code !== 0) throw new Error(`reading ${fake}'s requests failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as FakeRequest[];
}

export interface ContainerMemory {
  pid: number;
  rssBytes: number;
  /** RssAnon: the process's private pages (RSS less the shared binary and libraries). */
  privateBytes: number;
  /** The process's peak resident set (VmHWM). */
  peakRssBytes: number;
  /** The container cgroup's usage and peak: the process plus page cache and tmpfs pages it touched. */
  cgroupBytes: number;
  cgroupPeakBytes: number;
  limitBytes: number;
  oomKills: number;
}

/** The machine's cgroup hierarchies (one per v1 controller, or the v2 one). */
function cgroupHierarchies(): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2')
    .map((f) => f[1]!);
}

function findCgroup(root: string, containerId: string): string | undefined {
  if (!existsSync(root)) return undefined;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const path = join(root, entry.name);
    // cgroupfs names it by the ID; the systemd driver (kind's) cri-containerd-<ID>.scope.
    if (entry.name.includes(containerId)) return path;
    const found = findCgroup(path, containerId);
    if (found) return found;
  }
  return undefined;
}

/** The memory cgroup of a container on a kind node of this machine (cgroup v1 or v2), by its containerd ID. */
export function containerMemoryCgroup(containerId: string): { dir: string; v2: boolean } {
  const hierarchies = cgroupHierarchies();
  const v1 = hierarchies.find((h) => existsSync(join(h, 'memory.limit_in_bytes')));
  const candidates = v1 ? [{ dir: v1, v2: false }] : hierarchies.filter((h) => existsSync(join(h, 'cgroup.controllers'))).map((dir) => ({ dir, v2: true }));
  for (const c of candidates) {
    const dir = findCgroup(c.dir, containerId);
    if (dir) return { dir, v2: c.v2 };
  }
  throw new Error(`no memory cgroup found for container ${containerId}`);
}

const readNumber = (path: string) => Number(readFileSync(path, 'utf8').trim());
const statusKiB = (status: string, key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);

/** Forgets the cgroup's peak so the next reading covers only what follows (cgroup v1; v2 keeps its peak). */
export function resetMemoryPeak(cgroup: { dir: string; v2: boolean }): void {
  if (!cgroup.v2) writeFileSync(join(cgroup.dir, 'memory.max_usage_in_bytes'), '0');
}

export function containerMemory(cgroup: { dir: string; v2: boolean }): ContainerMemory {
  const pid = Number(readFileSync(join(cgroup.dir, 'cgroup.procs'), 'utf8').split('\n').find(Boolean));
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const f = (v1: string, v2: string) => join(cgroup.dir, cgroup.v2 ? v2 : v1);
  const oomText = readFileSync(f('memory.oom_control', 'memory.events'), 'utf8');
  return {
    pid,
    rssBytes: statusKiB(status, 'VmRSS') * 1024,
    privateBytes: statusKiB(status, 'RssAnon') * 1024,
    peakRssBytes: statusKiB(status, 'VmHWM') * 1024,
    cgroupBytes: readNumber(f('memory.usage_in_bytes', 'memory.current')),
    cgroupPeakBytes: readNumber(f('memory.max_usage_in_bytes', 'memory.peak')),
    limitBytes: readNumber(f('memory.limit_in_bytes', 'memory.max')),
    oomKills: Number(/^oom_kill (\d+)/m.exec(oomText)?.[1] ?? 0),
  };
}

export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
