// The node's network: its own network namespace, held open by a bind mount in RUN_DIR, joined to the
// machine by one veth pair. Everything Kubernetes does to networking happens inside that namespace: the pods'
// bridge, their veths, kube-proxy's iptables rules, the kubelet's chains, ip_forward. Neither the namespace
// nor the pods get a default route, so nothing leaves the machine; the machine reaches the node's address
// (API server, DNS) over the veth. Deleting the namespace removes all of it at once (ADR 0110).

import { mkdirSync, writeFileSync } from 'node:fs';
import { run } from './host-command.ts';
import { HOST_LINK, NETNS_PATH, NODE_LINK, POD_BRIDGE, RUN_DIR, type NodeNetwork } from './node-layout.ts';

const inNamespace = (args: string[]) => run('nsenter', [`--net=${NETNS_PATH}`, '--', ...args]);

function ipv4ToNumber(ip: string): number {
  return ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

function overlaps(a: string, b: string): boolean {
  const [aIp, aLen] = a.split('/') as [string, string];
  const [bIp, bLen] = b.split('/') as [string, string];
  const len = Math.min(Number(aLen), Number(bLen));
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  return (ipv4ToNumber(aIp) & mask) >>> 0 === (ipv4ToNumber(bIp) & mask) >>> 0;
}

/** Refuses a range the machine already routes (a VPN, a Docker network): the node would shadow it. */
export async function checkRangeIsFree(net: NodeNetwork): Promise<void> {
  const routes = JSON.parse((await run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'])).stdout) as Array<{ dst: string }>;
  for (const r of routes) {
    if (r.dst === 'default' || r.dst === undefined) continue;
    const dst = r.dst.includes('/') ? r.dst : `${r.dst}/32`;
    if (overlaps(dst, net.cidr)) {
      throw new Error(`the node's range ${net.cidr} overlaps the machine's route to ${dst}; choose another /16 with TOLLGATE_NODE_NETWORK`);
    }
  }
}

export async function createNodeNetwork(net: NodeNetwork): Promise<void> {
  await checkRangeIsFree(net);
  mkdirSync(RUN_DIR, { recursive: true });
  writeFileSync(NETNS_PATH, '');
  await run('unshare', [`--net=${NETNS_PATH}`, 'true']);
  // Create the pair inside the namespace, then hand one end to this process's (the machine's) namespace.
  await inNamespace(['ip', 'link', 'add', NODE_LINK, 'type', 'veth', 'peer', 'name', HOST_LINK]);
  await inNamespace(['ip', 'link', 'set', HOST_LINK, 'netns', String(process.pid)]);
  await run('ip', ['address', 'add', `${net.hostAddress}/${net.transitPrefix}`, 'dev', HOST_LINK]);
  await run('ip', ['link', 'set', HOST_LINK, 'up']);
  await inNamespace(['ip', 'link', 'set', 'lo', 'up']);
  await inNamespace(['ip', 'address', 'add', `${net.nodeAddress}/${net.transitPrefix}`, 'dev', NODE_LINK]);
  await inNamespace(['ip', 'link', 'set', NODE_LINK, 'up']);
  // Pod to Service traffic is routed through the namespace (DNAT, then back out the bridge).
  await inNamespace(['sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  // The pods' bridge is made here rather than by the CNI plugin on the first pod (which then reuses it), so
  // the namespace can route the service range to it. A connection from the namespace itself (the API server
  // calling a webhook's ClusterIP) needs a route before kube-proxy's DNAT applies, and with no default route
  // there would be none: "network is unreachable". A ClusterIP nothing answers for stays on the bridge.
  await inNamespace(['ip', 'link', 'add', POD_BRIDGE, 'type', 'bridge']);
  await inNamespace(['ip', 'address', 'add', `${net.podGateway}/${net.podCidr.split('/')[1]}`, 'dev', POD_BRIDGE]);
  await inNamespace(['ip', 'link', 'set', POD_BRIDGE, 'up']);
  await inNamespace(['ip', 'route', 'add', net.serviceCidr, 'dev', POD_BRIDGE]);
}

/** The CNI network: a bridge of its own, host-local addresses, routes to the node's ranges only. */
export function cniConfig(net: NodeNetwork, bridge: string, ipamDir: string): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'tollgate-node',
      plugins: [
        {
          type: 'bridge',
          bridge,
          isGateway: true,
          isDefaultGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: ipamDir,
            ranges: [[{ subnet: net.podCidr, gateway: net.podGateway }]],
            // No default route: a pod reaches other pods, Services and the node, and nothing else.
            routes: [{ dst: net.serviceCidr }, { dst: `${net.nodeAddress}/32` }],
          },
        },
      ],
    },
    null,
    2,
  );
}
