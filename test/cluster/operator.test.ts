// The operator as it runs in a cluster: two `tollgate operator` processes with the RBAC the chart installs
// against a real kube-apiserver. One leads and reconciles; the other waits. Covers status and events for
// accepted and rejected ProxyConfigs, informer recovery after an API server restart, and failover when the
// leader is killed.

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rfc3339 } from '../../kube-client/micro-time.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import {
  ensureNamespace,
  eventsFor,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  leaseHolder,
  type OperatorProcess,
  putProxyConfig,
  putSecret,
  readyCondition,
  startOperatorProcess,
  tempDir,
} from './operator-fixtures.ts';

const NS = 'team-ops';
const SECRET_VALUE = 'sk-test-never-logged-0123456789';
const PRICE = { provider: 'openai' as const, model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10 };

describe('tollgate operator on a real API server', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let a: OperatorProcess;
  let b: OperatorProcess;

  const reconciled = (name: string) =>
    eventually(
      `${NS}/${name} reconciled`,
      async () => {
        const pc = await getProxyConfig(api, NS, name);
        return pc.status?.observedGeneration === pc.metadata?.generation && readyCondition(pc) ? pc : undefined;
      },
      60_000,
    );

  beforeAll(async () => {
    dir = tempDir('tollgate-operator-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    await ensureNamespace(api, NS);
    const grpcPort = await freePort();
    a = startOperatorProcess({ kubeconfig, identity: 'operator-a', grpcPort, logDir: dir.path });
    await eventually('operator-a to lead', async () => (await leaseHolder(api)) === 'operator-a', 60_000);
    // Same push port: only the leader listens, so after failover sidecars find the new leader where the old one was.
    b = startOperatorProcess({ kubeconfig, identity: 'operator-b', grpcPort, logDir: dir.path });
  });

  afterAll(async () => {
    await Promise.all([a?.stop(2_000), b?.stop(2_000)]);
    await cp?.stop();
    dir?.remove();
  });

  it('accepts a valid ProxyConfig: Ready=True for its generation, an Accepted event, and no secret anywhere', async () => {
    await putSecret(api, NS, 'llm-keys', { openai: SECRET_VALUE });
    await putProxyConfig(api, NS, 'default', { pricing: { models: [PRICE] }, credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } } });
    const pc = await reconciled('default');
    expect(readyCondition(pc)).toMatchObject({ status: 'True', reason: 'Accepted', observedGeneration: 1 });
    expect(pc.status?.configVersion).toMatch(/^[0-9a-f]{16}$/);
    expect(pc.status?.sidecars).toEqual({ connected: 0, current: 0 });

    const events = await eventually('an Accepted event', async () => {
      const list = await eventsFor(api, NS, 'default');
      return list.some((e) => e.reason === 'Accepted') ? list : undefined;
    });
    expect(events.find((e) => e.reason === 'Accepted')).toMatchObject({ type: 'Normal', reportingController: 'tollgate.dev/operator', regarding: { kind: 'ProxyConfig' } });

    const table = await cp.kubectl(['get', 'proxyconfigs', '-n', NS, 'default']);
    expect(table.stdout).toMatch(/READY\s+SIDECARS/);
    expect(table.stdout).toMatch(/default\s+True\s+0/);

    for (const text of [JSON.stringify(pc), JSON.stringify(events), readFileSync(`${dir.path}/operator-a.log`, 'utf8')]) {
      expect(text).not.toContain(SECRET_VALUE);
      expect(text).not.toContain(Buffer.from(SECRET_VALUE).toString('base64'));
    }
  });

  it('rejects a ProxyConfig whose Secret is missing, says why, and accepts it once the Secret exists', async () => {
    await putProxyConfig(api, NS, 'needs-secret', { credentials: { anthropicApiKey: { secretName: 'anthropic', key: 'api-key' } } });
    const rejected = await reconciled('needs-secret');
    const condition = readyCondition(rejected)!;
    expect(condition).toMatchObject({ status: 'False', reason: 'SecretNotFound', observedGeneration: 1 });
    expect(condition.message).toBe('credentials.anthropicApiKey: Secret "anthropic" not found in the namespace, or not labelled tollgate.dev/credentials=true');
    const event = await eventually('a Rejected event', async () => (await eventsFor(api, NS, 'needs-secret')).find((e) => e.reason === 'Rejected'));
    expect(event.type).toBe('Warning');
    expect(event.note).toContain('SecretNotFound');
    expect(event.note).toContain('credentials.anthropicApiKey');

    // A new generation that is still rejected: observedGeneration follows, lastTransitionTime does not move. The
    // condition's times have whole seconds: wait for the clock to leave its second, so a moved time would show.
    await eventually("the clock to leave the condition's second", () => rfc3339() > condition.lastTransitionTime);
    await putProxyConfig(api, NS, 'needs-secret', { credentials: { anthropicApiKey: { secretName: 'anthropic', key: 'key' } } });
    const still = await eventually('generation 2 observed', async () => {
      const pc = await getProxyConfig(api, NS, 'needs-secret');
      return readyCondition(pc)?.observedGeneration === 2 ? pc : undefined;
    });
    expect(still.status?.observedGeneration).toBe(2);
    expect(readyCondition(still)?.lastTransitionTime).toBe(condition.lastTransitionTime);

    // Still past that second: the transition to True must carry a later time.
    await putSecret(api, NS, 'anthropic', { key: 'sk-ant-test' });
    const accepted = await eventually('Ready=True once the Secret exists', async () => {
      const pc = await getProxyConfig(api, NS, 'needs-secret');
      return readyCondition(pc)?.status === 'True' ? pc : undefined;
    });
    expect(readyCondition(accepted)).toMatchObject({ reason: 'Accepted', observedGeneration: 2 });
    expect(readyCondition(accepted)!.lastTransitionTime > condition.lastTransitionTime).toBe(true);
  });

  it('keeps reconciling after the API server restarts (informers relist or resume their watches)', async () => {
    await cp.restartApiServer();
    await putProxyConfig(api, NS, 'after-restart', { pricing: { models: [{ ...PRICE, input_per_million: 3 }] } });
    const pc = await reconciled('after-restart');
    expect(readyCondition(pc)).toMatchObject({ status: 'True', reason: 'Accepted' });
    // And changes to objects that existed before the restart are still seen.
    await putProxyConfig(api, NS, 'default', { pricing: { models: [{ ...PRICE, input_per_million: 4 }] } });
    const updated = await reconciled('default');
    expect(updated.status?.observedGeneration).toBe(2);
  });

  it('fails over: the standby never reconciled, takes the Lease when the leader is killed, and reconciles', async () => {
    expect(await leaseHolder(api)).toBe('operator-a');
    // The standby has its caches warm but has done no leader work.
    expect(readFileSync(`${dir.path}/operator-b.log`, 'utf8')).not.toContain('ProxyConfig accepted');
    expect(readFileSync(`${dir.path}/operator-a.log`, 'utf8')).toContain('ProxyConfig accepted');

    a.kill(); // SIGKILL: no release, so the standby must wait for the Lease to expire
    const started = Date.now();
    await eventually('operator-b to take the Lease', async () => (await leaseHolder(api)) === 'operator-b', 40_000);
    console.log(`failover: standby took the Lease ${((Date.now() - started) / 1000).toFixed(1)} s after the leader was killed`);

    await putProxyConfig(api, NS, 'after-failover', { pricing: { models: [{ ...PRICE, input_per_million: 5 }] } });
    const pc = await reconciled('after-failover');
    expect(readyCondition(pc)).toMatchObject({ status: 'True', reason: 'Accepted' });
    // The child's log reaches its file through a pipe, possibly after the status it wrote is visible.
    await eventually('operator-b to log the acceptance', () => readFileSync(`${dir.path}/operator-b.log`, 'utf8').includes('ProxyConfig accepted'), 10_000);
  });

  it('releases the Lease on SIGTERM', async () => {
    await b.stop(10_000);
    const lease = await api.get<{ spec: { holderIdentity?: string } }>('/apis/coordination.k8s.io/v1/namespaces/tollgate-system/leases/tollgate-operator');
    expect(lease.spec.holderIdentity ?? '').toBe('');
    expect(readFileSync(`${dir.path}/operator-b.log`, 'utf8')).toContain('released leadership');
  });
});
