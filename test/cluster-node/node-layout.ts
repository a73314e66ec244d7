// Where the node lives on the machine: every folder, name, address and port in one place, so set-up and
// teardown (which must also clean up after a run that was killed) agree on what is the node's. See ADR 0110.

export const NODE_NAME = 'tollgate-node';

/** Persistent state: containerd's and the kubelet's roots, etcd, certificates, configs, logs. */
export const STATE_DIR = '/var/lib/tollgate-node';
/** Runtime state: containerd's state and socket, runc's root, the network namespace handle. */
export const RUN_DIR = '/run/tollgate-node';
/** Serialises node runs on the machine (two nodes would share names, ports and cgroups). Never removed. */
export const LOCK_PATH = '/run/lock/tollgate-node.lock';

export const NETNS_PATH = `${RUN_DIR}/netns`;
export const CONTAINERD_SOCKET = `${RUN_DIR}/containerd.sock`;
/** A cgroup of that name under the root of every hierarchy holds all the node's pods. */
export const CGROUP_ROOT = 'tollgate-node';

/** The veth pair joining the machine to the node's network namespace, and the pods' bridge inside it. */
export const HOST_LINK = 'tgnode0';
export const NODE_LINK = 'tgnode1';
export const POD_BRIDGE = 'tgnode-cni0';

export const PORTS = {
  apiServer: 6443,
  etcd: 2379, // on the namespace's own loopback only
  kubelet: 10250,
  kubeletHealthz: 10248,
  kubeProxyHealthz: 10256,
  scheduler: 10259,
  controllerManager: 10257,
  dns: 53,
} as const;

export interface NodeNetwork {
  /** The /16 all the node's addresses come from. */
  cidr: string;
  /** The machine's end of the veth pair (/30). */
  hostAddress: string;
  /** The node's address: API server, kubelet, DNS; the namespace's end of the veth pair. */
  nodeAddress: string;
  transitPrefix: number;
  podCidr: string;
  podGateway: string;
  serviceCidr: string;
  /** The `kubernetes` Service's ClusterIP: the first address of the service range. */
  kubernetesServiceIp: string;
}

const DEFAULT_NETWORK = '10.254.0.0/16';

/** TOLLGATE_NODE_NETWORK (a /16, default 10.254.0.0/16) split into the node's ranges. */
export function nodeNetwork(cidr = process.env.TOLLGATE_NODE_NETWORK || DEFAULT_NETWORK): NodeNetwork {
  const m = /^(\d{1,3})\.(\d{1,3})\.0\.0\/16$/.exec(cidr);
  if (m === null || Number(m[1]) > 255 || Number(m[2]) > 255) {
    throw new Error(`TOLLGATE_NODE_NETWORK must be a /16 such as ${DEFAULT_NETWORK} (got ${JSON.stringify(cidr)})`);
  }
  const p = `${m[1]}.${m[2]}`;
  return {
    cidr,
    hostAddress: `${p}.0.1`,
    nodeAddress: `${p}.0.2`,
    transitPrefix: 30,
    podCidr: `${p}.1.0/24`,
    podGateway: `${p}.1.1`,
    serviceCidr: `${p}.2.0/24`,
    kubernetesServiceIp: `${p}.2.1`,
  };
}

/** Files and folders under STATE_DIR. */
export const paths = {
  pki: `${STATE_DIR}/pki`,
  kubeconfigs: `${STATE_DIR}/kubeconfigs`,
  adminKubeconfig: `${STATE_DIR}/kubeconfigs/admin.kubeconfig`,
  logs: `${STATE_DIR}/logs`,
  etcdData: `${STATE_DIR}/etcd`,
  containerdRoot: `${STATE_DIR}/containerd`,
  containerdConfig: `${STATE_DIR}/containerd.toml`,
  containerdState: `${RUN_DIR}/containerd`,
  runcRoot: `${RUN_DIR}/runc`,
  kubeletRoot: `${STATE_DIR}/kubelet`,
  kubeletConfig: `${STATE_DIR}/kubelet-config.yaml`,
  podLogs: `${STATE_DIR}/pod-logs`,
  cniConfDir: `${STATE_DIR}/cni/net.d`,
  cniIpam: `${STATE_DIR}/cni/ipam`,
  resolvConf: `${STATE_DIR}/resolv.conf`,
  corefile: `${STATE_DIR}/Corefile`,
  helmHome: `${STATE_DIR}/helm`,
  kubeCache: `${STATE_DIR}/kube-cache`,
  /** Who brought the node up, and what the machine looked like before (host-state.ts). */
  ownerFile: `${STATE_DIR}/owner.json`,
  hostBefore: `${STATE_DIR}/host-before.json`,
  pids: `${STATE_DIR}/pids`,
} as const;

/** Where Debian's containernetworking-plugins package puts the CNI plugins. */
export const CNI_BIN_DIR = '/usr/lib/cni';
