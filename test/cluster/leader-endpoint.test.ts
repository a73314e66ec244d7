// The push Service routes to the leader only (ADR 0721): it has no selector, and the Lease holder writes the
// Service's EndpointSlice with its own pod IP. Two `tollgate operator` processes with the chart's RBAC
// and fake pod IPs from TEST-NET-1 (written, never dialled: there is no kube-proxy here, and the API server refuses
// loopback endpoint addresses) against a real
// kube-apiserver: the slice follows the leader through a SIGKILL failover and a SIGTERM hand-over.

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EndpointSlice } from '../../operator/src/kube/leader-endpoint.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { eventually, installOperatorPrerequisites, KubeApi, leaseHolder, OPERATOR_NAMESPACE, type OperatorProcess, startOperatorProcess, tempDir } from './operator-fixtures.ts';

const SERVICE = 'tollgate-operator';
const SLICES = `/apis/discovery.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/endpointslices`;

/** What a client of the Service would be sent to: ready addresses with the port named grpc. */
function routedTo(slice: EndpointSlice | undefined): string[] {
  if (!slice) return [];
  const port = slice.ports?.find((p) => p.name === 'grpc')?.port;
  return (slice.endpoints ?? []).filter((e) => e.conditions?.ready !== false).flatMap((e) => e.addresses.map((a) => `${a}:${port}`));
}

/** Every state of the slice as a watch delivers it, in order. */
function watchSlice(api: KubeApi): { states: Array<{ routed: string[]; leader?: string }>; stop(): void } {
  const states: Array<{ routed: string[]; leader?: string }> = [];
  const abort = new AbortController();
  void (async () => {
    const body = await api.stream(SLICES, { watch: true, fieldSelector: `metadata.name=${SERVICE}` }, abort.signal);
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of body) {
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const event = JSON.parse(buffered.slice(0, nl)) as { type: string; object: EndpointSlice };
        buffered = buffered.slice(nl + 1);
        const leader = event.object.metadata.annotations?.['tollgate.dev/leader'];
        states.push({ routed: event.type === 'DELETED' ? [] : routedTo(event.object), ...(leader ? { leader } : {}) });
      }
    }
  })().catch(() => undefined);
  return { states, stop: () => abort.abort() };
}

describe('the push Service routes to the leader only', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let kubeconfig: string;
  let grpcPort: number;
  const procs: OperatorProcess[] = [];
  const start = (identity: string, podIP: string) => {
    const p = startOperatorProcess({ kubeconfig, identity, grpcPort, logDir: dir.path, podIP });
    procs.push(p);
    return p;
  };
  const routed = async () => {
    try {
      return routedTo(await api.get<EndpointSlice>(`${SLICES}/${SERVICE}`));
    } catch {
      return [];
    }
  };
  const routesOnlyTo = (ip: string, timeoutMs = 30_000) =>
    eventually(
      `the push Service to route to ${ip} only`,
      async () => {
        const now = await routed();
        return now.length === 1 && now[0] === `${ip}:${grpcPort}` ? now : undefined;
      },
      timeoutMs,
    );

  beforeAll(async () => {
    dir = tempDir('tollgate-leader-endpoint-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    grpcPort = await freePort();
    // The chart's push Service: no selector, so the endpointslice controller leaves its endpoints to the leader.
    await api.post(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: SERVICE },
      spec: { ports: [{ name: 'grpc', port: 8443, protocol: 'TCP' }] },
    });
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop(2_000)));
    await cp?.stop();
    dir?.remove();
  });

  it('lists exactly the leader, with the Service label and the grpc port, ready', async () => {
    const a = start('operator-a', '192.0.2.2');
    await eventually('operator-a to lead', async () => (await leaseHolder(api)) === 'operator-a', 60_000);
    start('operator-b', '192.0.2.3');
    await routesOnlyTo('192.0.2.2');
    // The standby has synced and is campaigning, and still the slice names only the leader.
    await eventually('operator-b to observe the leader', () => readFileSync(procs[1]!.logPath, 'utf8').includes('observed leader'));
    const slice = await api.get<EndpointSlice>(`${SLICES}/${SERVICE}`);
    expect(slice).toMatchObject({
      metadata: { labels: { 'kubernetes.io/service-name': SERVICE }, annotations: { 'tollgate.dev/leader': 'operator-a' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['192.0.2.2'], conditions: { ready: true } }],
      ports: [{ name: 'grpc', port: grpcPort, protocol: 'TCP' }],
    });
    const all = await api.get<{ items: EndpointSlice[] }>(SLICES, { query: { labelSelector: `kubernetes.io/service-name=${SERVICE}` } });
    expect(all.items.map((s) => s.metadata.name)).toEqual([SERVICE]);
    expect(a.hasExited()).toBe(false);
  });

  it('a killed leader is replaced in the slice by the standby that takes its Lease', async () => {
    const [a] = procs;
    a!.kill();
    await a!.exited;
    // The dead leader cannot withdraw: the slice keeps it until the Lease expires and the standby overwrites it.
    await routesOnlyTo('192.0.2.3');
    expect(await leaseHolder(api)).toBe('operator-b');
    // Its log line reaches the file in its own time, possibly after the slice it wrote is visible.
    await eventually('operator-b to log the endpoint it published', () => readFileSync(procs[1]!.logPath, 'utf8').includes('published leader endpoint'));
  });

  it('a leader stopped with SIGTERM empties the slice before the next leader lists itself', async () => {
    start('operator-c', '192.0.2.4');
    await eventually('operator-c to observe the leader', () => readFileSync(procs[2]!.logPath, 'utf8').includes('"leader":"operator-b"'));
    const watch = watchSlice(api);
    try {
      await eventually('the watch to deliver the current slice', () => watch.states.length > 0);
      await procs[1]!.stop(10_000);
      expect(await procs[1]!.exited).toBe('exited with code 0');
      await routesOnlyTo('192.0.2.4');
      const log = readFileSync(procs[1]!.logPath, 'utf8');
      expect(log).toContain('withdrew leader endpoint');
      expect(log).toContain('released leadership');
      await eventually('the watch to see operator-c listed', () => watch.states.some((s) => s.leader === 'operator-c'));
      // b listed → b withdrew (no endpoints) → c listed; never two operators at once.
      const sequence = watch.states.map((s) => s.routed.join(',')).filter((s, i, all) => i === 0 || s !== all[i - 1]);
      expect(sequence).toEqual([`192.0.2.3:${grpcPort}`, '', `192.0.2.4:${grpcPort}`]);
    } finally {
      watch.stop();
    }
  });
});
