// The operator issue's "done when", as a platform team would do it: `kubectl apply` a ProxyConfig with a
// price, run a sidecar for a pod (authenticated with a real projected token), send a call through it, then
// `kubectl apply` a new price and see the next call costed at it. The OpenAI key reaches the sidecar only
// through a Secret reference.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import {
  CLI,
  ensureNamespace,
  eventually,
  installOperatorPrerequisites,
  KubeApi,
  operatorCaFile,
  podWithToken,
  putSecret,
  startOperatorProcess,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';

const KEY = 'sk-from-a-kubernetes-secret';
let cp: ControlPlane;
let api: KubeApi;
let dir: ReturnType<typeof tempDir>;
let upstream: FakeUpstream;
let operator: OperatorProcess;
let sidecar: ManagedProcess;
let sidecarUrl: string;

function proxyConfigYaml(inputPrice: number): string {
  return `apiVersion: tollgate.dev/v1alpha1
kind: ProxyConfig
metadata: { name: default, namespace: shop }
spec:
  pricing:
    models:
      - { provider: openai, model: gpt-4o-mini, input_per_million: ${inputPrice}, output_per_million: 1 }
  upstreams:
    beta: { baseUrl: "${upstream.url}" }
  credentials:
    openaiApiKey: { secretName: llm-keys, key: openai }
`;
}

async function costOfNextCall(): Promise<number | undefined> {
  const res = await fetch(`${sidecarUrl}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  if (res.status !== 200) return undefined;
  await res.arrayBuffer();
  const spanId = res.headers.get('x-proxy-span-id');
  return (await findSpan(sidecarUrl, { spanId })).cost_usd;
}

beforeAll(async () => {
  cp = await startControlPlane();
  dir = tempDir('tollgate-price-e2e-');
  api = new KubeApi(cp.kubeConfig);
  upstream = await startFakeUpstream('openai', { expectApiKey: KEY });
  upstream.behave({ usage: { input: 1_000_000, output: 0 } }); // one million input tokens: cost = the input price
  const operatorKubeconfig = await installOperatorPrerequisites(cp, dir.path);
  const grpcPort = await freePort();
  operator = startOperatorProcess({ kubeconfig: operatorKubeconfig, identity: 'e2e', grpcPort, logDir: dir.path });
  await ensureNamespace(api, 'shop');
  await putSecret(api, 'shop', 'llm-keys', { openai: KEY });
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: proxyConfigYaml(2) });
  expect(applied.code, applied.stderr).toBe(0);
  const caFile = await operatorCaFile(api, dir.path);
  const pod = await podWithToken(api, { namespace: 'shop', name: 'checkout-7f9c', dir: dir.path });
  const port = await freePort();
  const work = join(dir.path, 'sidecar');
  mkdirSync(work);
  sidecar = startManagedProcess({
    name: 'tollgate sidecar',
    command: 'sh',
    args: ['-c', `cd "${work}" && exec "${process.execPath}" "${CLI}" proxy --port ${port}`],
    logPath: join(dir.path, 'sidecar.log'),
    env: {
      PATH: process.env.PATH,
      HOME: work,
      TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${grpcPort}`,
      TOLLGATE_OPERATOR_CA_FILE: caFile,
      TOLLGATE_TOKEN_FILE: pod.tokenFile,
      TOLLGATE_STATE_DIR: join(work, 'state'),
      TOLLGATE_POD_NAME: pod.name,
      TOLLGATE_POD_NAMESPACE: pod.namespace,
    },
  });
  sidecarUrl = `http://127.0.0.1:${port}`;
}, 120_000);

afterAll(async () => {
  await sidecar?.stop();
  operator?.kill();
  await upstream?.close();
  await cp?.stop();
  dir?.remove();
});

it('kubectl apply of a new price reaches the running sidecar, and its next call is costed at it', async () => {
  // The first price arrives with the key from the Secret: the call succeeds and costs $2 (1M tokens at $2/M).
  await eventually('the sidecar serves with the pushed key and price', async () => ((await costOfNextCall()) === 2 ? true : undefined), 60_000);
  expect(upstream.requests.at(-1)!.headers.authorization).toBe(`Bearer ${KEY}`);

  const applied = await cp.kubectl(['apply', '-f', '-'], { input: proxyConfigYaml(7.5) });
  expect(applied.code, applied.stderr).toBe(0);
  const changedAt = Date.now();
  await eventually('the next call is costed at the new price', async () => ((await costOfNextCall()) === 7.5 ? true : undefined), 10_000);
  // the push is debounced and fast; calls before it landed were costed at the old price, never anything else
  expect(Date.now() - changedAt).toBeLessThan(10_000);

  const status = await cp.kubectl(['get', 'proxyconfig', 'default', '-n', 'shop', '-o', 'jsonpath={.status.sidecars.connected}/{.status.sidecars.current}']);
  expect(status.stdout).toBe('1/1');
});
