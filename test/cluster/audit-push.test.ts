// The audit fan-out configured the Kubernetes way, on a real API server: a ProxyConfig with spec.audit (a
// jsonl sink and a gRPC collector whose bearer token is a Secret reference) reaches a real `tollgate proxy`
// sidecar process through the operator's push; the sidecar asks the fake Tetragon agent for its own pod's
// events and they flow to both sinks. The sidecar's delivery reports come back over the push stream and
// turn into the ProxyConfig's AuditDelivering condition, which goes False when the collector fails.

import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Operator, startOperator } from '../../operator/src/operator.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { type FakeAuditCollector, startFakeAuditCollector } from '../fakes/audit-collector.ts';
import { type FakeTetragonAgent, mixedEvents, startFakeTetragonAgent } from '../fakes/tetragon-agent.ts';
import {
  CLI,
  ensureNamespace,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  putProxyConfig,
  putSecret,
  tempDir,
} from './operator-fixtures.ts';

const TOKEN = 'audit-collector-token-0123456789';

describe('audit configured by a ProxyConfig, delivered by a pushed sidecar', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: Operator;
  let agent: FakeTetragonAgent;
  let collector: FakeAuditCollector;
  let proxy: ManagedProcess | undefined;

  beforeAll(async () => {
    dir = tempDir('tollgate-audit-push-');
    agent = await startFakeTetragonAgent();
    collector = await startFakeAuditCollector({ token: TOKEN });
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const operatorKubeConfig = new KubeConfig();
    operatorKubeConfig.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
    await ensureNamespace(api, 'team-a');
    const grpcPort = await freePort();
    operator = startOperator({
      kubeConfig: operatorKubeConfig,
      logger: pino({ level: 'debug' }, pino.destination({ dest: join(dir.path, 'operator.log'), sync: true, append: true })),
      identity: 'audit-test-operator',
      leaseNamespace: OPERATOR_NAMESPACE,
      leaseName: 'tollgate-operator',
      grpcHost: '127.0.0.1',
      grpcPort,
      tls: { kind: 'secret', namespace: OPERATOR_NAMESPACE, name: 'tollgate-operator-tls', dnsNames: ['tollgate-operator.tollgate-system.svc'], ipAddresses: ['127.0.0.1'] },
    });
    await eventually('the push server', () => operator.pushPort(), 60_000);
    const caFile = await operatorCaFile(api, dir.path);

    await putSecret(api, 'team-a', 'audit-collector', { token: TOKEN });
    await putProxyConfig(api, 'team-a', 'default', {
      audit: {
        source: { address: agent.address },
        sinks: [
          { name: 'siem', kind: 'jsonl', path: join(dir.path, 'siem', 'audit.jsonl') },
          { name: 'collector', kind: 'grpc', address: collector.address, bearerToken: { secretName: 'audit-collector', key: 'token' }, timeoutMs: 500 },
        ],
        retry: { maxAttempts: 2, initialBackoffMs: 20, maxBackoffMs: 50 },
      },
    });

    const pod = await podWithToken(api, { namespace: 'team-a', name: 'web-1', dir: dir.path });
    const port = await freePort();
    const work = join(dir.path, 'web-1');
    mkdirSync(work);
    proxy = startManagedProcess({
      name: 'tollgate proxy',
      command: 'sh',
      args: ['-c', `cd "${work}" && exec "${process.execPath}" "${CLI}" proxy --port ${port}`],
      logPath: join(dir.path, 'web-1.log'),
      env: {
        ...process.env,
        TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${grpcPort}`,
        TOLLGATE_OPERATOR_CA_FILE: caFile,
        TOLLGATE_TOKEN_FILE: pod.tokenFile,
        TOLLGATE_STATE_DIR: join(work, 'state'),
        TOLLGATE_POD_NAME: 'web-1',
        TOLLGATE_POD_NAMESPACE: 'team-a',
      },
    });
  });

  afterAll(async () => {
    await proxy?.stop(5_000);
    await operator?.stop();
    await cp?.stop();
    await agent?.stop();
    await collector?.stop();
    dir?.remove();
  });

  it("the pushed sidecar streams its own pod's events to both sinks, with the bearer token from the Secret", async () => {
    await agent.waitForSubscribers(1, 60_000);
    expect(agent.requests.at(-1)).toEqual({ allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1$'] }] });

    const events = mixedEvents(
      [
        { namespace: 'team-a', pod: 'web-1' },
        { namespace: 'team-a', pod: 'web-2' },
      ],
      8,
    );
    agent.emit(events);
    await collector.waitForEvents(4);
    expect(collector.events().map((e) => e.pod_name)).toEqual(['web-1', 'web-1', 'web-1', 'web-1']);
    expect(collector.events().map((e) => e.tetragon_event.toString('base64'))).toEqual(events.filter((_, i) => i % 2 === 0).map((e) => e.toString('base64')));
    expect(collector.authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);
    const jsonl = join(dir.path, 'siem', 'audit.jsonl');
    await eventually('the jsonl lines', () => existsSync(jsonl) && readFileSync(jsonl, 'utf8').split('\n').filter(Boolean).length === 4);

    const delivering = await eventually(
      'AuditDelivering True',
      async () => (await getProxyConfig(api, 'team-a', 'default')).status?.conditions?.find((c) => c.type === 'AuditDelivering' && c.status === 'True'),
      60_000,
    );
    expect(delivering.reason).toBe('Delivering');
    expect(delivering.message).toMatch(/1 sidecar\(s\) delivering to siem, collector/);
  });

  it('AuditDelivering turns False naming the sink when the collector fails and its events are dead-lettered', async () => {
    collector.failWith(grpc.status.UNAVAILABLE);
    agent.emit(mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 3));
    const failing = await eventually(
      'AuditDelivering False',
      async () => (await getProxyConfig(api, 'team-a', 'default')).status?.conditions?.find((c) => c.type === 'AuditDelivering' && c.status === 'False'),
      60_000,
    );
    expect(failing.reason).toBe('SinkFailing');
    expect(failing.message).toMatch(/^sink collector: 1 of 1 sidecars dead-lettering or dropping \(team-a\/web-1\), last error: .*UNAVAILABLE/);

    collector.failWith(undefined);
    agent.emit(mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 2));
    await eventually(
      'AuditDelivering True again',
      async () => (await getProxyConfig(api, 'team-a', 'default')).status?.conditions?.find((c) => c.type === 'AuditDelivering' && c.status === 'True'),
      60_000,
    );
  });

  it('the API server refuses audit specs the sidecar could not run, naming the field (CEL)', async () => {
    const refused = async (audit: unknown): Promise<string> => {
      try {
        await putProxyConfig(api, 'team-a', 'bad-audit', { audit } as never);
      } catch (error) {
        return JSON.stringify((error as { body?: unknown }).body ?? String(error));
      }
      throw new Error(`accepted: ${JSON.stringify(audit)}`);
    };
    expect(await refused({ sinks: [{ name: 'c', kind: 'grpc' }] })).toContain('a grpc sink needs address');
    expect(await refused({ sinks: [{ name: 's', kind: 'jsonl' }] })).toContain('a jsonl sink needs path');
    expect(await refused({ sinks: [{ name: 'w', kind: 'bigquery', dataset: 'audit' }] })).toContain('a bigquery sink needs dataset and table');
    expect(await refused({ sinks: [{ name: 's', kind: 'jsonl', path: '/x', address: 'c:1' }] })).toContain('address, tls and bearerToken apply to grpc sinks only');
    expect(
      await refused({
        sinks: [
          { name: 's', kind: 'jsonl', path: '/x' },
          { name: 's', kind: 'jsonl', path: '/y' },
        ],
      }),
    ).toMatch(/Duplicate value/);
    expect(await refused({ sinks: [{ name: 's', kind: 'jsonl', path: '/x' }], retry: { initialBackoffMs: 500, maxBackoffMs: 10 } })).toContain(
      'maxBackoffMs must not be less than initialBackoffMs',
    );
    // No way for a namespace's config to widen the agent filter to other pods: the field does not exist, and
    // the API server prunes it.
    await putProxyConfig(api, 'team-a', 'pruned-audit', {
      audit: { sinks: [{ name: 's', kind: 'jsonl', path: '/x' }], source: { allow: [{ namespace: ['kube-system'] }] } },
    } as never);
    const pruned = await getProxyConfig(api, 'team-a', 'pruned-audit');
    expect(pruned.spec?.audit?.source ?? {}).toEqual({});
  });
});
