// A kind cluster with Tollgate's images loaded (ADR 0112): one node for the steps a platform team's first
// afternoon takes, three (a control plane and two workers) for what one node cannot show. kind's own
// commands do the work; this module writes the cluster's configuration, keeps its kubeconfig out of
// ~/.kube/config, and holds the machine's cluster lock while a test runs, so two runs never share a machine's
// Docker daemon, nor tear it down under each other.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { runTool, type ToolResult } from '../control-plane/tool-run.ts';
import { waitFor } from '../support/wait-for.ts';
import { tollgateCache } from './cache-dir.ts';
import { lacksSysResource } from './docker-engine.ts';
import { run } from './host-command.ts';
import type { KindAssets, NodeImage } from './kind-assets.ts';

/** One kind cluster per machine at a time; the hand-built node of earlier versions took the same lock. */
export const MACHINE_LOCK = '/run/lock/tollgate-node.lock';
/** `./tollgatew cluster up`'s cluster; the test's are named apart so a user's cluster is never touched. */
export const CLI_CLUSTER = 'tollgate';
export const TEST_CLUSTER = 'tollgate-test';
/** The pod network kind gives the cluster (its default), also where this module sets the network up. */
const POD_SUBNET = '10.244.0.0/16';

export interface KindCluster {
  name: string;
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  kubectl(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  helm(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  /** kubectl left running with its stdin open (e.g. `exec -i` of a command that runs until stdin closes). */
  kubectlProcess(args: string[]): ChildProcessWithoutNullStreams;
  /** The node containers' names (= the Kubernetes node names). */
  nodes(): Promise<string[]>;
  /** What a failure message needs: nodes, pods and recent events. */
  describe(): Promise<string>;
  /** `kind delete cluster`; idempotent. */
  delete(): Promise<void>;
}

export interface CreateOptions {
  name: string;
  /** Worker nodes beside the control plane (0: the control plane runs everything). */
  workers: number;
  assets: KindAssets;
  log: (line: string) => void;
  /** Loaded beside Tollgate's images (the previous release's, for the upgrade steps). */
  extraImages?: string[];
}

const stateDir = (name: string) => tollgateCache('kind', 'clusters', name);

export function kindConfig(opts: { workers: number; node: NodeImage; machineStatus: string }): string {
  const { node } = opts;
  const config: Record<string, unknown> = {
    kind: 'Cluster',
    apiVersion: 'kind.x-k8s.io/v1alpha4',
    nodes: [{ role: 'control-plane' }, ...Array.from({ length: opts.workers }, () => ({ role: 'worker' }))],
    networking: { podSubnet: POD_SUBNET, ...(node.kindnet ? {} : { disableDefaultCNI: true }) },
  };
  // runc cannot set a negative oom_score_adj where the capability bounding set lacks CAP_SYS_RESOURCE.
  if (lacksSysResource(opts.machineStatus)) config.containerdConfigPatches = ['[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true'];
  if (node.local) {
    config.kubeadmConfigPatches = [stringify({ kind: 'ClusterConfiguration', etcd: { local: { imageTag: node.etcdTag } }, dns: { imageTag: node.corednsTag } })];
  }
  return stringify(config);
}

interface NodeJson {
  metadata: { name: string };
  spec: { podCIDR?: string };
  status: { addresses: Array<{ type: string; address: string }> };
}

/**
 * The pod network of a node image without kindnetd (whose source the Go module proxy does not serve): what
 * kindnetd sets up when it starts, done once from the machine for the cluster's fixed set of nodes. Each node
 * gets a bridge conflist for its podCIDR, a route to every other node's podCIDR through that node's address
 * (all nodes share kind's Docker network), and a masquerade rule for pod traffic leaving the pod range.
 */
async function configurePodNetwork(cluster: KindCluster, log: (line: string) => void): Promise<void> {
  const nodes = await waitFor(
    'every node to have a podCIDR',
    async () => {
      const r = await cluster.kubectl(['get', 'nodes', '-o', 'json']);
      if (r.code !== 0) return undefined;
      const items = (JSON.parse(r.stdout) as { items: NodeJson[] }).items;
      return items.every((n) => n.spec.podCIDR) ? items : undefined;
    },
    120_000,
  );
  const address = (n: NodeJson) => n.status.addresses.find((a) => a.type === 'InternalIP')!.address;
  for (const node of nodes) {
    const conflist = JSON.stringify({
      cniVersion: '0.4.0',
      name: 'tollgate-kind',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: node.spec.podCIDR }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    });
    const routes = nodes.filter((n) => n !== node).map((n) => `ip route replace ${n.spec.podCIDR} via ${address(n)}`);
    const script = [
      `cat >/etc/cni/net.d/10-tollgate-kind.conflist <<'EOF'\n${conflist}\nEOF`,
      ...routes,
      `iptables -t nat -C POSTROUTING -s ${POD_SUBNET} ! -d ${POD_SUBNET} -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s ${POD_SUBNET} ! -d ${POD_SUBNET} -j MASQUERADE`,
    ].join('\n');
    await run('docker', ['exec', '-i', node.metadata.name, 'sh', '-e'], { input: script });
  }
  log(`pod network: ${nodes.map((n) => `${n.metadata.name} ${n.spec.podCIDR}`).join(', ')}`);
  await waitFor(
    'every node to be Ready',
    async () => (await cluster.kubectl(['wait', '--for=condition=Ready', 'nodes', '--all', '--timeout=10s'])).code === 0 || undefined,
    180_000,
  );
}

function handle(name: string, assets: Pick<KindAssets, 'controlPlaneBin' | 'kindBin'>): KindCluster {
  const dir = stateDir(name);
  const kubeconfigPath = join(dir, 'kubeconfig');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    KUBECACHEDIR: join(dir, 'kube-cache'),
    HELM_CACHE_HOME: join(dir, 'helm', 'cache'),
    HELM_CONFIG_HOME: join(dir, 'helm', 'config'),
    HELM_DATA_HOME: join(dir, 'helm', 'data'),
  };
  const kind = join(assets.kindBin, 'kind');
  const kubectl = (args: string[], opts: { input?: string } = {}) => runTool(join(assets.controlPlaneBin, 'kubectl'), args, { env, ...opts });
  const kubeConfig = new KubeConfig();
  if (existsSync(kubeconfigPath)) kubeConfig.loadFromFile(kubeconfigPath);
  return {
    name,
    kubeconfigPath,
    kubeConfig,
    kubectl,
    helm: (args, opts = {}) => runTool(join(assets.controlPlaneBin, 'helm'), args, { env, ...opts }),
    kubectlProcess: (args) => spawn(join(assets.controlPlaneBin, 'kubectl'), args, { env, stdio: 'pipe' }),
    async nodes() {
      return (await run(kind, ['get', 'nodes', '--name', name])).stdout.split('\n').filter(Boolean).sort();
    },
    async describe() {
      const r = await kubectl(['get', 'nodes,pods', '-A', '-o', 'wide']);
      const events = await kubectl(['get', 'events', '-A', '--sort-by=.lastTimestamp']);
      return `${r.stdout}${r.stderr}\n${events.stdout.split('\n').slice(-25).join('\n')}`;
    },
    async delete() {
      await run(kind, ['delete', 'cluster', '--name', name, '--kubeconfig', kubeconfigPath]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function kindClusters(kindBin: string): Promise<string[]> {
  const r = await run(join(kindBin, 'kind'), ['get', 'clusters'], { okCodes: [0, 1] });
  return r.stdout.split('\n').filter(Boolean);
}

/** A cluster that exists (made by an earlier `./tollgatew cluster up`), for status and pass-through commands. */
export function existingCluster(name: string, assets: Pick<KindAssets, 'controlPlaneBin' | 'kindBin'>): KindCluster {
  return handle(name, assets);
}

/**
 * Creates the cluster (deleting a leftover of the same name first) and loads Tollgate's images into every
 * node with `kind load docker-image`.
 */
export async function createKindCluster(opts: CreateOptions): Promise<KindCluster> {
  const { assets, log, name } = opts;
  const kind = join(assets.kindBin, 'kind');
  if ((await kindClusters(assets.kindBin)).includes(name)) {
    log(`deleting the cluster ${name} an earlier run left`);
    await run(kind, ['delete', 'cluster', '--name', name]);
  }
  const dir = stateDir(name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'kind.yaml');
  writeFileSync(configPath, kindConfig({ workers: opts.workers, node: assets.nodeImage, machineStatus: readFileSync('/proc/self/status', 'utf8') }));
  const started = Date.now();
  log(`kind create cluster --name ${name} (${opts.workers + 1} node${opts.workers ? 's' : ''}, image ${assets.nodeImage.ref})`);
  // Without a network plugin no node becomes Ready, so kind cannot wait for one; configurePodNetwork does.
  const wait = assets.nodeImage.kindnet ? ['--wait', '5m'] : [];
  await run(kind, ['create', 'cluster', '--name', name, '--image', assets.nodeImage.ref, '--config', configPath, '--kubeconfig', join(dir, 'kubeconfig'), ...wait], {
    showProgress: true,
  });
  const cluster = handle(name, assets);
  if (!assets.nodeImage.kindnet) await configurePodNetwork(cluster, log);
  log(`cluster ${name} Ready in ${Math.round((Date.now() - started) / 1000)} s`);
  const { images } = assets;
  const refs = [images.tollgate.ref, images.sidecar.ref, images.redis.ref, images.testTools.ref, ...(opts.extraImages ?? [])];
  const loaded = Date.now();
  await run(kind, ['load', 'docker-image', '--name', name, ...refs]);
  log(`kind load docker-image: ${refs.join(', ')} in ${Math.round((Date.now() - loaded) / 1000)} s`);
  return cluster;
}
