// Command lines and configuration files of the node's components. Every path a component would otherwise
// default to a machine-wide location (/var/lib/kubelet, /var/log/pods, /opt/containerd, /run/containerd/runc,
// /var/lib/cni, /var/run/netns …) is pointed at the node's own folders. See docs/real-node.md.

import { etcdArgs } from '../control-plane/control-plane.ts';
import { CGROUP_ROOT, CNI_BIN_DIR, CONTAINERD_SOCKET, NODE_NAME, paths, PORTS, RUN_DIR, type NodeNetwork } from './node-layout.ts';
import type { NodePki } from './node-pki.ts';

export function nodeEtcdArgs(): string[] {
  return etcdArgs({ port: PORTS.etcd, dataDir: paths.etcdData });
}

export function nodeApiServerArgs(net: NodeNetwork, pki: NodePki): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${PORTS.etcd}`,
    // The node's address, not loopback: pods reach the `kubernetes` Service's endpoint there.
    `--bind-address=${net.nodeAddress}`,
    `--advertise-address=${net.nodeAddress}`,
    `--secure-port=${PORTS.apiServer}`,
    `--cert-dir=${paths.pki}/apiserver-generated`,
    `--tls-cert-file=${pki.apiServerCert}`,
    `--tls-private-key-file=${pki.apiServerKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--service-cluster-ip-range=${net.serviceCidr}`,
    '--allow-privileged=true',
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki.serviceAccountPub}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--kubelet-client-certificate=${pki.apiServerKubeletClientCert}`,
    `--kubelet-client-key=${pki.apiServerKubeletClientKey}`,
    '--kubelet-preferred-address-types=InternalIP',
    '--profiling=false',
    '--v=1',
  ];
}

export function controllerManagerArgs(net: NodeNetwork, pki: NodePki): string[] {
  const kubeconfig = pki.kubeconfig.controllerManager;
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--bind-address=${net.nodeAddress}`,
    `--secure-port=${PORTS.controllerManager}`,
    '--leader-elect=false',
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
    '--use-service-account-credentials=true',
    `--cluster-name=${NODE_NAME}`,
    '--v=1',
  ];
}

export function schedulerArgs(net: NodeNetwork, pki: NodePki): string[] {
  const kubeconfig = pki.kubeconfig.scheduler;
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--bind-address=${net.nodeAddress}`,
    `--secure-port=${PORTS.scheduler}`,
    '--leader-elect=false',
    '--v=1',
  ];
}

export function kubeProxyArgs(net: NodeNetwork, pki: NodePki): string[] {
  return [
    `--kubeconfig=${pki.kubeconfig.kubeProxy}`,
    `--hostname-override=${NODE_NAME}`,
    '--proxy-mode=iptables',
    `--cluster-cidr=${net.podCidr}`,
    // Pods share one bridge: without SNAT a backend would answer a client on the same bridge directly, past
    // the connection tracking that undoes the Service's DNAT.
    '--masquerade-all',
    // Leave the machine-wide conntrack settings alone (0 = do not change).
    '--conntrack-max-per-core=0',
    '--conntrack-tcp-timeout-established=0s',
    '--conntrack-tcp-timeout-close-wait=0s',
    `--healthz-bind-address=${net.nodeAddress}:${PORTS.kubeProxyHealthz}`,
    '--metrics-bind-address=127.0.0.1:10249',
    '--v=1',
  ];
}

export function kubeletArgs(net: NodeNetwork, pki: NodePki): string[] {
  return [
    `--config=${paths.kubeletConfig}`,
    `--kubeconfig=${pki.kubeconfig.kubelet}`,
    `--root-dir=${paths.kubeletRoot}`,
    `--cert-dir=${paths.kubeletRoot}/pki`,
    `--hostname-override=${NODE_NAME}`,
    `--node-ip=${net.nodeAddress}`,
    '--v=1',
  ];
}

export function kubeletConfig(net: NodeNetwork, pki: NodePki): string {
  return JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: net.nodeAddress,
      port: PORTS.kubelet,
      readOnlyPort: 0,
      healthzBindAddress: net.nodeAddress,
      healthzPort: PORTS.kubeletHealthz,
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: pki.caCert } },
      authorization: { mode: 'Webhook' },
      containerRuntimeEndpoint: `unix://${CONTAINERD_SOCKET}`,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: `/${CGROUP_ROOT}`,
      // Kubernetes 1.35 refuses cgroup v1 unless told otherwise; 1.34 only warns. Many VMs are still on v1.
      failCgroupV1: false,
      clusterDNS: [net.nodeAddress],
      clusterDomain: 'cluster.local',
      // An empty file: pods get the cluster's search path and DNS server and nothing of the machine's.
      resolvConf: paths.resolvConf,
      podLogsDir: paths.podLogs,
      failSwapOn: false,
      // A test VM's disk is small and shared; evict only when it is really full.
      evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      serializeImagePulls: false,
      maxPods: 50,
      rotateCertificates: false,
      protectKernelDefaults: false,
    },
    null,
    2,
  );
}

export function containerdConfig(sandboxImage: string): string {
  return `# The node's own containerd: its own root, state, socket and runc root, so it never touches a system containerd.
version = 2
root = "${paths.containerdRoot}"
state = "${paths.containerdState}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "${CONTAINERD_SOCKET}"

[ttrpc]
  address = "${CONTAINERD_SOCKET}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "${paths.containerdRoot}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  # Without CAP_SYS_RESOURCE (missing from many VMs' bounding set) runc cannot lower oom_score_adj below the
  # caller's, and every sandbox fails with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  tolerate_missing_hugepages_controller = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${paths.runcRoot}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${paths.cniConfDir}"
    max_conf_num = 1
`;
}

export function corefile(net: NodeNetwork, adminKubeconfig: string): string {
  // No `forward`: names outside the cluster are not resolved, as nothing may leave the machine.
  return `.:${PORTS.dns} {
    bind ${net.nodeAddress}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${adminKubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`;
}

export const containerdArgs = () => ['--config', paths.containerdConfig];
export const coreDnsArgs = () => ['-conf', paths.corefile];

/** The folders set-up creates before any component starts. */
export const NODE_FOLDERS = [paths.logs, paths.etcdData, paths.containerdRoot, paths.kubeletRoot, paths.podLogs, paths.cniConfDir, paths.cniIpam, paths.helmHome, RUN_DIR];
