// The chart's other RBAC shape: with operator.watchNamespace set, the operator gets a Role in that namespace
// instead of a ClusterRole (plus the cluster-wide TokenReview rule). A `tollgate operator --watch-namespace`
// process, authenticated as the chart's ServiceAccount with exactly that RBAC, reconciles, records events and
// pushes to a sidecar of the watched namespace, and never touches ProxyConfigs elsewhere.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { type PushClient, startPushClient } from '../../sidecar/src/config/push-client.ts';
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
  operatorCaFile,
  type OperatorProcess,
  podWithToken,
  putProxyConfig,
  putSecret,
  readyCondition,
  startOperatorProcess,
  tempDir,
} from './operator-fixtures.ts';

const WATCHED = 'shop';
const UNWATCHED = 'elsewhere';
const gpt4o = (input: number) => ({ pricing: { models: [{ provider: 'openai' as const, model: 'gpt-4o', input_per_million: input, output_per_million: 10 }] } });

describe('operator limited to one namespace by the chart', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: OperatorProcess;
  let grpcPort: number;
  let client: PushClient | undefined;

  beforeAll(async () => {
    dir = tempDir('tollgate-operator-watch-namespace-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    for (const ns of [WATCHED, UNWATCHED]) await ensureNamespace(api, ns);
    const kubeconfig = await installOperatorPrerequisites(cp, dir.path, { 'operator.watchNamespace': WATCHED });
    grpcPort = await freePort();
    operator = startOperatorProcess({ kubeconfig, identity: 'scoped', grpcPort, logDir: dir.path, extraArgs: [`--watch-namespace=${WATCHED}`] });
    await eventually('the operator to lead', async () => (await leaseHolder(api)) === 'scoped', 60_000);
  });

  afterAll(async () => {
    await client?.stop();
    await operator?.stop(2_000);
    await cp?.stop();
    dir?.remove();
  });

  it('reconciles and records events in the watched namespace only', async () => {
    await putProxyConfig(api, UNWATCHED, 'default', gpt4o(9.99));
    await putSecret(api, WATCHED, 'llm-keys', { openai: 'sk-test-scoped-0123456789' });
    await putProxyConfig(api, WATCHED, 'default', { ...gpt4o(1.25), credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } } });

    const pc = await eventually(
      'the watched ProxyConfig accepted',
      async () => {
        const found = await getProxyConfig(api, WATCHED, 'default');
        return readyCondition(found)?.status === 'True' ? found : undefined;
      },
      60_000,
    );
    expect(readyCondition(pc)).toMatchObject({ reason: 'Accepted', observedGeneration: 1 });
    await eventually('an Accepted event', async () => (await eventsFor(api, WATCHED, 'default')).find((e) => e.reason === 'Accepted'));

    expect((await getProxyConfig(api, UNWATCHED, 'default')).status).toBeUndefined();
  });

  it('pushes to a sidecar of the watched namespace (pod lookup and TokenReview under the chart RBAC)', async () => {
    const pod = await podWithToken(api, { namespace: WATCHED, name: 'web', dir: dir.path });
    const store = new ConfigStore();
    client = startPushClient({
      address: `127.0.0.1:${grpcPort}`,
      caFile: await operatorCaFile(api, dir.path),
      tokenFile: pod.tokenFile,
      stateDir: join(dir.path, 'sidecar-state'),
      store,
      logger: pino({ level: 'silent' }),
      reconnect: { baseMs: 200, maxMs: 2_000 },
    });
    await eventually('the pushed price', () => store.get().pricing.models.find((m) => m.model === 'gpt-4o')?.input_per_million === 1.25, 60_000);
    await eventually('status counting the sidecar', async () => (await getProxyConfig(api, WATCHED, 'default')).status?.sidecars?.current === 1, 60_000);
    expect(readFileSync(join(dir.path, 'scoped.log'), 'utf8')).not.toMatch(/forbidden/i);
  });
});
