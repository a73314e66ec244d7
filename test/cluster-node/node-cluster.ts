// A real single-node Kubernetes 1.34 cluster on this machine (ADR 0110): etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet with containerd and runc, kube-proxy and CoreDNS, all
// as processes in one network namespace of their own, with the images built by images/node-images.ts imported
// into containerd. startNodeCluster() first cleans up whatever an earlier run left, and stop() (or
// `./tollgatew cluster down`) leaves the machine as it was.

import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ManagedProcess } from '../control-plane/managed-process.ts';
import { httpsGet, waitUntilHealthy, StartupError, type TlsClient } from '../control-plane/health-probe.ts';
import { runTool, type ToolResult } from '../control-plane/tool-run.ts';
import { acquireHostLock, type HostLock } from './host-lock.ts';
import { ensureNodePackages } from './host-packages.ts';
import { recordHostBefore } from './host-state.ts';
import type { NodeImages } from './images/node-images.ts';
import {
  containerdArgs,
  containerdConfig,
  controllerManagerArgs,
  coreDnsArgs,
  corefile,
  kubeletArgs,
  kubeletConfig,
  kubeProxyArgs,
  NODE_FOLDERS,
  nodeApiServerArgs,
  nodeEtcdArgs,
  schedulerArgs,
} from './node-components.ts';
import { CGROUP_ROOT, CONTAINERD_SOCKET, LOCK_PATH, NODE_NAME, nodeNetwork, paths, POD_BRIDGE, PORTS, STATE_DIR, type NodeNetwork } from './node-layout.ts';
import { cniConfig, createNodeNetwork } from './node-network.ts';
import { createNodePki, type NodePki } from './node-pki.ts';
import { startComponent } from './node-process.ts';
import { clusterDnsLookup, httpStatus, selfSignedHttpsStatus } from './node-probes.ts';
import { cgroupHierarchies, nodeProcesses, tearDownNode, type TeardownReport } from './node-teardown.ts';

export type NodeOwner = 'test' | 'cli';

export interface NodeCluster {
  network: NodeNetwork;
  /** https://<node address>:6443, reachable from the machine. */
  server: string;
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  caPem: string;
  controlPlaneBin: string;
  nodeBin: string;
  kubectl(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  helm(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  /** ctr against the node's containerd, in the CRI namespace. */
  ctr(args: string[]): Promise<ToolResult>;
  /** The last lines of every component's log, for failure messages. */
  logTails(lines?: number): string;
  /** Tears the node down (idempotent) and releases the machine's node lock. */
  stop(): Promise<TeardownReport>;
}

export interface StartOptions {
  owner: NodeOwner;
  controlPlaneBin: string;
  nodeBin: string;
  images: NodeImages;
  log?: (line: string) => void;
  /** Called once leftovers of earlier runs are gone and before anything changes (a test's baseline). */
  beforeStart?: () => void;
}

/** Another `./tollgatew cluster up` node is running: it is the user's, so it is left alone. */
export class NodeBusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NodeBusyError';
  }
}

interface OwnerRecord {
  owner: NodeOwner;
  pid: number;
  startedAt: string;
}

const STARTUP_TIMEOUT_MS = 180_000;

function readOwner(): OwnerRecord | undefined {
  try {
    return JSON.parse(readFileSync(paths.ownerFile, 'utf8')) as OwnerRecord;
  } catch {
    return undefined;
  }
}

/** A node brought up by `./tollgatew cluster up` whose components still run. */
export function runningCliNode(): OwnerRecord | undefined {
  const owner = readOwner();
  return owner?.owner === 'cli' && nodeProcesses().length > 0 ? owner : undefined;
}

function createCgroupRoot(): void {
  for (const hierarchy of cgroupHierarchies()) {
    const dir = join(hierarchy, CGROUP_ROOT);
    mkdirSync(dir, { recursive: true });
    // A new cgroup v1 cpuset has no CPUs or memory nodes; a process cannot join it until they are copied down.
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(hierarchy, file))) writeFileSync(join(dir, file), readFileSync(join(hierarchy, file), 'utf8'));
    }
  }
}

export function tools(net: NodeNetwork, controlPlaneBin: string) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: paths.adminKubeconfig,
    KUBECACHEDIR: paths.kubeCache,
    HELM_CACHE_HOME: join(paths.helmHome, 'cache'),
    HELM_CONFIG_HOME: join(paths.helmHome, 'config'),
    HELM_DATA_HOME: join(paths.helmHome, 'data'),
  };
  return {
    env,
    kubectl: (args: string[], opts: { input?: string } = {}) => runTool(join(controlPlaneBin, 'kubectl'), args, { env, ...opts }),
    helm: (args: string[], opts: { input?: string } = {}) => runTool(join(controlPlaneBin, 'helm'), args, { env, ...opts }),
    ctr: (args: string[]) => runTool('ctr', ['--address', CONTAINERD_SOCKET, '--namespace', 'k8s.io', ...args], { env }),
    server: `https://${net.nodeAddress}:${PORTS.apiServer}`,
  };
}

export function logTails(lines = 25): string {
  if (!existsSync(paths.logs)) return '(no node logs)';
  return readdirSync(paths.logs)
    .sort()
    .map((file) => {
      const text = readFileSync(join(paths.logs, file), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
      return `--- ${file} (last ${lines} lines)\n${text}`;
    })
    .join('\n');
}

export async function startNodeCluster(opts: StartOptions): Promise<NodeCluster> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`[node] ${line}\n`));
  const lock: HostLock = await acquireHostLock(LOCK_PATH, 'node');
  const net = nodeNetwork();
  const t = tools(net, opts.controlPlaneBin);
  const started = Date.now();
  const procs: ManagedProcess[] = [];
  const pdeathsig = opts.owner === 'test';
  let stopped = false;
  const stop = async (): Promise<TeardownReport> => {
    if (stopped) return { processes: 0, mounts: 0, cgroups: 0, links: 0, host: [], found: false };
    stopped = true;
    try {
      return tearDownNode();
    } finally {
      lock.release();
    }
  };

  try {
    const busy = runningCliNode();
    if (busy) {
      throw new NodeBusyError(
        `a node brought up by \`./tollgatew cluster up\` (pid ${busy.pid}, ${busy.startedAt}) is running on this machine; \`./tollgatew cluster down\` removes it`,
      );
    }
    const leftovers = tearDownNode();
    if (leftovers.found) {
      log(
        `cleaned up a node an earlier run left: ${leftovers.processes} processes, ${leftovers.mounts} mounts, ${leftovers.cgroups} cgroups${leftovers.host.length ? `, ${leftovers.host.join(', ')}` : ''}`,
      );
    }
    await ensureNodePackages(log);
    opts.beforeStart?.();

    mkdirSync(STATE_DIR, { recursive: true, mode: 0o755 });
    recordHostBefore(paths.hostBefore);
    writeFileSync(paths.ownerFile, JSON.stringify({ owner: opts.owner, pid: process.pid, startedAt: new Date().toISOString() } satisfies OwnerRecord));
    for (const dir of NODE_FOLDERS) mkdirSync(dir, { recursive: true });

    const pki: NodePki = await createNodePki(net);
    writeFileSync(paths.containerdConfig, containerdConfig(opts.images.pause.ref));
    writeFileSync(paths.kubeletConfig, kubeletConfig(net, pki));
    writeFileSync(join(paths.cniConfDir, '10-tollgate-node.conflist'), cniConfig(net, POD_BRIDGE, paths.cniIpam));
    writeFileSync(paths.resolvConf, '');
    writeFileSync(paths.corefile, corefile(net, pki.kubeconfig.admin));

    await createNodeNetwork(net);
    createCgroupRoot();

    const start = (name: string, command: string, args: string[]) => {
      const p = startComponent({ name, command, args, pdeathsig });
      procs.push(p);
      return p;
    };
    const cp = (name: string) => join(opts.controlPlaneBin, name);
    const nb = (name: string) => join(opts.nodeBin, name);
    const admin: TlsClient = { caPem: pki.caPem, certPem: pki.admin.certPem, keyPem: pki.admin.keyPem };
    const api = async (path: string) => httpsGet(`${t.server}${path}`, admin);

    start('etcd', cp('etcd'), nodeEtcdArgs());
    const apiServer = start('kube-apiserver', cp('kube-apiserver'), nodeApiServerArgs(net, pki));
    const containerd = start('containerd', 'containerd', containerdArgs());
    await waitUntilHealthy(apiServer, 'ready /readyz', async () => (await api('/readyz')).status === 200, STARTUP_TIMEOUT_MS);
    log(`API server ready at ${t.server} (${Math.round((Date.now() - started) / 1000)} s)`);

    const controllerManager = start('kube-controller-manager', nb('kube-controller-manager'), controllerManagerArgs(net, pki));
    const scheduler = start('kube-scheduler', nb('kube-scheduler'), schedulerArgs(net, pki));
    await waitUntilHealthy(containerd, 'its socket', async () => (await t.ctr(['version'])).code === 0, STARTUP_TIMEOUT_MS);
    for (const image of [opts.images.pause, opts.images.tollgate, opts.images.sidecar, opts.images.testTools]) {
      const imported = await t.ctr(['images', 'import', image.archive]);
      if (imported.code !== 0) throw new StartupError(`ctr images import ${image.archive} failed: ${imported.stderr}`);
    }
    log(`imported ${opts.images.tollgate.ref}, ${opts.images.sidecar.ref}, ${opts.images.testTools.ref}, ${opts.images.pause.ref}`);

    const kubelet = start('kubelet', nb('kubelet'), kubeletArgs(net, pki));
    const kubeProxy = start('kube-proxy', nb('kube-proxy'), kubeProxyArgs(net, pki));
    const coreDns = start('coredns', nb('coredns'), coreDnsArgs());

    const wait = (proc: ManagedProcess, what: string, probe: () => Promise<boolean>) => waitUntilHealthy(proc, what, probe, STARTUP_TIMEOUT_MS);
    await wait(controllerManager, 'healthy /healthz', async () => (await selfSignedHttpsStatus(`https://${net.nodeAddress}:${PORTS.controllerManager}/healthz`)) === 200);
    await wait(scheduler, 'healthy /healthz', async () => (await selfSignedHttpsStatus(`https://${net.nodeAddress}:${PORTS.scheduler}/healthz`)) === 200);
    await wait(kubelet, 'a Ready node', async () => {
      const res = await api(`/api/v1/nodes/${NODE_NAME}`);
      if (res.status !== 200) return false;
      const node = JSON.parse(res.body) as { status?: { conditions?: Array<{ type: string; status: string }> } };
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
    });
    await wait(kubeProxy, 'healthy /healthz', async () => (await httpStatus(`http://${net.nodeAddress}:${PORTS.kubeProxyHealthz}/healthz`)) === 200);
    await wait(coreDns, 'an answer for kubernetes.default', async () =>
      (await clusterDnsLookup(net.nodeAddress, 'kubernetes.default.svc.cluster.local')).includes(net.kubernetesServiceIp),
    );
    await wait(controllerManager, 'the default ServiceAccount', async () => (await api('/api/v1/namespaces/default/serviceaccounts/default')).status === 200);
    log(`node ${NODE_NAME} Ready in ${Math.round((Date.now() - started) / 1000)} s`);

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(paths.adminKubeconfig);
    if (opts.owner === 'cli') lock.release(); // the node outlives this process; its owner record marks it
    return {
      network: net,
      server: t.server,
      kubeconfigPath: paths.adminKubeconfig,
      kubeConfig,
      caPem: pki.caPem,
      controlPlaneBin: opts.controlPlaneBin,
      nodeBin: opts.nodeBin,
      kubectl: t.kubectl,
      helm: t.helm,
      ctr: t.ctr,
      logTails,
      stop,
    };
  } catch (err) {
    const tails = logTails();
    if (!(err instanceof NodeBusyError)) {
      try {
        tearDownNode();
      } catch (teardownError) {
        log(`teardown after a failed start failed too: ${(teardownError as Error).message}`);
      }
    }
    lock.release();
    if (err instanceof NodeBusyError) throw err;
    throw new StartupError(`the node did not come up: ${err instanceof Error ? err.message : String(err)}\n${tails}`);
  }
}
