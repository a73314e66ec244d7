// Version skew on the config push (ADR 0723), on a real API server: a sidecar from before config revisions
// says nothing about its revision in its Hello (as the previous release's does, byte for byte: the fields it
// knows), and gets every snapshot without what revision 1 does not know (configured routes and their
// providers' prices), while a price change still reaches it; the operator says what it withheld in an Event.
// A sidecar of this release gets the routes. The kind suite runs the previous release's real sidecar image
// against this operator.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZATION, configPushService, type Hello, type OperatorMessage, type SidecarMessage, type SnapshotMessage } from '../../contracts/push-protocol.ts';
import type { ProxyConfigSpec } from '../../crds/index.ts';
import { type Operator, startOperator } from '../../operator/src/operator.ts';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { type PushClient, startPushClient } from '../../sidecar/src/config/push-client.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import {
  ensureNamespace,
  eventsFor,
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  putProxyConfig,
  putSecret,
  tempDir,
} from './operator-fixtures.ts';

const NS = 'shop';

function spec(openaiPrice: number): ProxyConfigSpec {
  return {
    pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: openaiPrice, output_per_million: 0 }] },
    credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
    routes: [
      {
        name: 'mistral',
        format: 'openai-chat',
        baseUrl: 'https://api.mistral.ai',
        credential: { kind: 'api-key', apiKey: { secretName: 'llm-keys', key: 'mistral' } },
        prices: [{ model: 'mistral-small', input_per_million: 0.2, output_per_million: 0.6 }],
      },
    ],
  };
}

/** A push stream as a sidecar from before config revisions opens it: its Hello has no revision; it acks all. */
function olderSidecar(address: string, caFile: string, tokenFile: string): { snapshots: SnapshotMessage[]; close(): void } {
  const Service = configPushService();
  const client = new Service(address, grpc.credentials.createSsl(readFileSync(caFile)));
  const metadata = new grpc.Metadata();
  metadata.set(AUTHORIZATION, `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`);
  const call = (client as unknown as { stream(md: grpc.Metadata): grpc.ClientDuplexStream<SidecarMessage, OperatorMessage> }).stream(metadata);
  const snapshots: SnapshotMessage[] = [];
  call.on('data', (message: OperatorMessage) => {
    if (!message.snapshot) return;
    snapshots.push(message.snapshot);
    call.write({ ack: { version: message.snapshot.version } });
  });
  call.on('error', () => undefined);
  const hello: Hello = { podName: 'old', podNamespace: NS, currentVersion: '', sidecarVersion: 'previous' };
  call.write({ hello });
  return {
    snapshots,
    close() {
      call.cancel();
      client.close();
    },
  };
}

describe('the operator renders for the config revision a sidecar names in its Hello', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: Operator;
  let address: string;
  let caFile: string;
  let older: ReturnType<typeof olderSidecar>;
  let current: { client: PushClient; store: ConfigStore };

  beforeAll(async () => {
    dir = tempDir('tollgate-config-revisions-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
    await ensureNamespace(api, NS);
    await putSecret(api, NS, 'llm-keys', { openai: 'sk-openai', mistral: 'sk-mistral' });
    await putProxyConfig(api, NS, 'default', spec(2.5));
    const grpcPort = await freePort();
    address = `127.0.0.1:${grpcPort}`;
    operator = startOperator({
      kubeConfig,
      logger: pino({ level: 'debug' }, pino.destination({ dest: join(dir.path, 'operator.log'), sync: true, append: true })),
      identity: 'revisions-test-operator',
      leaseNamespace: OPERATOR_NAMESPACE,
      leaseName: 'tollgate-operator',
      grpcHost: '127.0.0.1',
      grpcPort,
      tls: { kind: 'secret', namespace: OPERATOR_NAMESPACE, name: 'tollgate-operator-tls', dnsNames: ['tollgate-operator.tollgate-system.svc'], ipAddresses: ['127.0.0.1'] },
    });
    await eventually('the push server', () => operator.pushPort(), 60_000);
    caFile = await operatorCaFile(api, dir.path);
  });

  afterAll(async () => {
    older?.close();
    await current?.client.stop();
    await operator?.stop();
    await cp?.stop();
    dir?.remove();
  });

  it('a sidecar without a revision gets the config without the routes and their prices, and the credentials it can use', async () => {
    const pod = await podWithToken(api, { namespace: NS, name: 'old', dir: dir.path });
    older = olderSidecar(address, caFile, pod.tokenFile);
    const [first] = await eventually('a snapshot', async () => (older.snapshots.length ? older.snapshots : undefined));
    expect(JSON.parse(first!.configJson)).toEqual({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 2.5, output_per_million: 0 }] } });
    // Credentials it does not know it ignores (it always has); the OpenAI key it needs is there.
    expect(first!.credentials.openaiApiKey?.toString()).toBe('sk-openai');
    const event = await eventually('a ConfigWithheld Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'ConfigWithheld'));
    expect(event).toMatchObject({ type: 'Warning', related: { kind: 'Pod', name: 'old' } });
    expect(event.note).toContain('runs config revision 1');
    expect(event.note).toContain('routes (mistral); pricing.models of provider mistral');
  });

  it('a price change reaches it, still without the routes', async () => {
    await putProxyConfig(api, NS, 'default', spec(7.5));
    const changed = await eventually('the new price', async () => older.snapshots.find((s) => s.configJson.includes('7.5')));
    expect(JSON.parse(changed.configJson)).toEqual({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 7.5, output_per_million: 0 }] } });
    // It acknowledged every version, so the ProxyConfig counts it as current.
    const pc = await eventually('status', async () => {
      const p = await api.get<{ status?: { sidecars?: { connected: number; current: number } } }>(`/apis/tollgate.dev/v1alpha1/namespaces/${NS}/proxyconfigs/default`);
      return p.status?.sidecars?.current === 1 ? p : undefined;
    });
    expect(pc.status?.sidecars).toEqual({ connected: 1, current: 1 });
  });

  it('a sidecar of this release gets the routes and their prices', async () => {
    const pod = await podWithToken(api, { namespace: NS, name: 'new', dir: dir.path });
    const store = new ConfigStore();
    const client = startPushClient({ address, caFile, tokenFile: pod.tokenFile, stateDir: join(dir.path, 'new-state'), store, logger: pino({ level: 'silent' }) });
    current = { client, store };
    await eventually('the routes', () => (store.layer('operator')?.routes?.length ? true : undefined));
    expect(store.layer('operator')?.routes?.map((r) => r.name)).toEqual(['mistral']);
    expect(store.get().pricing.models.find((m) => m.provider === 'mistral')).toMatchObject({ model: 'mistral-small', input_per_million: 0.2 });
  });
});
