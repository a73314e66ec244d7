// A connection the node agent observed, as the `process_kprobe` event Tetragon's tcp_connect policy sends
// (provenance.md §1.4, the shape sidecar/src/provenance/tcp-connect-event.ts reads): the connecting process with
// its pod and container, its parent, one sock_arg with the connecting side's saddr:sport -> daddr:dport.

import { encodeEvent } from '../../../sidecar/src/audit/tetragon-protocol.ts';
import type { PodContainer } from './node-pods.ts';
import type { ProcProcess } from './proc-process.ts';
import type { TcpSocket } from './proc-tcp.ts';

export interface ObservedConnect {
  /** When the agent first saw the socket, epoch ms: up to one poll interval after the connect. */
  atMs: number;
  socket: TcpSocket;
  process: ProcProcess;
  parentBinary: string;
  container: PodContainer;
}

const STATES: Record<number, string> = { 1: 'TCP_ESTABLISHED', 2: 'TCP_SYN_SENT', 4: 'TCP_FIN_WAIT1', 5: 'TCP_FIN_WAIT2', 8: 'TCP_CLOSE_WAIT' };

/** Tetragon's exec_id: base64 of node name, process start (ktime, here epoch ns) and pid. */
const execId = (node: string, startNs: bigint, pid: number) => Buffer.from(`${node}:${startNs}:${pid}`).toString('base64');

export function observedConnectEvent(nodeName: string, seen: ObservedConnect): Buffer {
  const { process: p, container: c, socket: s } = seen;
  const pod = {
    namespace: c.namespace,
    name: c.pod,
    container: { id: c.containerId, name: c.container, image: { id: c.imageId, name: c.image } },
    pod_labels: c.labels,
  };
  const startNs = p.startNs;
  const process = {
    exec_id: execId(nodeName, startNs, p.pid),
    pid: { value: p.pid },
    uid: { value: p.uid },
    cwd: p.cwd,
    binary: p.binary,
    arguments: p.arguments,
    flags: 'procFS',
    start_time: { seconds: Number(startNs / 1_000_000_000n), nanos: Number(startNs % 1_000_000_000n) },
    auid: { value: 4294967295 },
    pod,
    docker: c.containerId.replace(/^[a-z]+:\/\//, '').slice(0, 31),
    // The parent's start is not read: its exec_id carries start 0, which no exec event will contradict.
    parent_exec_id: execId(nodeName, 0n, p.ppid),
  };
  return encodeEvent({
    process_kprobe: {
      process,
      parent: { exec_id: process.parent_exec_id, pid: { value: p.ppid }, binary: seen.parentBinary },
      function_name: 'tcp_connect',
      args: [
        {
          sock_arg: {
            family: s.family,
            type: 'SOCK_STREAM',
            protocol: 'IPPROTO_TCP',
            saddr: s.localAddress,
            daddr: s.remoteAddress,
            sport: s.localPort,
            dport: s.remotePort,
            state: STATES[s.state] ?? 'TCP_ESTABLISHED',
          },
        },
      ],
      action: 'KPROBE_ACTION_POST',
      policy_name: 'tollgate-node-agent',
    },
    node_name: nodeName,
    time: { seconds: Math.floor(seen.atMs / 1000), nanos: (seen.atMs % 1000) * 1e6 },
  });
}
