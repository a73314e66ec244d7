// A stand-in for the Tetragon agent on a kind node (ADR 1606): a DaemonSet pod with hostPID and hostNetwork that
// observes the node's new TCP connections in /proc (test/fakes/node-agent/) and serves them as tcp_connect
// `process_kprobe` events on Tetragon's GetEvents gRPC stream (the fake agent's server, test/fakes/tetragon-agent.ts),
// honouring each subscriber's allow_list. Nothing is scripted: an event exists because a process connected.
//
//   node test/kind/in-pod/tetragon-node-agent.ts [--listen 0.0.0.0:54321] [--every-ms 50]
//   env: NODE_NAME (downward API spec.nodeName), and the pod's ServiceAccount (list pods)
//
// Each event sent is logged as one JSON line, so a failing test can show what the agent saw.

import { parseArgs } from 'node:util';
import { ConnectionObserver } from '../../fakes/node-agent/connection-observer.ts';
import { listNodeContainers, type PodContainer } from '../../fakes/node-agent/node-pods.ts';
import { observedConnectEvent } from '../../fakes/node-agent/observed-tcp-connect.ts';
import { startFakeTetragonAgent } from '../../fakes/tetragon-agent.ts';

const { values } = parseArgs({ options: { listen: { type: 'string', default: '0.0.0.0:54321' }, 'every-ms': { type: 'string', default: '50' } } });
const nodeName = process.env.NODE_NAME;
if (!nodeName) {
  console.error('node agent: NODE_NAME is not set (give it spec.nodeName through the downward API)');
  process.exit(2);
}
const everyMs = Number(values['every-ms']);

let containers = new Map<string, PodContainer>();
const refreshPods = async () => {
  try {
    containers = await listNodeContainers(nodeName);
  } catch (error) {
    console.error(JSON.stringify({ msg: 'pod list failed', err: (error as Error).message }));
  }
};
await refreshPods();

const agent = await startFakeTetragonAgent({ listen: values.listen });
const observer = new ConnectionObserver({
  containers: () => containers,
  onConnect(connect) {
    const streams = agent.emit([observedConnectEvent(nodeName, connect)]);
    const { socket: s, process: p, container: c } = connect;
    console.log(
      JSON.stringify({
        msg: 'tcp_connect',
        pod: `${c.namespace}/${c.pod}`,
        container: c.container,
        pid: p.pid,
        binary: p.binary,
        connection: `${s.localAddress}:${s.localPort} -> ${s.remoteAddress}:${s.remotePort}`,
        streams,
      }),
    );
  },
});
console.log(JSON.stringify({ msg: 'node agent listening', address: agent.address, node: nodeName, everyMs, pods: new Set([...containers.values()].map((c) => c.pod)).size }));

// A new pod's containers reach the list a moment after their processes start: while connections wait for
// theirs, the list is read every poll; otherwise every second.
let lastList = Date.now();
let stopping = false;
const loop = async () => {
  while (!stopping) {
    const began = Date.now();
    await observer.poll().catch((error: unknown) => console.error(JSON.stringify({ msg: 'poll failed', err: (error as Error).message })));
    if (observer.pending > 0 || Date.now() - lastList >= 1000) {
      lastList = Date.now();
      await refreshPods();
    }
    const left = everyMs - (Date.now() - began);
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  }
};
const polling = loop();

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    stopping = true;
    void polling.then(() => agent.stop()).finally(() => process.exit(0));
  });
}
