// The central server follows its ProxyConfig through the operator's push, as sidecars do (ADR 0813), on a real
// API server: the chart renders the ProxyConfig <release>-server from the server values, and the server pod's
// annotation and environment; a real `tollgate proxy` in server mode runs with the chart's config file and that
// environment (addresses and paths made local: this control plane has no kubelet), identifies its caller by a
// real OIDC ID token, and takes a price and an upstream change of the ProxyConfig on the next call, without a
// restart.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig, type V1Deployment, type V1EnvVar } from '@kubernetes/client-node';
import pino from 'pino';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyConfigSpec } from '../../crds/index.ts';
import { type Operator, startOperator } from '../../operator/src/operator.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort, startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { startOidcIssuer, type LocalOidcIssuer } from '../fakes/oidc-issuer.ts';
import {
  apply,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  podWithToken,
  putProxyConfig,
  putSecret,
  tempDir,
} from './operator-fixtures.ts';

const CHART = join(import.meta.dirname, '..', '..', 'charts', 'tollgate');
const NS = OPERATOR_NAMESPACE;
const KEY = 'sk-server-push-key';
const ADMIN = 'platform@example.com';
const MODEL = 'gpt-4o-mini';

type Manifest = { kind: string; metadata: { name: string; namespace?: string }; [key: string]: unknown };

describe('the central server follows the ProxyConfig the chart renders for it', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: Operator;
  let issuer: LocalOidcIssuer;
  let first: FakeUpstream;
  let second: FakeUpstream;
  let server: ProxyProcess;
  let token: string;
  let rendered: Manifest[];
  let proxyConfig: Manifest & { spec: ProxyConfigSpec };

  beforeAll(async () => {
    dir = tempDir('tollgate-server-push-');
    [issuer, first, second] = await Promise.all([startOidcIssuer(), startFakeUpstream('openai', { expectApiKey: KEY }), startFakeUpstream('openai', { expectApiKey: KEY })]);
    token = await issuer.idToken(ADMIN, 'tollgate');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const values = join(dir.path, 'values.yaml');
    writeFileSync(
      values,
      stringify({
        server: {
          enabled: true,
          credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
          config: {
            server: { auth: { oidc: [{ issuer: issuer.url, audiences: ['tollgate'] }], admins: [ADMIN] } },
            upstreams: { beta: { baseUrl: first.url } },
            pricing: { models: [{ provider: 'openai', model: MODEL, input_per_million: 1, output_per_million: 0 }] },
          },
        },
      }),
    );
    const template = await cp.helm(['template', 'tollgate', CHART, '-n', NS, '--kube-version', '1.34.0', '-f', values]);
    expect(template.stderr).toBe('');
    rendered = parseAllDocuments(template.stdout)
      .map((d) => d.toJSON() as Manifest)
      .filter(Boolean);
    proxyConfig = rendered.find((m) => m.kind === 'ProxyConfig' && m.metadata.name === 'tollgate-server') as Manifest & { spec: ProxyConfigSpec };

    const operatorKubeConfig = new KubeConfig();
    operatorKubeConfig.loadFromFile(await installOperatorPrerequisites(cp, dir.path));
    await putSecret(api, NS, 'llm-keys', { openai: KEY });
    // As helm install creates it: through the API server, so the CRD's schema checks what the chart rendered.
    await apply(cp, [proxyConfig]);
    const grpcPort = await freePort();
    operator = startOperator({
      kubeConfig: operatorKubeConfig,
      logger: pino({ level: 'debug' }, pino.destination({ dest: join(dir.path, 'operator.log'), sync: true, append: true })),
      identity: 'server-push-test-operator',
      leaseNamespace: NS,
      leaseName: 'tollgate-operator',
      grpcHost: '127.0.0.1',
      grpcPort,
      tls: { kind: 'secret', namespace: NS, name: 'tollgate-operator-tls', dnsNames: ['tollgate-operator.tollgate-system.svc'], ipAddresses: ['127.0.0.1'] },
    });
    await eventually('the push server', () => operator.pushPort(), 60_000);

    // The pod as the Deployment's template has it: its annotations, its environment, its volumes' files.
    const deployment = rendered.find((m) => m.kind === 'Deployment' && m.metadata.name === 'tollgate-server') as unknown as V1Deployment;
    const template_ = deployment.spec!.template;
    const pod = await podWithToken(api, { namespace: NS, name: 'tollgate-server-0', annotations: template_.metadata!.annotations!, dir: dir.path });
    // The CA the operator publishes in <release>-operator-ca (ADR 0809), which the chart projects into the pod.
    const ca = await eventually('the operator CA ConfigMap', async () => {
      const cm = await api.get<{ data?: Record<string, string> }>(`/api/v1/namespaces/${NS}/configmaps/tollgate-operator-ca`).catch(() => undefined);
      return cm?.data?.['ca.crt'];
    });
    const files = join(dir.path, 'files');
    mkdirSync(files);
    writeFileSync(join(files, 'ca.crt'), ca);
    writeFileSync(join(files, 'openai-api-key'), KEY);
    const container = template_.spec!.containers[0]!;
    const local: Record<string, string> = {
      TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${grpcPort}`,
      TOLLGATE_OPERATOR_CA_FILE: join(files, 'ca.crt'),
      TOLLGATE_TOKEN_FILE: pod.tokenFile,
      TOLLGATE_STATE_DIR: join(dir.path, 'state'),
      TOLLGATE_POD_NAME: pod.name,
      TOLLGATE_POD_NAMESPACE: NS,
      TOLLGATE_POD_IP: '127.0.0.1',
      TOLLGATE_HEALTH_PORT: String(await freePort()),
    };
    expect(container.env).toContainEqual({ name: 'TOLLGATE_OPERATOR_ADDRESS', value: 'tollgate-operator.tollgate-system.svc:8443' });
    const env = Object.fromEntries(
      (container.env ?? []).map((e: V1EnvVar) => {
        const value = local[e.name] ?? e.value;
        if (value === undefined) throw new Error(`no local value for the chart's ${e.name}`);
        return [e.name, value];
      }),
    );
    const configMap = rendered.find((m) => m.kind === 'ConfigMap' && m.metadata.name === 'tollgate-server') as unknown as { data: Record<string, string> };
    const config = parseYaml(configMap.data['tollgate.yaml']!) as { storage: object; credentials: object };
    server = await startProxyProcess({
      configYaml: stringify({ ...config, storage: { ...config.storage, path: 'spans.db' }, credentials: { openaiApiKeyFile: join(files, 'openai-api-key') } }),
      args: ['--host', '127.0.0.1'],
      env,
      readyHeaders: { authorization: `Bearer ${token}` },
    });
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await operator?.stop();
    await cp?.stop();
    await Promise.all([issuer?.close(), first?.close(), second?.close()]);
    dir?.remove();
  });

  /** One call as the admin, and its span's cost; undefined unless it succeeded. */
  async function costOfNextCall(): Promise<number | undefined> {
    const call = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await call.arrayBuffer();
    if (call.status !== 200) return undefined;
    const traces = await fetch(`${server.url}/_local/api/traces?limit=50`, { headers: { authorization: `Bearer ${token}` } });
    const span = ((await traces.json()) as { spans: SpanJson[] }).spans.find((s) => s.span_id === call.headers.get('x-proxy-span-id'));
    expect(span?.user_id).toBe(ADMIN);
    return span && span.cost_usd / span.input_tokens;
  }

  it("renders the ProxyConfig from the server values, and points the server's pod at it", () => {
    expect(proxyConfig.metadata.namespace).toBe(NS);
    expect(proxyConfig.spec).toEqual({
      credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
      upstreams: { beta: { baseUrl: first.url } },
      pricing: { models: [{ provider: 'openai', model: MODEL, input_per_million: 1, output_per_million: 0 }] },
    });
    const deployment = rendered.find((m) => m.kind === 'Deployment' && m.metadata.name === 'tollgate-server') as unknown as V1Deployment;
    expect(deployment.spec!.template.metadata!.annotations!['tollgate.dev/proxy-config']).toBe('tollgate-server');
  });

  it("the server connects to the operator and runs the ProxyConfig's version", async () => {
    const status = await eventually('the server counted as current', async () => {
      const pc = await getProxyConfig(api, NS, 'tollgate-server');
      return pc.status?.sidecars?.current === 1 ? pc.status : undefined;
    });
    expect(status.sidecars).toEqual({ connected: 1, current: 1 });
    expect(await costOfNextCall()).toBeCloseTo(1e-6, 12);
    expect(first.requests).toHaveLength(1);
  });

  it('a new price and a new upstream in the ProxyConfig reach the running server without a restart', async () => {
    const pid = server.child.pid;
    await putProxyConfig(api, NS, 'tollgate-server', {
      ...proxyConfig.spec,
      upstreams: { beta: { baseUrl: second.url } },
      pricing: { models: [{ provider: 'openai', model: MODEL, input_per_million: 3, output_per_million: 0 }] },
    });
    await eventually('the new price', async () => (Math.abs(((await costOfNextCall()) ?? 0) - 3e-6) < 1e-12 ? true : undefined), 30_000);
    expect(second.requests.length).toBeGreaterThan(0);
    expect(server.child.pid).toBe(pid);
    expect(server.child.exitCode).toBeNull();
    expect(server.logs.filter((l) => l.msg === 'tollgate proxy listening')).toHaveLength(1);
  });
});
