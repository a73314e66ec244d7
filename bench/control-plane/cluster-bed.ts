// What bench/control-plane-scale.ts runs against: the real etcd + kube-apiserver of the cluster tests, the CRDs
// and the chart's RBAC, two `tollgate operator` replicas and one `tollgate webhook` as processes started the way
// the `tollgate` image starts them (compiled dist/, its environment and entry point read from the Dockerfile),
// pods with real bound service-account tokens, and a few real sidecar processes.

import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Agent, fetch } from 'undici';
import { createCertificateAuthority, issueCertificate } from '../../contracts/pki.ts';
import { PROXY_CONFIG } from '../../crds/index.ts';
import { KubeApi } from '../../kube-client/api-client.ts';
import { createFleetPod, fleetBudgetPolicyYaml, type FleetPod } from '../../test/cluster/sidecar-fleet.ts';
import { asChartServiceAccount } from '../../test/cluster/chart-rbac.ts';
import { installOperatorPrerequisites, leaseHolder, OPERATOR_NAMESPACE, putSecret } from '../../test/cluster/operator-fixtures.ts';
import { webhookConfiguration } from '../../test/cluster/webhook-fixtures.ts';
import type { ControlPlane } from '../../test/control-plane/control-plane.ts';
import { freePort } from '../../test/control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../../test/control-plane/managed-process.ts';
import { startFakeUpstream, type FakeUpstream } from '../../test/fakes/llm-upstream.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { imageStage } from '../sidecar-process.ts';

const ROOT = resolve(import.meta.dirname, '../..');
export const FLEET_NAMESPACE = 'fleet';
export const ADMIT_NAMESPACE = 'admit';
export const BASELINE_NAMESPACE = 'admit-baseline';
const API_KEY = 'sk-bench-control-plane';

/** A folder laid out like the `tollgate` image's /app (the Dockerfile's COPY lines of that target). */
function controlImageLayout(dir: string): string {
  const dist = join(ROOT, 'dist');
  if (!existsSync(join(dist, 'operator'))) throw new Error('dist/ is missing: run ./tollgatew npm run build first');
  const app = join(dir, 'app');
  for (const part of ['cmd', 'contracts', 'operator', 'webhook', 'kube-client', 'crds']) cpSync(join(dist, part), join(app, part), { recursive: true });
  cpSync(join(ROOT, 'proto'), join(app, 'proto'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
  return app;
}

export interface BedOptions {
  /** Run the operator and webhook from the TypeScript source instead of dist/. */
  fromSource: boolean;
  /** node flags for the operators after the image's (a heap snapshot on a signal, a CPU profile). */
  operatorNodeArgs?: string[];
  /** budgets.store redis: the operators keep the cluster ledger on this store (ADR 1314). */
  ledgerRedisUrl?: string;
}

export interface OperatorReplica {
  identity: string;
  process: ManagedProcess;
}

export class ClusterBed {
  readonly cp: ControlPlane;
  readonly api: KubeApi;
  readonly dir: string;
  readonly grpcPort: number;
  readonly operators = new Map<string, OperatorReplica>();
  webhook: ManagedProcess | undefined;
  webhookPort = 0;
  upstream: FakeUpstream | undefined;
  readonly #app: { dir: string; nodeArgs: string[]; env: Record<string, string>; script: string };
  #operatorKubeconfig = '';
  #pods = 0;

  readonly #operatorNodeArgs: string[];
  readonly #operatorFlags: string[];

  private constructor(cp: ControlPlane, dir: string, grpcPort: number, opts: BedOptions) {
    this.cp = cp;
    this.api = new KubeApi(cp.kubeConfig);
    this.dir = dir;
    this.grpcPort = grpcPort;
    const image = imageStage('tollgate');
    this.#operatorNodeArgs = opts.operatorNodeArgs ?? [];
    this.#operatorFlags = opts.ledgerRedisUrl ? [`--ledger-redis-url=${opts.ledgerRedisUrl}`] : [];
    this.#app = opts.fromSource
      ? { dir: ROOT, nodeArgs: [], env: { NODE_ENV: 'production' }, script: 'cmd/tollgate.ts' }
      : { dir: controlImageLayout(dir), nodeArgs: image.nodeArgs, env: image.env, script: image.script };
  }

  static async start(cp: ControlPlane, dir: string, opts: BedOptions): Promise<ClusterBed> {
    const bed = new ClusterBed(cp, dir, await freePort(), opts);
    bed.#operatorKubeconfig = await installOperatorPrerequisites(cp, dir);
    await bed.api.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: FLEET_NAMESPACE } });
    await bed.api.post(`/api/v1/namespaces/${FLEET_NAMESPACE}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'app' } });
    bed.upstream = await startFakeUpstream('openai', { expectApiKey: API_KEY });
    await putSecret(bed.api, FLEET_NAMESPACE, 'llm-keys', { openai: API_KEY });
    return bed;
  }

  /** `tollgate operator` as the chart runs it (production lease timings, info logs), as the chart's ServiceAccount. */
  startOperator(identity: string): OperatorReplica {
    const process = startManagedProcess({
      name: `operator ${identity}`,
      command: globalThis.process.execPath,
      args: [
        ...this.#app.nodeArgs,
        ...this.#operatorNodeArgs,
        join(this.#app.dir, this.#app.script),
        'operator',
        `--kubeconfig=${this.#operatorKubeconfig}`,
        `--namespace=${OPERATOR_NAMESPACE}`,
        `--identity=${identity}`,
        '--grpc-host=127.0.0.1',
        `--grpc-port=${this.grpcPort}`,
        '--health-host=127.0.0.1',
        '--health-port=0',
        '--log-level=info',
        ...this.#operatorFlags,
      ],
      logPath: join(this.dir, `${identity}.log`),
      env: { PATH: globalThis.process.env.PATH, ...this.#app.env },
    });
    const replica = { identity, process };
    this.operators.set(identity, replica);
    return replica;
  }

  async leader(): Promise<OperatorReplica> {
    const holder = await waitFor(
      'a leading operator',
      async () => {
        const id = await leaseHolder(this.api);
        return id && this.operators.has(id) && !this.operators.get(id)!.process.hasExited() ? id : undefined;
      },
      120_000,
    );
    return this.operators.get(holder)!;
  }

  /** An operator replica's Prometheus metrics (its health port, from its log). */
  async operatorMetrics(identity: string): Promise<string> {
    const replica = this.operators.get(identity);
    if (!replica) throw new Error(`no operator ${identity}`);
    const started = readFileSync(replica.process.logPath, 'utf8')
      .split('\n')
      .findLast((line) => line.includes('"msg":"operator started"'));
    const port = started ? (JSON.parse(started) as { healthPort: number }).healthPort : undefined;
    if (!port) throw new Error(`operator ${identity} has not started yet`);
    return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  }

  async operatorCaPem(): Promise<string> {
    const secret = await waitFor(
      'the operator TLS Secret',
      async () => {
        const s = await this.api.get<{ data?: Record<string, string> }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/secrets/tollgate-operator-tls`);
        return s.data?.['ca.crt'] ? s : undefined;
      },
      120_000,
    );
    return Buffer.from(secret.data!['ca.crt']!, 'base64').toString();
  }

  /** `tollgate webhook` with a certificate from files (as with cert-manager), registered for opted-in namespaces. */
  async startWebhook(operatorCaPem: string): Promise<void> {
    const ca = await createCertificateAuthority({ commonName: 'bench-webhook-ca' });
    const leaf = await issueCertificate(ca, { commonName: 'tollgate-webhook', ipAddresses: ['127.0.0.1'], usage: 'server' });
    const certDir = join(this.dir, 'webhook-tls');
    mkdirSync(certDir, { recursive: true });
    writeFileSync(join(certDir, 'tls.crt'), leaf.certPem);
    writeFileSync(join(certDir, 'tls.key'), leaf.keyPem, { mode: 0o600 });
    writeFileSync(join(this.dir, 'operator-ca.crt'), operatorCaPem);
    const kc = await asChartServiceAccount(this.cp, 'webhook', { namespace: OPERATOR_NAMESPACE });
    const kubeconfig = join(this.dir, 'webhook.kubeconfig');
    writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
    this.webhookPort = await freePort();
    this.webhook = startManagedProcess({
      name: 'webhook',
      command: process.execPath,
      args: [
        ...this.#app.nodeArgs,
        join(this.#app.dir, this.#app.script),
        'webhook',
        '--host=127.0.0.1',
        `--port=${this.webhookPort}`,
        `--namespace=${OPERATOR_NAMESPACE}`,
        '--cert-mode=files',
        `--cert-dir=${certDir}`,
        `--operator-address=127.0.0.1:${this.grpcPort}`,
        `--operator-ca-file=${join(this.dir, 'operator-ca.crt')}`,
        '--sidecar-image=ghcr.io/tollgate/tollgate-sidecar:0.1.0',
        '--log-level=info',
      ],
      logPath: join(this.dir, 'webhook.log'),
      env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig, ...this.#app.env },
    });
    await this.api.post('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
      ...webhookConfiguration({ name: 'tollgate', url: `https://127.0.0.1:${this.webhookPort}/mutate`, ownNamespace: OPERATOR_NAMESPACE, caBundlePem: ca.certPem }),
    });
    for (const [name, labels] of [
      [ADMIT_NAMESPACE, { 'tollgate.dev/injection': 'enabled' }],
      // Opted out: neither webhook entry matches it, so its pods show what a creation costs without the webhook.
      [BASELINE_NAMESPACE, { 'tollgate.dev/injection': 'disabled' }],
    ] as const) {
      await this.api.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
    }
    const dispatcher = new Agent({ connect: { ca: ca.certPem } });
    await waitFor(
      'the webhook to be ready',
      async () => {
        if (this.webhook!.hasExited()) throw new Error(`the webhook exited: ${this.webhook!.logTail()}`);
        return (await fetch(`https://127.0.0.1:${this.webhookPort}/readyz`, { dispatcher })).status === 200;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    await dispatcher.close();
  }

  /** A real `tollgate proxy` sidecar process for a pod, serving calls with the pushed config. */
  async startRealSidecar(pod: FleetPod, operatorCaPem: string): Promise<{ process: ManagedProcess; url: string }> {
    const work = join(this.dir, `real-${pod.name}`);
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, 'token'), pod.token, { mode: 0o600 });
    writeFileSync(join(work, 'operator-ca.crt'), operatorCaPem);
    const port = await freePort();
    const sidecar = startManagedProcess({
      name: `sidecar ${pod.name}`,
      command: 'sh',
      args: ['-c', `cd "${work}" && exec "${process.execPath}" "${join(ROOT, 'cmd/tollgate.ts')}" proxy --port ${port}`],
      logPath: join(work, 'sidecar.log'),
      env: {
        PATH: process.env.PATH,
        HOME: work,
        TOLLGATE_OPERATOR_ADDRESS: `127.0.0.1:${this.grpcPort}`,
        TOLLGATE_OPERATOR_CA_FILE: join(work, 'operator-ca.crt'),
        TOLLGATE_TOKEN_FILE: join(work, 'token'),
        TOLLGATE_STATE_DIR: join(work, 'state'),
        TOLLGATE_POD_NAME: pod.name,
        TOLLGATE_POD_NAMESPACE: pod.namespace,
        TOLLGATE_LOG_LEVEL: 'warn',
      },
    });
    return { process: sidecar, url: `http://127.0.0.1:${port}` };
  }

  /** Creates pods (Pending forever) with bound tokens until there are `count`, `concurrency` at a time. */
  async growPods(count: number, concurrency = 16): Promise<FleetPod[]> {
    const created: FleetPod[] = [];
    const next = () => (this.#pods < count ? this.#pods++ : undefined);
    const worker = async () => {
      for (let i = next(); i !== undefined; i = next()) created.push(await createFleetPod(this.api, FLEET_NAMESPACE, i));
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return created.sort((a, b) => Number(a.name.slice(4)) - Number(b.name.slice(4)));
  }

  proxyConfigYaml(inputPerMillion: number): string {
    return `apiVersion: ${PROXY_CONFIG.apiVersion}
kind: ${PROXY_CONFIG.kind}
metadata: { name: default, namespace: ${FLEET_NAMESPACE} }
spec:
  pricing:
    models:
      - { provider: openai, model: gpt-4o-mini, input_per_million: ${inputPerMillion}, output_per_million: 0.6 }
      - { provider: openai, model: gpt-4o, input_per_million: 2.5, output_per_million: 10 }
  upstreams:
    beta: { baseUrl: "${this.upstream!.url}" }
  credentials:
    openaiApiKey: { secretName: llm-keys, key: openai }
`;
  }

  budgetPolicyYaml(limitUsd: string): string {
    return fleetBudgetPolicyYaml(FLEET_NAMESPACE, limitUsd);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.operators.values()].map((o) => o.process.stop(2_000)));
    await this.webhook?.stop(2_000);
    await this.upstream?.close();
  }
}
