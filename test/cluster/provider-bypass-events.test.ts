// ProviderBypass Events (ADR 1605) on a real API server: a real `tollgate proxy` sidecar of pod team-a/web-1 gets
// provenance from the operator's push, reads the fake Tetragon agent's tcp_connect events, and a connect from
// container `app` to the provider address its config names (127.0.0.2:8443, the OpenAI route's base URL) becomes
// a Warning Event on that Pod, recorded by the operator (running as the chart's ServiceAccount, so with exactly
// the chart's RBAC). A second curl process within the minute makes no second Event. A hostile pod speaking the
// push protocol itself cannot make the operator write Events past the bounds.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZATION, type BypassEntryMessage, configPushService, type OperatorMessage, type SidecarMessage } from '../../contracts/push-protocol.ts';
import { OperatorMetrics } from '../../operator/src/metrics/operator-metrics.ts';
import { type Operator, startOperator } from '../../operator/src/operator.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import type { ManagedProcess } from '../control-plane/managed-process.ts';
import { type FakeTetragonAgent, startFakeTetragonAgent, tcpConnectEvent } from '../fakes/tetragon-agent.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import {
  ensureNamespace,
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  type PodWithToken,
  putProxyConfig,
  startPodSidecar,
  tempDir,
} from './operator-fixtures.ts';

const NS = 'team-a';

interface CoreEvent {
  type: string;
  reason: string;
  message?: string;
  involvedObject: { kind: string; name: string; namespace: string; uid?: string };
  reportingComponent?: string;
}

/** What `kubectl get events --field-selector reason=ProviderBypass -n team-a` lists: the core/v1 view. */
async function bypassEvents(api: KubeApi, pod: string): Promise<CoreEvent[]> {
  const list = await api.get<{ items: CoreEvent[] }>(`/api/v1/namespaces/${NS}/events?fieldSelector=${encodeURIComponent(`reason=ProviderBypass,involvedObject.name=${pod}`)}`);
  return list.items;
}

function logLines(path: string, msg: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.includes(msg))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === msg);
}

/** A push stream opened by hand with a pod's token, as a hostile workload could: it waits for its snapshot, then sends what it likes. */
async function handMadeStream(address: string, caFile: string, pod: PodWithToken): Promise<{ send(message: SidecarMessage): void; close(): void }> {
  const client = new (configPushService())(address, grpc.credentials.createSsl(readFileSync(caFile)));
  const metadata = new grpc.Metadata();
  metadata.set(AUTHORIZATION, `Bearer ${readFileSync(pod.tokenFile, 'utf8').trim()}`);
  const call = (client as unknown as { stream(md: grpc.Metadata): grpc.ClientDuplexStream<SidecarMessage, OperatorMessage> }).stream(metadata);
  let snapshot = false;
  call.on('data', (message: OperatorMessage) => {
    if (message.snapshot) {
      snapshot = true;
      call.write({ ack: { version: message.snapshot.version } });
    }
  });
  call.on('error', () => undefined);
  call.write({ hello: { podName: 'web-1', podNamespace: NS, currentVersion: '', sidecarVersion: 'hostile' } });
  await eventually('the hand-made stream registered', () => snapshot);
  return {
    send: (message) => call.write(message),
    close() {
      call.cancel();
      client.close();
    },
  };
}

function entry(binary: string): BypassEntryMessage {
  return { provider: 'openai', pid: 666, binary, container: 'app', destination: '127.0.0.2:8443', connects: 1, firstSeenUnixMs: 1, lastSeenUnixMs: 1 };
}

describe('a provider call around the sidecar becomes a ProviderBypass Event on the pod', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: Operator;
  let metrics: OperatorMetrics;
  let agent: FakeTetragonAgent;
  let sidecar: { proc: ManagedProcess } | undefined;
  let web1: PodWithToken;
  let address: string;
  let caFile: string;
  const operatorLog = () => join(dir.path, 'operator.log');
  const bypassMetric = async (outcome: string) => sampleValue(await metrics.registry.metrics(), 'tollgate_operator_bypass_events_total', { outcome });

  beforeAll(async () => {
    dir = tempDir('tollgate-provider-bypass-');
    agent = await startFakeTetragonAgent();
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const operatorKubeConfig = new KubeConfig();
    operatorKubeConfig.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
    await ensureNamespace(api, NS);
    const grpcPort = await freePort();
    metrics = new OperatorMetrics({ defaultMetrics: false });
    operator = startOperator({
      kubeConfig: operatorKubeConfig,
      logger: pino({ level: 'debug' }, pino.destination({ dest: operatorLog(), sync: true, append: true })),
      identity: 'bypass-test-operator',
      leaseNamespace: OPERATOR_NAMESPACE,
      leaseName: 'tollgate-operator',
      grpcHost: '127.0.0.1',
      grpcPort,
      metrics,
      tls: { kind: 'secret', namespace: OPERATOR_NAMESPACE, name: 'tollgate-operator-tls', dnsNames: ['tollgate-operator.tollgate-system.svc'], ipAddresses: ['127.0.0.1'] },
    });
    await eventually('the push server', () => operator.pushPort(), 60_000);
    address = `127.0.0.1:${grpcPort}`;
    caFile = await operatorCaFile(api, dir.path);
    await putProxyConfig(api, NS, 'default', {
      upstreams: { beta: { baseUrl: 'http://127.0.0.2:8443' } },
      provenance: { address: agent.address },
    });
    web1 = await podWithToken(api, { namespace: NS, name: 'web-1', dir: dir.path });
    sidecar = await startPodSidecar({ pod: web1, dir: dir.path, grpcPort, caFile });
    // the sidecar subscribes once it has resolved its provider endpoints
    await agent.waitForSubscribers(1, 60_000);
  }, 180_000);

  afterAll(async () => {
    await sidecar?.proc.stop(5_000);
    await operator?.stop();
    await cp?.stop();
    await agent?.stop();
    dir?.remove();
  });

  it('records a Warning on the Pod naming the process and the destination; a second curl within the minute records none', async () => {
    agent.emit([
      // the sidecar's own connect to the provider is no bypass
      tcpConnectEvent({ namespace: NS, pod: 'web-1', container: 'tollgate-proxy', pid: 4000, binary: '/usr/local/bin/node', sport: 39_000, daddr: '127.0.0.2', dport: 8443 }),
      tcpConnectEvent({ namespace: NS, pod: 'web-1', container: 'app', pid: 4242, binary: '/usr/bin/curl', sport: 40_000, daddr: '127.0.0.2', dport: 8443 }),
    ]);
    const [event] = await eventually('the ProviderBypass Event', async () => {
      const events = await bypassEvents(api, 'web-1');
      return events.length > 0 && events;
    });
    expect(event).toMatchObject({
      type: 'Warning',
      reason: 'ProviderBypass',
      message: 'process /usr/bin/curl (pid 4242, container app) connected to openai at 127.0.0.2:8443 without the sidecar (1 connect)',
      involvedObject: { kind: 'Pod', name: 'web-1', namespace: NS, uid: web1.uid },
      reportingComponent: 'tollgate.dev/operator',
    });

    // another curl process: the sidecar logs and reports it (its own line a minute per process), the operator
    // holds it back (one Event a minute per pod, binary and provider)
    agent.emit([tcpConnectEvent({ namespace: NS, pod: 'web-1', container: 'app', pid: 4243, binary: '/usr/bin/curl', sport: 40_001, daddr: '127.0.0.2', dport: 8443 })]);
    await eventually('the second entry held back', async () => (await bypassMetric('rate_limited')) === 1, 30_000);
    expect(await bypassMetric('recorded')).toBe(1);
    expect(await bypassEvents(api, 'web-1')).toHaveLength(1);
  });

  it('refuses a report past the bounds with a log line, and records at most ten Events a minute for a pod', async () => {
    const web2 = await podWithToken(api, { namespace: NS, name: 'web-2', dir: dir.path });
    const stream = await handMadeStream(address, caFile, web2);
    try {
      stream.send({ bypassReport: { entries: Array.from({ length: 65 }, (_, i) => entry(`/tmp/x${i}`)) } });
      const refused = await eventually('the refusal', () => logLines(operatorLog(), 'bypass report refused: 65 entries, more than 64').at(0));
      expect(refused).toMatchObject({ pod: `${NS}/web-2`, entries: 65 });
      expect(await bypassMetric('refused')).toBe(65);

      // twelve binaries in one report: ten Events, two held back
      stream.send({ bypassReport: { entries: Array.from({ length: 12 }, (_, i) => entry(`/tmp/y${i}`)) } });
      await eventually('the twelve entries handled', async () => (await bypassMetric('rate_limited')) === 1 + 2, 30_000);
      const events = await eventually('ten Events on web-2', async () => {
        const listed = await bypassEvents(api, 'web-2');
        return listed.length === 10 && listed;
      });
      expect(events.map((e) => e.involvedObject.uid)).toEqual(Array(10).fill(web2.uid));
      expect(events.map((e) => e.message).sort()).toEqual(
        Array.from({ length: 10 }, (_, i) => `process /tmp/y${i} (pid 666, container app) connected to openai at 127.0.0.2:8443 without the sidecar (1 connect)`).sort(),
      );
      // the Hello named web-1: nothing reached web-1
      expect(await bypassEvents(api, 'web-1')).toHaveLength(1);
    } finally {
      stream.close();
    }
  });
});
