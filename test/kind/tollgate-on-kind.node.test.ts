// Tollgate on a kind cluster (issue 26, ADR 0112): the chart installed with the images `docker build` made from
// the repository's Dockerfile, the webhook injecting the sidecar into a real running pod, calls from the app
// container through the sidecar to a fake upstream pod, a live price change, the sidecar's memory under load
// against the chart's limit, an operator outage, `helm uninstall`, and the cluster deleted at the end.
//
// The steps build on each other, like a platform team's first afternoon with Tollgate. The cluster takes
// about a minute to come up; see docs/real-node.md for how it is built and how to keep one up to look around.

import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chartSidecarLimitMb } from '../../bench/side-by-side.ts';
import { eventually } from '../cluster/operator-fixtures.ts';
import { acquireHostLock, type HostLock } from './host-lock.ts';
import { run } from './host-command.ts';
import { createKindCluster, MACHINE_LOCK, TEST_CLUSTER, type KindCluster } from './kind-cluster.ts';
import type { KindAssets } from './kind-assets.ts';
import {
  APP_NAMESPACE,
  appClient,
  appDeployment,
  appNamespaceManifests,
  containerMemory,
  containerMemoryCgroup,
  FAKE_USAGE,
  FAKES_NAMESPACE,
  fakeUpstreamManifests,
  inspectContainer,
  mib,
  MODEL,
  OPENAI_KEY,
  probePod,
  proxyConfigManifest,
  resetMemoryPeak,
  waitForInjection,
} from './tollgate-fixtures.ts';
import { helmInstall, NAMESPACE, RELEASE } from './tollgate-install.ts';

const skipReason = inject('kindSkipReason');
const assets = inject('kindAssets');

interface Span {
  span_id: string;
  provider: string;
  route: string;
  model: string;
  user_id: string | null;
  input_tokens: number;
  cost_usd: number;
  status: string;
}
interface CallResult {
  status: number;
  headers: Record<string, string>;
  body: string;
}

describe.skipIf(skipReason !== '')('Tollgate on a one-node kind cluster', () => {
  let node: KindCluster;
  let lock: HostLock | undefined;
  // null when the machine cannot run kind: the suite is then skipped and this is never read.
  const images = (assets as KindAssets).images;

  const kubectl = async (args: string[], input?: string): Promise<string> => {
    const r = await node.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };
  const apply = (yaml: string) => kubectl(['apply', '-f', '-'], yaml);
  const getJson = async <T>(args: string[]) => JSON.parse(await kubectl([...args, '-o', 'json'])) as T;

  /** One call from the app container; its span as the sidecar stored it (undefined unless the call succeeded). */
  async function callAndSpan(): Promise<{ call: CallResult; span?: Span | undefined }> {
    const call = await appClient<CallResult>(node, ['call', MODEL]);
    if (call.status !== 200) return { call };
    const traces = await appClient<{ body: { spans: Span[] } }>(node, ['traces', '20']);
    return { call, span: traces.body.spans.find((s) => s.span_id === call.headers['x-proxy-span-id']) };
  }
  const costOfNextCall = async () => (await callAndSpan()).span?.cost_usd;
  let webhookReadyAt = 0;

  beforeAll(async () => {
    lock = await acquireHostLock(MACHINE_LOCK, 'kind');
    node = await createKindCluster({ name: TEST_CLUSTER, workers: 0, assets: assets!, log: (line) => process.stderr.write(`[kind] ${line}\n`) });
  }, 30 * 60_000);

  afterAll(async () => {
    try {
      await node?.delete();
    } finally {
      lock?.release();
    }
  }, 300_000);

  it('installs the chart with the images docker build made; the operator and the webhook become Ready', async () => {
    const installStarted = Date.now();
    const installed = await helmInstall(node);
    expect(installed.stderr).toBe('');
    expect(installed.stdout).toContain('STATUS: deployed');
    for (const deployment of ['tollgate-operator', 'tollgate-webhook']) {
      const rollout = await node.kubectl(['rollout', 'status', '-n', NAMESPACE, `deployment/${deployment}`, '--timeout=240s']);
      expect(rollout.code, `${rollout.stderr}\n${await node.describe()}`).toBe(0);
    }
    webhookReadyAt = Date.now();
    // The webhook is Ready only once the operator's CA has reached its Secret volume (ADR 0808).
    console.info(`[node] operator and webhook Ready ${Math.round((webhookReadyAt - installStarted) / 1000)} s after helm install started`);
    const pods = await getJson<{ items: Array<{ spec: { containers: Array<{ image: string; imagePullPolicy: string }> } }> }>(['get', 'pods', '-n', NAMESPACE]);
    expect(pods.items).toHaveLength(4);
    // The chart's defaults: the images are on every node (kind load), so IfNotPresent pulls nothing.
    for (const pod of pods.items) expect(pod.spec.containers[0]).toMatchObject({ image: images.tollgate.ref, imagePullPolicy: 'IfNotPresent' });
  });

  it('runs the operator image as the Dockerfile lays it out: entry point, user, environment, read-only root', async () => {
    const pod = (await kubectl(['get', 'pods', '-n', NAMESPACE, '-l', 'app.kubernetes.io/component=operator', '-o', 'jsonpath={.items[0].metadata.name}'])).trim();
    const seen = await inspectContainer(node, NAMESPACE, pod, 'operator');
    const { config } = images.tollgate;
    expect(`${seen.uid}:${seen.gid}`).toBe(config.user);
    expect(seen.argv.slice(0, config.entrypoint.length)).toEqual(config.entrypoint);
    expect(seen.argv[config.entrypoint.length]).toBe('operator'); // the chart's args replace the image's CMD
    expect(seen.cwd).toBe(config.workingDir);
    expect(seen.env.NODE_ENV).toBe(config.env.NODE_ENV);
    expect(seen.env.NODE_OPTIONS).toBe(config.env.NODE_OPTIONS);
    expect(seen.rootWrite).toBe('EROFS'); // the chart sets readOnlyRootFilesystem
    expect(seen.nodeVersion).toBe(images.base.nodeVersion);
  });

  it('injects the sidecar into a Deployment of a labelled namespace, and the pod becomes Ready', async () => {
    await apply(fakeUpstreamManifests(images.testTools.ref));
    await apply(appNamespaceManifests());
    await apply(proxyConfigManifest(2));
    await waitForInjection(node, images.testTools.ref);
    console.info(`[node] injection ready ${Math.round((Date.now() - webhookReadyAt) / 1000)} s after the webhook's rollout was Ready`);

    await apply(appDeployment(images.testTools.ref));
    const rollout = await node.kubectl(['rollout', 'status', '-n', APP_NAMESPACE, 'deployment/chat', '--timeout=180s']);
    expect(rollout.code, `${rollout.stderr}\n${await node.describe()}`).toBe(0);
    const fake = await node.kubectl(['rollout', 'status', '-n', FAKES_NAMESPACE, 'deployment/fake-openai', '--timeout=120s']);
    expect(fake.code, fake.stderr).toBe(0);

    const pod = (await getJson<{ items: Array<PodJson> }>(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat'])).items[0]!;
    const sidecar = pod.spec.initContainers?.find((c) => c.name === 'tollgate-proxy');
    expect(sidecar).toMatchObject({ image: images.sidecar.ref, imagePullPolicy: 'IfNotPresent', restartPolicy: 'Always' });
    expect(pod.status.initContainerStatuses?.find((s) => s.name === 'tollgate-proxy')).toMatchObject({ ready: true, started: true });
    expect(pod.status.containerStatuses?.find((s) => s.name === 'app')).toMatchObject({ ready: true });
    expect(pod.spec.containers[0]!.env).toContainEqual({ name: 'OPENAI_BASE_URL', value: 'http://127.0.0.1:8181/proxy/beta/v1' });
  });

  it('runs the sidecar image as the Dockerfile lays it out, with the injected read-only root', async () => {
    const pod = (await kubectl(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat', '-o', 'jsonpath={.items[0].metadata.name}'])).trim();
    const seen = await inspectContainer(node, APP_NAMESPACE, pod, 'tollgate-proxy');
    const { config } = images.sidecar;
    expect(`${seen.uid}:${seen.gid}`).toBe(config.user);
    expect(seen.argv).toEqual([...config.entrypoint, 'proxy', '--port', '8181']);
    expect(seen.cwd).toBe(config.workingDir);
    expect(seen.env.NODE_OPTIONS).toBe(config.env.NODE_OPTIONS);
    expect(seen.env.NODE_ENV).toBe(config.env.NODE_ENV);
    expect(seen.rootWrite).toBe('EROFS');
  });

  it('a call from the app container goes through the sidecar to the fake upstream pod, with the key from the Secret, and is metered', async () => {
    // The first snapshot brings the key and the price; before it lands the sidecar has no OpenAI key.
    const { call, span } = await eventually(
      'a priced call through the sidecar',
      async () => {
        const result = await callAndSpan();
        return result.span?.cost_usd === 2 ? result : undefined;
      },
      90_000,
    );
    expect(call.status).toBe(200);
    expect(JSON.parse(call.body)).toMatchObject({ object: 'chat.completion', model: 'gpt-4o-mini-2024-07-18' });
    expect(span).toMatchObject({ provider: 'openai', route: 'beta', model: MODEL, user_id: 'node-test', input_tokens: FAKE_USAGE.input, status: 'ok' });

    // The app sent no key; the fake saw the Secret's, attached by the sidecar.
    const received = JSON.parse(await kubectl(['get', '--raw', `/api/v1/namespaces/${FAKES_NAMESPACE}/services/fake-openai:control/proxy/requests`])) as Array<{
      path: string;
      headers: Record<string, string>;
    }>;
    const last = received.at(-1)!;
    expect(last.path).toBe('/v1/chat/completions');
    expect(last.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it('reaches the API server from the pod through the kubernetes Service by its cluster DNS name', async () => {
    expect(await appClient(node, ['connect', 'kubernetes.default.svc.cluster.local', '443'])).toEqual({ ok: true });
  });

  it('a kubectl apply of a new price is used by the next call', async () => {
    await apply(proxyConfigManifest(7.5));
    await eventually('a call costed at the new price', async () => ((await costOfNextCall()) === 7.5 ? true : undefined), 60_000);
  });

  it("keeps the sidecar's memory under the chart's limit through a short load, without an OOM kill", async () => {
    const pod = (await getJson<{ items: Array<PodJson> }>(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat'])).items[0]!;
    const containerId = pod.status.initContainerStatuses!.find((s) => s.name === 'tollgate-proxy')!.containerID!.replace(/^containerd:\/\//, '');
    const cgroup = containerMemoryCgroup(containerId);
    resetMemoryPeak(cgroup);
    const idle = containerMemory(cgroup);
    const load = await appClient<{ total: number; concurrency: number; statuses: Record<string, number>; elapsedMs: number }>(node, ['load', '2000', '16']);
    const after = containerMemory(cgroup);
    console.info(
      `[node] sidecar memory, ${load.total} calls ${load.concurrency} at a time in ${load.elapsedMs} ms: RSS idle ${mib(idle.rssBytes)} (private ${mib(idle.privateBytes)}), ` +
        `after ${mib(after.rssBytes)} (private ${mib(after.privateBytes)}), peak ${mib(after.peakRssBytes)}; cgroup peak ${mib(after.cgroupPeakBytes)} of the limit ${mib(after.limitBytes)}`,
    );
    expect(load.statuses).toEqual({ 200: load.total });
    expect(after.limitBytes).toBe(chartSidecarLimitMb() * 1024 * 1024); // the chart's sidecar.resources.limits.memory
    expect(after.oomKills).toBe(0);
    expect(after.pid).toBe(idle.pid); // the same process: not restarted
    const now = (await getJson<{ items: Array<PodJson> }>(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat'])).items[0]!;
    const sidecarNow = now.status.initContainerStatuses!.find((s) => s.name === 'tollgate-proxy')!;
    expect(sidecarNow.restartCount).toBe(0);
    expect(sidecarNow.lastState?.terminated?.reason).toBeUndefined();
  });

  it('keeps serving the last good config while the operator is gone, and takes the newer one when it is back', async () => {
    await kubectl(['scale', '-n', NAMESPACE, 'deployment/tollgate-operator', '--replicas=0']);
    await kubectl(['wait', '-n', NAMESPACE, '--for=delete', 'pod', '-l', 'app.kubernetes.io/component=operator', '--timeout=120s']);
    expect(await costOfNextCall()).toBe(7.5);
    // Nobody can push this one yet.
    await apply(proxyConfigManifest(11));
    expect(await costOfNextCall()).toBe(7.5);

    await kubectl(['scale', '-n', NAMESPACE, 'deployment/tollgate-operator', '--replicas=2']);
    const rollout = await node.kubectl(['rollout', 'status', '-n', NAMESPACE, 'deployment/tollgate-operator', '--timeout=180s']);
    expect(rollout.code, rollout.stderr).toBe(0);
    try {
      await eventually('a call costed at the price applied during the outage', async () => ((await costOfNextCall()) === 11 ? true : undefined), 120_000);
    } catch (error) {
      // What the sidecar and the operators said is what tells a reconnect problem from a push problem.
      const logs = async (args: string[]) => (await node.kubectl(['logs', '--tail=40', ...args])).stdout;
      console.error(`[node] sidecar log:\n${await logs(['-n', APP_NAMESPACE, '-l', 'app=chat', '-c', 'tollgate-proxy'])}`);
      console.error(`[node] operator log:\n${await logs(['-n', NAMESPACE, '-l', 'app.kubernetes.io/component=operator', '--prefix'])}`);
      throw error;
    }
  });

  it("helm uninstall leaves nothing of Tollgate behind but the CRDs and the user's own resources", async () => {
    // What the operator and the webhook created at run time, which the chart does not list (ADR 0807). Each
    // names its component's Deployment as owner, so the garbage collector deletes it after the Deployment.
    const runtimeKinds = 'secrets,leases.coordination.k8s.io,endpointslices.discovery.k8s.io,configmaps';
    const inNamespace = async () =>
      (await getJson<{ items: Array<OwnedObject> }>(['get', runtimeKinds, '-n', NAMESPACE])).items
        // Every namespace gets this one from kube-controller-manager; it is not Tollgate's.
        .filter((o) => !(o.kind === 'ConfigMap' && o.metadata.name === 'kube-root-ca.crt'));
    const ledgerWritten = async () => (await inNamespace()).filter((o) => o.metadata.labels?.['tollgate.dev/budget-ledger'] === 'true');
    await eventually('the operator to have written the budget ledger', async () => ((await ledgerWritten()).length > 0 ? true : undefined), 60_000);
    const before = await inNamespace();
    const runtime = before.filter(
      (o) =>
        // Helm's own release record, and what the chart rendered, are Helm's to delete.
        o.metadata.labels?.owner !== 'helm' &&
        !o.metadata.labels?.['app.kubernetes.io/managed-by']?.startsWith('Helm') &&
        !o.metadata.labels?.['endpointslice.kubernetes.io/managed-by']?.startsWith('endpointslice-controller'),
    );
    const named = (o: OwnedObject) => `${o.kind}/${o.metadata.name.replace(/^tollgate-budget-[0-9a-f]+$/, 'tollgate-budget-…')}`;
    expect(runtime.map(named).sort()).toEqual(
      ['ConfigMap/tollgate-budget-…', 'EndpointSlice/tollgate-operator', 'Lease/tollgate-operator', 'Secret/tollgate-operator-tls', 'Secret/tollgate-webhook-tls'].sort(),
    );
    for (const o of runtime)
      expect(
        o.metadata.ownerReferences?.map((r) => `${r.kind}/${r.name}`),
        named(o),
      ).toEqual([o.kind === 'Secret' && o.metadata.name === 'tollgate-webhook-tls' ? 'Deployment/tollgate-webhook' : 'Deployment/tollgate-operator']);

    const uninstalled = await node.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait', '--timeout', '3m']);
    expect(uninstalled.code, uninstalled.stderr).toBe(0);
    const webhooks = await kubectl(['get', 'mutatingwebhookconfigurations,validatingwebhookconfigurations', '-o', 'name']);
    expect(webhooks.trim()).toBe('');
    // The garbage collector works after helm returns: poll the API until the namespace holds nothing of ours.
    const left = await eventually(
      'the garbage collector to delete what the operator and the webhook created',
      async () => {
        const now = await inNamespace();
        return now.length === 0 ? now : undefined;
      },
      120_000,
    ).catch(async () => (await inNamespace()).map(named));
    expect(left).toEqual([]);
    expect(
      (await kubectl(['get', 'deployments,services,serviceaccounts,roles,rolebindings', '-n', NAMESPACE, '-o', 'name', '-l', 'app.kubernetes.io/part-of=tollgate'])).trim(),
    ).toBe('');
    expect((await kubectl(['get', 'clusterroles,clusterrolebindings', '-o', 'name', '-l', 'app.kubernetes.io/part-of=tollgate'])).trim()).toBe('');
    // Kept on purpose: Helm never deletes CRDs (deleting one deletes every resource of its kind), and the
    // resources are the user's.
    expect(
      (await kubectl(['get', 'crd', '-o', 'name']))
        .split('\n')
        .filter((l) => l.endsWith('.tollgate.dev'))
        .sort(),
    ).toEqual(['customresourcedefinition.apiextensions.k8s.io/budgetpolicies.tollgate.dev', 'customresourcedefinition.apiextensions.k8s.io/proxyconfigs.tollgate.dev']);
    expect((await kubectl(['get', 'proxyconfigs,budgetpolicies', '-n', APP_NAMESPACE, '-o', 'name'])).trim().split('\n').sort()).toEqual([
      'budgetpolicy.tollgate.dev/roomy',
      'proxyconfig.tollgate.dev/default',
    ]);
    // A pod of the labelled namespace is now created as it is, without a sidecar and without delay.
    const dryRun = JSON.parse(await kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], probePod(images.testTools.ref))) as {
      spec: { initContainers?: unknown[] };
    };
    expect(dryRun.spec.initContainers).toBeUndefined();
  });

  it('kind delete cluster leaves no node container behind', async () => {
    await node.delete();
    const left = await run('docker', ['ps', '-a', '-q', '--filter', `label=io.x-k8s.kind.cluster=${TEST_CLUSTER}`]);
    expect(left.stdout.trim()).toBe('');
  });
});

interface OwnedObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; ownerReferences?: Array<{ kind: string; name: string; uid: string }> };
}

interface PodJson {
  spec: {
    containers: Array<{ name: string; env?: Array<{ name: string; value?: string }> }>;
    initContainers?: Array<{ name: string; image: string; imagePullPolicy: string; restartPolicy?: string }>;
  };
  status: {
    initContainerStatuses?: Array<ContainerStatus>;
    containerStatuses?: Array<ContainerStatus>;
  };
}
interface ContainerStatus {
  name: string;
  ready: boolean;
  started?: boolean;
  restartCount: number;
  containerID?: string;
  lastState?: { terminated?: { reason?: string } };
}
