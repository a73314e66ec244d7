// Config push end to end on a real API server: the operator (as the chart's operator ServiceAccount) serves
// snapshots over TLS; sidecar push clients authenticate with real projected tokens from the TokenRequest API,
// bound to pods created through the API server. In-process clients run real ConfigStores; one real
// `tollgate proxy` process shows the same through its management API.

import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Operator, startOperator } from '../../operator/src/operator.ts';
import { OperatorMetrics } from '../../operator/src/metrics/operator-metrics.ts';
import { sampleValue, sampleSum } from '../support/prometheus-text.ts';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { type PushClient, startPushClient } from '../../sidecar/src/config/push-client.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { startFakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import {
  CLI,
  ensureNamespace,
  eventsFor,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  type PodWithToken,
  putProxyConfig,
  putSecret,
  readyCondition,
  tempDir,
} from './operator-fixtures.ts';

const OPENAI_KEY = 'sk-test-push-0123456789abcdef';
const gpt4o = (input: number) => ({ pricing: { models: [{ provider: 'openai' as const, model: 'gpt-4o', input_per_million: input, output_per_million: 10 }] } });
const withKey = { credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } } };

interface Sidecar {
  pod: PodWithToken;
  store: ConfigStore;
  client: PushClient;
  stateDir: string;
  /** Every gpt-4o input price the operator layer ever carried, in order. */
  seen: number[];
}

function operatorPrice(store: ConfigStore): number | undefined {
  return store.get().pricing.models.find((m) => m.provider === 'openai' && m.model === 'gpt-4o')?.input_per_million;
}

describe('config push to sidecars', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operatorKubeConfig: KubeConfig;
  let operator: Operator;
  let grpcPort: number;
  let caFile: string;
  const sidecars: Sidecar[] = [];
  const processes: ManagedProcess[] = [];

  const metrics = new OperatorMetrics({ defaultMetrics: false });
  const scrape = async () => (await metrics.exposition.render('text/plain')).body;
  const runOperator = () =>
    startOperator({
      metrics,
      kubeConfig: operatorKubeConfig,
      logger: pino({ level: 'debug' }, pino.destination({ dest: join(dir.path, 'operator.log'), sync: true, append: true })),
      identity: 'push-test-operator',
      leaseNamespace: OPERATOR_NAMESPACE,
      leaseName: 'tollgate-operator',
      grpcHost: '127.0.0.1',
      grpcPort,
      tls: { kind: 'secret', namespace: OPERATOR_NAMESPACE, name: 'tollgate-operator-tls', dnsNames: ['tollgate-operator.tollgate-system.svc'], ipAddresses: ['127.0.0.1'] },
    });

  const sidecar = async (pod: PodWithToken, opts: { stateDir?: string; claim?: { podName: string; podNamespace: string } } = {}): Promise<Sidecar> => {
    const stateDir = opts.stateDir ?? join(dir.path, `state-${pod.namespace}-${pod.name}-${sidecars.length}`);
    const store = new ConfigStore();
    const seen: number[] = [];
    store.subscribe(() => {
      const price = store.layer('operator')?.pricing?.models.find((m) => m.model === 'gpt-4o')?.input_per_million;
      if (price !== undefined && seen.at(-1) !== price) seen.push(price);
    });
    const client = startPushClient({
      address: `127.0.0.1:${grpcPort}`,
      caFile,
      tokenFile: pod.tokenFile,
      stateDir,
      store,
      logger: pino({ level: 'silent' }),
      reconnect: { baseMs: 200, maxMs: 2_000 },
      ...(opts.claim ?? {}),
    });
    const s = { pod, store, client, stateDir, seen };
    sidecars.push(s);
    return s;
  };

  /** A real `tollgate proxy` process as the sidecar of a pod, taking its config from the operator. */
  const podProxy = async (namespace: string, name: string): Promise<{ port: number; work: string }> => {
    const pod = await podWithToken(api, { namespace, name, dir: dir.path });
    const port = await freePort();
    const work = join(dir.path, name);
    mkdirSync(work);
    processes.push(
      startManagedProcess({
        name: 'tollgate proxy',
        command: 'sh',
        args: ['-c', `cd "${work}" && exec "${process.execPath}" "${CLI}" proxy --port ${port}`],
        logPath: join(dir.path, `${name}.log`),
        env: {
          ...process.env,
          TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${grpcPort}`,
          TOLLGATE_OPERATOR_CA_FILE: caFile,
          TOLLGATE_TOKEN_FILE: pod.tokenFile,
          TOLLGATE_STATE_DIR: join(work, 'state'),
          TOLLGATE_POD_NAME: name,
          TOLLGATE_POD_NAMESPACE: namespace,
        },
      }),
    );
    return { port, work };
  };

  beforeAll(async () => {
    dir = tempDir('tollgate-push-test-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    operatorKubeConfig = new KubeConfig();
    operatorKubeConfig.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
    for (const ns of ['team-a', 'team-b']) await ensureNamespace(api, ns);
    await putSecret(api, 'team-a', 'llm-keys', { openai: OPENAI_KEY });
    await putProxyConfig(api, 'team-a', 'default', { ...gpt4o(1.11), ...withKey });
    await putProxyConfig(api, 'team-a', 'strict', gpt4o(7.77));
    await putProxyConfig(api, 'team-b', 'default', gpt4o(3.33));
    grpcPort = await freePort();
    operator = runOperator();
    await eventually('the push server', () => operator.pushPort(), 60_000);
    caFile = await operatorCaFile(api, dir.path);
  });

  afterAll(async () => {
    await Promise.all(sidecars.map((s) => s.client.stop()));
    await Promise.all(processes.map((p) => p.stop(5_000)));
    await operator?.stop();
    await cp?.stop();
    dir?.remove();
  });

  it("gives a sidecar its namespace's default ProxyConfig and credentials, and counts it as current", async () => {
    const a1 = await sidecar(await podWithToken(api, { namespace: 'team-a', name: 'a1', dir: dir.path }));
    // The client swaps the store's config, saves the snapshot, then updates its status: wait for the last step.
    await eventually('price 1.11 applied', () => operatorPrice(a1.store) === 1.11 && a1.client.status().source === 'team-a/default');
    const keyFile = a1.store.get().credentials.openaiApiKeyFile!;
    expect(keyFile.startsWith(join(a1.stateDir, 'credentials'))).toBe(true);
    expect(readFileSync(keyFile, 'utf8')).toBe(OPENAI_KEY);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(join(a1.stateDir, 'snapshot.json'), 'utf8')).configJson).not.toContain(OPENAI_KEY);
    expect(a1.client.status()).toMatchObject({ connected: true, source: 'team-a/default', fromCache: false });

    const pc = await eventually('status counts the sidecar', async () => {
      const p = await getProxyConfig(api, 'team-a', 'default');
      return p.status?.sidecars?.current === 1 ? p : undefined;
    });
    expect(pc.status?.sidecars).toEqual({ connected: 1, current: 1 });
    expect(pc.status?.configVersion).toBe(a1.client.status().version);
    expect(readFileSync(join(dir.path, 'operator.log'), 'utf8')).not.toContain(OPENAI_KEY);
  });

  it('gives a pod the ProxyConfig its annotation names', async () => {
    const a2 = await sidecar(await podWithToken(api, { namespace: 'team-a', name: 'a2', annotations: { 'tollgate.dev/proxy-config': 'strict' }, dir: dir.path }));
    await eventually('price 7.77 applied', () => operatorPrice(a2.store) === 7.77 && a2.client.status().source !== undefined);
    expect(a2.store.get().credentials.openaiApiKeyFile).toBeUndefined();
    expect(a2.client.status().source).toBe('team-a/strict');
  });

  it('pushes a change to every sidecar of the ProxyConfig, live, leaving config already taken by a request untouched', async () => {
    const a1 = sidecars[0]!;
    const a3 = await sidecar(await podWithToken(api, { namespace: 'team-a', name: 'a3', dir: dir.path }));
    await eventually('a3 on 1.11', () => operatorPrice(a3.store) === 1.11);
    const inFlight = a1.store.current(); // what a request that started now would keep using

    const started = Date.now();
    await putProxyConfig(api, 'team-a', 'default', { ...gpt4o(2.22), ...withKey });
    await eventually('2.22 on both sidecars', () => operatorPrice(a1.store) === 2.22 && operatorPrice(a3.store) === 2.22, 10_000);
    console.log(`push: ProxyConfig update reached both sidecars ${Date.now() - started} ms after the API write`);

    expect(inFlight.config.pricing.models.find((m) => m.model === 'gpt-4o')?.input_per_million).toBe(1.11);
    expect(a1.seen).toEqual([1.11, 2.22]);
    const strictSidecar = sidecars[1]!;
    expect(strictSidecar.seen).toEqual([7.77]);
    const pushed = await eventually('a Pushed event', async () =>
      (await eventsFor(api, 'team-a', 'default')).find((e) => e.reason === 'Pushed' && /to 2 sidecars/.test(e.note ?? '')),
    );
    expect(pushed.type).toBe('Normal');
  });

  it("never gives a pod another namespace's config, whatever its annotation or Hello claim", async () => {
    const b1 = await sidecar(await podWithToken(api, { namespace: 'team-b', name: 'b1', annotations: { 'tollgate.dev/proxy-config': 'strict' }, dir: dir.path }), {
      claim: { podName: 'a1', podNamespace: 'team-a' },
    });
    await eventually('team-b price', () => operatorPrice(b1.store) === 3.33 && b1.client.status().source !== undefined);
    await putProxyConfig(api, 'team-a', 'strict', gpt4o(7.78));
    await eventually('team-a strict sidecar updated', () => operatorPrice(sidecars[1]!.store) === 7.78);
    expect(b1.seen).toEqual([3.33]);
    expect(b1.store.get().credentials.openaiApiKeyFile).toBeUndefined();
    expect(b1.client.status().source).toBe('team-b/default');
  });

  it('never reads a Secret without the credentials label: Ready=False naming the label, no push, until it is labelled', async () => {
    const unlabelledKey = 'sk-test-unlabelled-0123456789abcdef';
    await ensureNamespace(api, 'team-c');
    await putSecret(api, 'team-c', 'release-data', { openai: unlabelledKey }, { labelled: false });
    await putProxyConfig(api, 'team-c', 'default', { ...gpt4o(5.55), credentials: { openaiApiKey: { secretName: 'release-data', key: 'openai' } } });
    const c1 = await sidecar(await podWithToken(api, { namespace: 'team-c', name: 'c1', dir: dir.path }));

    const rejected = await eventually('Ready=False with the sidecar counted', async () => {
      const pc = await getProxyConfig(api, 'team-c', 'default');
      return readyCondition(pc)?.status === 'False' && pc.status?.sidecars?.connected === 1 ? pc : undefined;
    });
    const message = 'credentials.openaiApiKey: Secret "release-data" not found in the namespace, or not labelled tollgate.dev/credentials=true';
    expect(readyCondition(rejected)).toMatchObject({ reason: 'SecretNotFound', message });
    const event = await eventually('a Rejected event', async () => (await eventsFor(api, 'team-c', 'default')).find((e) => e.reason === 'Rejected'));
    expect(event.note).toContain(message);
    expect(c1.store.layer('operator')).toBeUndefined();
    expect(c1.store.get().credentials.openaiApiKeyFile).toBeUndefined();

    const labelled = await cp.kubectl(['label', 'secret', 'release-data', '-n', 'team-c', 'tollgate.dev/credentials=true']);
    expect(labelled.code, labelled.stderr).toBe(0);
    const accepted = await eventually('Ready=True once labelled', async () => {
      const pc = await getProxyConfig(api, 'team-c', 'default');
      return readyCondition(pc)?.status === 'True' ? pc : undefined;
    });
    expect(readyCondition(accepted)).toMatchObject({ reason: 'Accepted' });
    await eventually('price 5.55 applied', () => operatorPrice(c1.store) === 5.55);
    expect(readFileSync(c1.store.get().credentials.openaiApiKeyFile!, 'utf8')).toBe(unlabelledKey);

    // Taking the label away again withdraws the Secret: the operator no longer sees it.
    const unlabelled = await cp.kubectl(['label', 'secret', 'release-data', '-n', 'team-c', 'tollgate.dev/credentials-']);
    expect(unlabelled.code, unlabelled.stderr).toBe(0);
    const again = await eventually('Ready=False once the label is gone', async () => {
      const pc = await getProxyConfig(api, 'team-c', 'default');
      return readyCondition(pc)?.status === 'False' ? pc : undefined;
    });
    expect(readyCondition(again)).toMatchObject({ reason: 'SecretNotFound', message });
  });

  it('refuses tokens for another audience and tokens that are not tokens', async () => {
    const other = await sidecar(await podWithToken(api, { namespace: 'team-a', name: 'a4', dir: dir.path, audience: 'not-tollgate' }));
    const bogusFile = join(dir.path, 'bogus.token');
    writeFileSync(bogusFile, 'not-a-token');
    const bogus = await sidecar({ ...other.pod, tokenFile: bogusFile });
    for (const s of [other, bogus]) {
      const error = await eventually('refusal', () => s.client.status().lastError);
      expect(error).toMatch(/^UNAUTHENTICATED/);
      expect(s.store.layer('operator')).toBeUndefined();
    }
  });

  it('refuses a token not bound to a pod, and a token whose pod is gone', async () => {
    const gone = await podWithToken(api, { namespace: 'team-a', name: 'a-gone', dir: dir.path });
    await api.request('DELETE', '/api/v1/namespaces/team-a/pods/a-gone');
    // serviceaccounts/token create alone must not yield the namespace's credentials.
    const unbound = await api.post<{ status: { token: string } }>('/api/v1/namespaces/team-a/serviceaccounts/app/token', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { audiences: ['tollgate'], expirationSeconds: 3600 },
    });
    const unboundFile = join(dir.path, 'unbound.token');
    writeFileSync(unboundFile, unbound.status.token);
    const noPod = await sidecar({ ...gone, name: 'unbound', tokenFile: unboundFile });
    const deleted = await sidecar(gone);
    const unboundError = await eventually('unbound refusal', () => noPod.client.status().lastError);
    expect(unboundError).toMatch(/^UNAUTHENTICATED: .*not bound to a pod/);
    expect(await eventually('deleted-pod refusal', () => deleted.client.status().lastError)).toMatch(/^UNAUTHENTICATED/);
    for (const s of [noPod, deleted]) {
      expect(s.store.layer('operator')).toBeUndefined();
      expect(existsSync(join(s.stateDir, 'credentials'))).toBe(false);
    }
  });

  it('a sidecar that cannot apply a snapshot rejects it, keeps its last good one, and the operator reports it', async () => {
    const a5 = await sidecar(await podWithToken(api, { namespace: 'team-a', name: 'a5', dir: dir.path }));
    await eventually('a5 on 2.22', () => operatorPrice(a5.store) === 2.22);
    // The sidecar can no longer write credential files: the folder is now a plain file.
    rmSync(join(a5.stateDir, 'credentials'), { recursive: true });
    writeFileSync(join(a5.stateDir, 'credentials'), '');
    const before = await scrape();
    await putProxyConfig(api, 'team-a', 'default', { ...gpt4o(4.44), ...withKey });
    await eventually('a1 on 4.44', () => operatorPrice(sidecars[0]!.store) === 4.44, 10_000);
    const rejected = await eventually('a5 rejects', () => a5.client.status().lastRejected);
    expect(rejected.reason).toMatch(/^cannot write credential files/);
    expect(operatorPrice(a5.store)).toBe(2.22);

    const event = await eventually('a SidecarRejected event', async () => (await eventsFor(api, 'team-a', 'default')).find((e) => e.reason === 'SidecarRejected'));
    expect(event).toMatchObject({ type: 'Warning', related: { kind: 'Pod', name: 'a5' } });
    expect(event.note).toContain('team-a/a5');
    expect(event.note).toContain('cannot write credential files');
    const pc = await eventually('status: one sidecar not current', async () => {
      const p = await getProxyConfig(api, 'team-a', 'default');
      return p.status?.sidecars?.connected === 3 && p.status.sidecars.current === 2 ? p : undefined;
    });
    expect(pc.status?.sidecars).toEqual({ connected: 3, current: 2 });

    // The operator's metrics saw the same: three sidecars sent 4.44, two applied it, one refused it.
    const after = await scrape();
    const delta = (name: string) => sampleValue(after, name)! - sampleValue(before, name)!;
    expect(delta('tollgate_operator_snapshots_pushed_total')).toBeGreaterThanOrEqual(3);
    expect(delta('tollgate_operator_snapshots_acked_total')).toBeGreaterThanOrEqual(2);
    expect(delta('tollgate_operator_snapshots_nacked_total')).toBe(1);
    expect(sampleValue(after, 'tollgate_operator_leader')).toBe(1);
    expect(sampleValue(after, 'tollgate_operator_connected_sidecars')).toBeGreaterThanOrEqual(3);
    const reconciled = (body: string) => sampleSum(body, 'tollgate_operator_reconciles_total', { result: 'success' });
    expect(reconciled(after) - reconciled(before)).toBeGreaterThan(0);
    expect(sampleValue(after, 'tollgate_operator_workqueue_queue_duration_seconds_count')).toBeGreaterThan(0);
  });

  it('a sidecar started while the operator is down runs its last good snapshot, then reconnects', async () => {
    const a1 = sidecars[0]!;
    await operator.stop();
    await eventually('a1 notices', () => !a1.client.status().connected);

    const restarted = await sidecar(a1.pod, { stateDir: a1.stateDir });
    await restarted.client.ready;
    expect(operatorPrice(restarted.store)).toBe(4.44);
    expect(readFileSync(restarted.store.get().credentials.openaiApiKeyFile!, 'utf8')).toBe(OPENAI_KEY);
    expect(restarted.client.status()).toMatchObject({ fromCache: true, connected: false });

    operator = runOperator();
    await eventually('reconnected to the new operator', () => restarted.client.status().connected && !restarted.client.status().fromCache, 60_000);
    expect(operatorPrice(restarted.store)).toBe(4.44);
  });

  it('a real `tollgate proxy` process takes its config from the operator and follows changes', async () => {
    const { port, work } = await podProxy('team-a', 'proxy-1');
    const price = async () => {
      const response = await fetch(`http://127.0.0.1:${port}/_local/api/config`);
      const body = (await response.json()) as { config: { pricing: { overrides: { model: string; input_per_million: number }[] } } };
      return body.config.pricing.overrides.find((m) => m.model === 'gpt-4o')?.input_per_million;
    };
    await eventually('the proxy runs the operator price', async () => (await price()) === 4.44, 60_000);
    await putProxyConfig(api, 'team-a', 'default', { ...gpt4o(5.55), ...withKey });
    await eventually('the proxy follows the change', async () => (await price()) === 5.55, 10_000);
    expect(readFileSync(join(work, 'state', 'credentials', 'openai-api-key'), 'utf8')).toBe(OPENAI_KEY);
  });

  it('a route added only through a ProxyConfig reaches a running `tollgate proxy`, keyed from its Secret and metered there', async () => {
    const ROUTE_KEY = 'sk-route-from-secret-42';
    const CLAUDE_KEY = 'sk-claude-gateway-from-secret';
    const upstream = await startFakeUpstream('openai', { expectApiKey: ROUTE_KEY });
    const claude = await startFakeUpstream('anthropic', { expectApiKey: CLAUDE_KEY });
    upstream.behave({ usage: { input: 1000, output: 200 } });
    try {
      await ensureNamespace(api, 'team-c');
      await putSecret(api, 'team-c', 'route-keys', { mistral: ROUTE_KEY, claude: CLAUDE_KEY });
      await putProxyConfig(api, 'team-c', 'default', {
        routes: [
          {
            name: 'mistral',
            format: 'openai-chat',
            baseUrl: upstream.url,
            credential: { kind: 'api-key', apiKey: { secretName: 'route-keys', key: 'mistral' } },
            models: ['mistral-large-latest'],
            prices: [{ model: 'mistral-large-latest', input_per_million: 2, output_per_million: 6 }],
          },
          {
            name: 'claude-gw',
            format: 'anthropic',
            baseUrl: claude.url,
            credential: { kind: 'api-key', header: 'x-api-key', apiKey: { secretName: 'route-keys', key: 'claude' } },
            headers: { 'anthropic-version': '2023-06-01' },
          },
        ],
      });
      const { port, work } = await podProxy('team-c', 'proxy-2');
      const url = `http://127.0.0.1:${port}`;
      const call = () =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-tollgate-user': 'dana' },
          body: JSON.stringify({ model: 'mistral-large-latest', messages: [{ role: 'user', content: 'hi' }] }),
        }).catch(() => undefined);
      // Before the snapshot arrives the model is unknown (or the proxy not yet up); after it, the route serves it.
      let res: Response | undefined;
      await eventually('the route from the ProxyConfig to serve its model', async () => (res = await call())?.status === 200, 60_000);
      expect(upstream.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ROUTE_KEY}`);
      const span = await findSpan(url, { spanId: res!.headers.get('x-proxy-span-id')! });
      expect(span).toMatchObject({ route: 'mistral', provider: 'mistral', model: 'mistral-large-latest', user_id: 'dana', status: 'ok' });
      // 1000 × 2 + 200 × 6 USD per million, from the route's prices in the ProxyConfig
      expect(span.cost_usd).toBeCloseTo(3200 / 1e6, 12);
      expect(readFileSync(join(work, 'state', 'credentials', 'route-mistral-api-key'), 'utf8')).toBe(ROUTE_KEY);
      // An Anthropic-compatible route of the same ProxyConfig, called with the Anthropic SDK.
      const message = await new Anthropic({ baseURL: `${url}/proxy/claude-gw`, apiKey: 'placeholder', maxRetries: 0 }).messages.create({
        model: 'claude-sonnet-4-20250514',
        max_tokens: 32,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(message.type).toBe('message');
      expect(claude.requests.at(-1)!.headers['x-api-key']).toBe(CLAUDE_KEY);
    } finally {
      await upstream.close();
      await claude.close();
    }
  });
});
