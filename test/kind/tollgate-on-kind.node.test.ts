// Tollgate on a kind cluster (issue 26, ADR 0112): the chart installed with the images `docker build` made from
// the repository's Dockerfile (install to Ready timed, and a pod created the moment `helm install --wait`
// returns has its sidecar), the webhook injecting the sidecar into a real running pod, calls from the app
// container through the sidecar to a fake upstream pod, a live price change, the sidecar's memory under load
// against the chart's limit, a model alias whose first upstream's Deployment is deleted under a steady stream
// of calls (issue 36), an operator outage, `helm test`, `helm uninstall` (the budget ledger stays), and
// then day two (issue 27, ADR 0113) on the same cluster: a reinstall over the kept ledger, the previous release,
// the app's pods given its sidecars, `helm upgrade` to this release and `helm rollback` to the previous one
// while those pods keep a steady stream of metered calls going; the cluster deleted at the end.
//
// The steps build on each other, like a platform team's first afternoon and second day with Tollgate. The
// cluster takes about a minute to come up; see docs/real-node.md for how it is built and how to keep one up to
// look around.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chartSidecarLimitMb } from '../../bench/side-by-side.ts';
import { eventually } from '../cluster/operator-fixtures.ts';
import { acquireHostLock, type HostLock } from './host-lock.ts';
import { previousTree } from './previous-release.ts';
import { run } from './host-command.ts';
import { createKindCluster, MACHINE_LOCK, TEST_CLUSTER, type KindCluster } from './kind-cluster.ts';
import type { KindAssets } from './kind-assets.ts';
import type { ModelAliasStatus } from '../../crds/index.ts';
import {
  ALIAS,
  ALIAS_TARGETS,
  aliasUpstreamManifests,
  APP_NAMESPACE,
  appClient,
  appDeployment,
  appNamespaceManifests,
  containerMemory,
  containerMemoryCgroup,
  FAKE_USAGE,
  FAKES_NAMESPACE,
  fakeRequests,
  fakeUpstreamManifests,
  inspectContainer,
  mib,
  MODEL,
  OPENAI_KEY,
  probePod,
  proxyConfigManifest,
  resetMemoryPeak,
  startInApp,
  waitForInjection,
} from './tollgate-fixtures.ts';
import { CHART, helmInstall, NAMESPACE, RELEASE } from './tollgate-install.ts';
import {
  appClientIn,
  cappedPolicyManifest,
  costOfNextCallIn,
  ledgerSpentUsd,
  operatorLeader,
  runningAppPods,
  spansOf,
  spendIn,
  startSteadyCalls,
  type SteadyResult,
} from './upgrade-fixtures.ts';

/** A user whose budget blocks (BudgetPolicy `capped`): refused before, during and after upgrade and rollback. */
const CAPPED_USER = 'capped-user';

const skipReason = inject('kindSkipReason');
const assets = inject('kindAssets');

interface Span {
  span_id: string;
  parent_span_id: string | null;
  alias: string | null;
  attempt: number | null;
  error: string | null;
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
/** One call of `client.ts calls`: when it started (epoch ms), how long it took, and the text of its answer. */
interface AliasCall {
  n: number;
  at: number;
  ms: number;
  outcome: string;
  spanId: string | null;
  text: string;
  body?: string;
}

describe.skipIf(skipReason !== '')('Tollgate on a one-node kind cluster', () => {
  let node: KindCluster;
  let lock: HostLock | undefined;
  // null when the machine cannot run kind: the suite is then skipped and these are never read.
  const images = (assets as KindAssets).images;
  const previous = (assets as KindAssets).previous!;

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

  const runtimeKinds = 'secrets,leases.coordination.k8s.io,endpointslices.discovery.k8s.io,configmaps';
  /** What the operator and the webhook created at run time in the release namespace: not Helm's, not Kubernetes'. */
  const runtimeObjects = async () =>
    (await getJson<{ items: OwnedObject[] }>(['get', runtimeKinds, '-n', NAMESPACE])).items.filter(
      (o) =>
        !(o.kind === 'ConfigMap' && o.metadata.name === 'kube-root-ca.crt') &&
        o.metadata.labels?.owner !== 'helm' &&
        !o.metadata.labels?.['app.kubernetes.io/managed-by']?.startsWith('Helm') &&
        !o.metadata.labels?.['endpointslice.kubernetes.io/managed-by']?.startsWith('endpointslice-controller'),
    );
  // The ledger is a manifest, base parts and patches whose number grows with the calls (ADR 1307): one name here.
  const named = (o: OwnedObject) => (o.metadata.labels?.['tollgate.dev/budget-ledger'] === 'true' ? 'ConfigMap/tollgate-budget-…' : `${o.kind}/${o.metadata.name}`);
  const namedOnce = (objects: OwnedObject[]) => [...new Set(objects.map(named))].sort();
  /** The period's spend of all users under the BudgetPolicy `roomy`, as the operator writes it from the ledger. */
  const roomySpentUsd = async () => (await kubectl(['get', 'budgetpolicy', '-n', APP_NAMESPACE, 'roomy', '-o', 'jsonpath={.status.spentUsd}'])).trim();
  let spentBeforeUninstall = '';

  beforeAll(async () => {
    lock = await acquireHostLock(MACHINE_LOCK, 'kind');
    node = await createKindCluster({
      name: TEST_CLUSTER,
      workers: 0,
      assets: assets!,
      extraImages: [previous.images.tollgate, previous.images.sidecar],
      log: (line) => process.stderr.write(`[kind] ${line}\n`),
    });
  }, 30 * 60_000);

  afterAll(async () => {
    try {
      await node?.delete();
    } finally {
      lock?.release();
    }
  }, 300_000);

  it('installs the chart with the images docker build made; a pod created as helm install --wait returns has its sidecar', async () => {
    // The labelled namespace exists first, as on a cluster that already runs workloads.
    await apply(stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: APP_NAMESPACE, labels: { 'tollgate.dev/injection': 'enabled' } } }));
    const installStarted = Date.now();
    const installed = await helmInstall(node, ['--wait', '--timeout', '5m']);
    const readyAfter = (Date.now() - installStarted) / 1000;
    expect(installed.code, `${installed.stderr}\n${await node.describe()}`).toBe(0);
    expect(installed.stderr).toBe('');
    expect(installed.stdout).toContain('STATUS: deployed');
    // No waiting here: --wait covered the webhook's readiness, its CA (ADR 0809) and the Service's endpoints
    // (the post-install hook's pod had to be injected, ADR 0812). Created for real, not a dry run.
    const first = JSON.parse(await kubectl(['create', '-o', 'json', '-f', '-'], probePod(images.testTools.ref))) as PodJson;
    expect(first.spec.initContainers?.map((c) => c.name)).toContain('tollgate-proxy');
    await kubectl(['delete', 'pod', '-n', APP_NAMESPACE, 'injection-probe', '--wait=false']);
    console.info(`[node] install to Ready: ${readyAfter.toFixed(1)} s (helm install --wait, the injection hook included); the next pod got its sidecar`);
    const pods = await getJson<{ items: Array<{ spec: { containers: Array<{ image: string; imagePullPolicy: string }> } }> }>([
      'get',
      'pods',
      '-n',
      NAMESPACE,
      '-l',
      'app.kubernetes.io/part-of=tollgate',
    ]);
    expect(pods.items).toHaveLength(4);
    // The chart's defaults: the images are on every node (kind load), so IfNotPresent pulls nothing.
    for (const pod of pods.items) expect(pod.spec.containers[0]).toMatchObject({ image: images.tollgate.ref, imagePullPolicy: 'IfNotPresent' });
    // The hook Job succeeded and was deleted (helm.sh/hook-delete-policy hook-succeeded).
    expect((await kubectl(['get', 'jobs', '-n', NAMESPACE, '-o', 'name'])).trim()).toBe('');
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

  it('a model alias across two upstream pods: the first deleted while the app calls every 100 ms, and no call fails', async () => {
    const { primary, backup } = ALIAS_TARGETS;
    const answeredBy = (call: AliasCall) => (call.text === primary.text ? 'primary' : call.text === backup.text ? 'backup' : `neither: ${JSON.stringify(call.text)}`);
    await apply(aliasUpstreamManifests(images.testTools.ref));
    for (const { fake } of [primary, backup]) {
      const rollout = await node.kubectl(['rollout', 'status', '-n', FAKES_NAMESPACE, `deployment/${fake}`, '--timeout=120s']);
      expect(rollout.code, rollout.stderr).toBe(0);
    }
    await apply(proxyConfigManifest(7.5, { withAlias: true }));
    // Aliases are served by the sidecar's /v1 gateway (the injected OPENAI_BASE_URL is route beta's own). Until
    // the snapshot with the alias lands, its name is no model the gateway knows.
    await eventually(
      'a call of the alias answered by its first target',
      async () => {
        const call = await appClient<CallResult>(node, ['call', ALIAS, 'alias-warm-up', '--v1']);
        return call.status === 200 && call.body.includes(primary.text) ? call : undefined;
      },
      90_000,
    );
    const pod = (await kubectl(['get', 'pods', '-n', APP_NAMESPACE, '-l', 'app=chat', '-o', 'jsonpath={.items[0].metadata.name}'])).trim();
    const atStart = (await fakeRequests(node, primary.fake)).length;

    const caller = startInApp<{ total: number; calls: AliasCall[]; elapsedMs: number }>(node, pod, ['calls', '100', ALIAS, 'alias-fallback', '--v1']);
    let killedAt = 0;
    let traces: Span[] = [];
    let status: ModelAliasStatus;
    let run: { total: number; calls: AliasCall[]; elapsedMs: number };
    try {
      const seen = await eventually(
        'the first target to answer 20 calls of the run',
        async () => {
          const received = await fakeRequests(node, primary.fake);
          return received.length >= atStart + 20 ? received : undefined;
        },
        60_000,
      );
      // The sidecar attached the route's key from the Secret.
      expect(seen.at(-1)).toMatchObject({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${primary.key}` }, json: { model: primary.model } });

      killedAt = Date.now();
      await kubectl(['delete', 'deployment', '-n', FAKES_NAMESPACE, primary.fake, '--wait=false']);
      await kubectl(['wait', '-n', FAKES_NAMESPACE, '--for=delete', 'pod', '-l', `app=${primary.fake}`, '--timeout=120s']);
      const atGone = (await fakeRequests(node, backup.fake)).length;
      await eventually(
        'the second target to answer 30 calls after the first one is gone',
        async () => ((await fakeRequests(node, backup.fake)).length >= atGone + 30 ? true : undefined),
        60_000,
      );
      // While the calls go on, so that the first target's breaker is open: after its openMs it lets one probe through.
      traces = (await appClient<{ body: { spans: Span[] } }>(node, ['traces', '200'])).body.spans;
      status = await eventually(
        "status.models to show the first target's breaker open",
        async () => {
          const pc = await getJson<{ status?: { models?: ModelAliasStatus[] } }>(['get', 'proxyconfig', '-n', APP_NAMESPACE, 'default']);
          const alias = pc.status?.models?.find((m) => m.alias === ALIAS);
          return alias?.targets[0]?.state === 'circuit_open' ? alias : undefined;
        },
        90_000,
      );
    } finally {
      run = await caller.stop();
    }

    const { calls } = run;
    expect(calls.filter((c) => c.outcome !== '200')).toEqual([]);
    const before = calls.filter((c) => c.at < killedAt);
    expect(before.length).toBeGreaterThanOrEqual(20);
    expect(new Set(before.map(answeredBy))).toEqual(new Set(['primary']));
    // One switch, and for good: every call up to it answered by the first target, every call from it on by the second.
    const switched = calls.findIndex((c) => answeredBy(c) === 'backup');
    expect(switched).toBeGreaterThanOrEqual(before.length);
    expect(new Set(calls.slice(0, switched).map(answeredBy))).toEqual(new Set(['primary']));
    expect(new Set(calls.slice(switched).map(answeredBy))).toEqual(new Set(['backup']));
    expect(calls.length - switched).toBeGreaterThanOrEqual(30);
    // That call tried the first target, which failed, and was answered by the second: attempt spans under its span.
    const first = calls[switched]!;
    const span = traces.find((t) => t.span_id === first.spanId);
    expect(span).toMatchObject({ alias: ALIAS, route: backup.route, model: backup.model, user_id: 'alias-fallback', status: 'ok', attempt: null, cost_usd: backup.price });
    const attempts = traces.filter((t) => t.parent_span_id === first.spanId && t.attempt !== null).sort((a, b) => a.attempt! - b.attempt!);
    expect(attempts).toMatchObject([
      { attempt: 1, route: primary.route, model: primary.model, status: 'error', cost_usd: 0 },
      { attempt: 2, route: backup.route, model: backup.model, status: 'ok', cost_usd: 0 },
    ]);
    // Refused while the pod's address lived on, or a connection that never came up once it was gone (the Service
    // still sent new connections there until kube-proxy caught up): either way, the alias went on.
    expect(attempts[0]!.error).toMatch(/^upstream_(unreachable|timeout): /);
    // The second target got the Anthropic API's request, with its own key.
    expect((await fakeRequests(node, backup.fake)).at(-1)).toMatchObject({ path: '/v1/messages', headers: { 'x-api-key': backup.key }, json: { model: backup.model } });
    // Each call metered once, at the price of the target that answered it: $1 and $3 a call (FAKE_USAGE).
    const spend = await appClient<{ rows: Array<{ key: string; calls: number; cost_usd: number }> }>(node, ['spend', 'model', new Date(calls[0]!.at).toISOString()]);
    const byPrimary = switched;
    const byBackup = calls.length - switched;
    expect(spend.rows.filter((r) => r.key === primary.model || r.key === backup.model).sort((a, b) => a.key.localeCompare(b.key))).toMatchObject([
      { key: backup.model, calls: byBackup, cost_usd: byBackup * 3 },
      { key: primary.model, calls: byPrimary, cost_usd: byPrimary * 1 },
    ]);
    expect(status!).toMatchObject({ alias: ALIAS, sidecars: 1, servedBelowFirstPriority: 1 });
    expect(status!.targets).toEqual([
      { route: primary.route, model: primary.model, priority: 0, state: 'circuit_open', healthy: 0, coolingDown: 0, circuitOpen: 1 },
      { route: backup.route, model: backup.model, priority: 1, state: 'healthy', healthy: 1, coolingDown: 0, circuitOpen: 0 },
    ]);
    const switchedAfter = first.at + first.ms - killedAt;
    const slowest = calls.slice(switched).reduce((a, b) => (b.ms > a.ms ? b : a));
    const slowestFirstAttempt = traces.find((t) => t.parent_span_id === slowest.spanId && t.attempt === 1);
    console.info(
      `[node] model alias ${ALIAS}, ${primary.route} then ${backup.route}: ${calls.length} calls every 100 ms in ${(run.elapsedMs / 1000).toFixed(1)} s, ` +
        `${calls.length - calls.filter((c) => c.outcome === '200').length} failed; ${primary.fake}'s Deployment deleted after ${before.length} calls, ` +
        `switched after ${switchedAfter} ms (${attempts[0]!.error}); ${byPrimary} calls answered by ${primary.route}, ${byBackup} by ${backup.route}; ` +
        `slowest call after the switch ${slowest.ms} ms${slowestFirstAttempt ? ` (${slowestFirstAttempt.error ?? slowestFirstAttempt.status})` : ''}`,
    );

    // The suite's config again, without the alias; the second fake goes too.
    await apply(proxyConfigManifest(7.5));
    await kubectl(['delete', 'deployment', '-n', FAKES_NAMESPACE, backup.fake]);
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

  it('helm test makes one metered call through an injected pod, and fails naming injection when the webhook is gone', async () => {
    // With no webhook replica, the self-test pod's creation is refused (its webhook entry fails closed, ADR 0812).
    await kubectl(['scale', '-n', NAMESPACE, 'deployment/tollgate-webhook', '--replicas=0']);
    await kubectl(['wait', '-n', NAMESPACE, '--for=delete', 'pod', '-l', 'app.kubernetes.io/component=webhook', '--timeout=120s']);
    const refused = await node.helm(['test', RELEASE, '-n', NAMESPACE, '--timeout', '2m']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('selftest.inject.tollgate.dev');
    console.info(`[node] helm test without a webhook: ${refused.stderr.trim().split('\n').at(-1)}`);
    await kubectl(['scale', '-n', NAMESPACE, 'deployment/tollgate-webhook', '--replicas=2']);
    const rollout = await node.kubectl(['rollout', 'status', '-n', NAMESPACE, 'deployment/tollgate-webhook', '--timeout=180s']);
    expect(rollout.code, rollout.stderr).toBe(0);
    // Ready again, and the Service's endpoints follow within a moment; the test pod is refused until they do.
    const passed = await eventually(
      'helm test to pass',
      async () => {
        const r = await node.helm(['test', RELEASE, '-n', NAMESPACE, '--logs', '--timeout', '3m']);
        if (r.code === 0) return r;
        if (!r.stderr.includes('no endpoints available')) throw new Error(`helm test failed: ${r.stderr}\n${r.stdout}`);
        return undefined;
      },
      60_000,
    );
    for (const stage of ['injection: ok', 'config: ok', 'credentials: ok', 'metering: ok']) expect(passed.stdout).toContain(stage);
    console.info(`[node] helm test: ${passed.stdout.split('\n').find((l) => l.startsWith('metering:'))}`);
    // Its Secret and ProxyConfig are deleted when it passes; its Pod stays, Succeeded, until the next helm test
    // (so that --logs can read it), and goes with the command the docs give.
    const left = await kubectl([
      'get',
      'pods,secrets,proxyconfigs',
      '-n',
      NAMESPACE,
      '-l',
      'app.kubernetes.io/component=selftest',
      '-o',
      'jsonpath={range .items[*]}{.kind}/{.metadata.name}={.status.phase} {end}',
    ]);
    expect(left.trim()).toBe('Pod/tollgate-selftest=Succeeded');
    await kubectl(['delete', 'pod', '-n', NAMESPACE, '-l', 'app.kubernetes.io/component=selftest']);
  });

  it("helm uninstall leaves nothing of Tollgate behind but the CRDs, the user's own resources and the budget ledger", async () => {
    // What the operator and the webhook created at run time, which the chart does not list (ADR 0807). Each
    // names its component's Deployment as owner, so the garbage collector deletes it after the Deployment;
    // all but the budget ledger, which names no owner and outlives the release (ADR 0811).
    const before = await runtimeObjects();
    expect(before.filter((o) => o.metadata.labels?.['tollgate.dev/budget-ledger'] === 'true')).not.toHaveLength(0);
    expect(namedOnce(before)).toEqual(
      [
        'ConfigMap/tollgate-budget-…',
        'ConfigMap/tollgate-operator-ca',
        'EndpointSlice/tollgate-operator',
        'Lease/tollgate-operator',
        'Secret/tollgate-operator-tls',
        'Secret/tollgate-webhook-tls',
      ].sort(),
    );
    const ownerOf = (o: OwnedObject) =>
      o.metadata.labels?.['tollgate.dev/budget-ledger'] === 'true'
        ? []
        : [o.metadata.name === 'tollgate-webhook-tls' ? 'Deployment/tollgate-webhook' : 'Deployment/tollgate-operator'];
    for (const o of before) expect(o.metadata.ownerReferences?.map((r) => `${r.kind}/${r.name}`) ?? [], named(o)).toEqual(ownerOf(o));
    // The spend the ledger holds once every sidecar's reports are in: what the sidecar's span store holds.
    const [pod] = (await runningAppPods(node)).map((p) => p.name);
    await eventually(
      'the ledger to hold every span of the app pod',
      async () => {
        const rows = await spendIn(node, pod!);
        const spent = Number(await roomySpentUsd());
        return Math.abs(rows.reduce((n, r) => n + r.cost_usd, 0) - spent) < 1e-6 ? true : undefined;
      },
      60_000,
    );
    spentBeforeUninstall = await roomySpentUsd();

    const uninstalled = await node.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait', '--timeout', '3m']);
    expect(uninstalled.code, uninstalled.stderr).toBe(0);
    const webhooks = await kubectl(['get', 'mutatingwebhookconfigurations,validatingwebhookconfigurations', '-o', 'name']);
    expect(webhooks.trim()).toBe('');
    // The garbage collector works after helm returns: poll the API until the namespace holds nothing of ours but the ledger.
    const left = await eventually(
      'the garbage collector to delete what the operator and the webhook created',
      async () => {
        const now = namedOnce(await runtimeObjects());
        return now.length === 1 ? now : undefined;
      },
      120_000,
    ).catch(async () => namedOnce(await runtimeObjects()));
    expect(left).toEqual(['ConfigMap/tollgate-budget-…']);
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

  it('a reinstall carries on from the spend the uninstall kept; uninstalled again, one command deletes the ledger', async () => {
    const installed = await helmInstall(node, ['--wait', '--timeout', '5m']);
    expect(installed.code, `${installed.stderr}\n${await node.describe()}`).toBe(0);
    // Its operator loads the ledger the uninstall kept: the period's spend carries on where it was (ADR 0811).
    await eventually('the reinstalled operator to report the spend the ledger kept', async () => ((await roomySpentUsd()) === spentBeforeUninstall ? true : undefined), 120_000);
    const uninstalled = await node.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait', '--timeout', '3m']);
    expect(uninstalled.code, uninstalled.stderr).toBe(0);
    // The command docs/budgets.md gives. The previous release then starts from an empty ledger: it does not read
    // this release's patch layout (ADR 1307), which is also why a rollback across it loses the spend in between.
    await kubectl(['delete', 'configmaps', '-n', NAMESPACE, '-l', 'tollgate.dev/budget-ledger=true']);
    // And the garbage collector has deleted what this release created at run time, so none of it meets the next.
    await eventually('nothing of the release left in its namespace', async () => ((await runtimeObjects()).length === 0 ? true : undefined), 120_000);
  });

  // Day two (ADR 0113): the previous release, its sidecars in the app's pods, then upgrade and rollback.
  let appPods: string[] = [];

  it('the previous release installs; the app gets its sidecars', async () => {
    const started = Date.now();
    const installed = await node.helm([
      'install',
      RELEASE,
      previous.chart,
      '-n',
      NAMESPACE,
      '--set',
      `image.tag=${previous.tag}`,
      '--set',
      `sidecar.image.tag=${previous.tag}`,
      '--wait',
      '--timeout',
      '5m',
    ]);
    expect(installed.code, `${installed.stderr}\n${await node.describe()}`).toBe(0);
    console.info(`[node] previous release ${previous.commit.slice(0, 12)} installed and Ready in ${Math.round((Date.now() - started) / 1000)} s`);
    // That release has no injection hook: wait for the webhook Service as its users would have to.
    await waitForInjection(node, images.testTools.ref);
    await kubectl(['scale', '-n', APP_NAMESPACE, 'deployment/chat', '--replicas=2']);
    await kubectl(['rollout', 'restart', '-n', APP_NAMESPACE, 'deployment/chat']);
    const rollout = await node.kubectl(['rollout', 'status', '-n', APP_NAMESPACE, 'deployment/chat', '--timeout=180s']);
    expect(rollout.code, rollout.stderr).toBe(0);
    const pods = await eventually('two app pods', async () => {
      const running = await runningAppPods(node);
      return running.length === 2 ? running : undefined;
    });
    for (const pod of pods) expect(pod.sidecarImage).toBe(previous.images.sidecar);
    appPods = pods.map((p) => p.name);
    for (const pod of appPods) await eventually(`${pod} to run the ProxyConfig's price`, async () => ((await costOfNextCallIn(node, pod)) === 11 ? true : undefined), 90_000);
  });

  it('a blocking budget refuses its user on every old sidecar', async () => {
    await apply(cappedPolicyManifest(CAPPED_USER, '20'));
    for (const pod of appPods) {
      const refused = await eventually(
        `${CAPPED_USER} to be refused in ${pod}`,
        async () => {
          const call = await appClientIn<{ status: number; body: string }>(node, pod, ['call', MODEL, CAPPED_USER]);
          return call.status === 429 ? call : undefined;
        },
        90_000,
      );
      expect(refused.body).toContain('budget_exceeded');
    }
  });

  /** A steady stream from every app pod around `step`; then: none failed, every call a span, every span in the ledger. */
  async function underSteadyCalls(user: string, readBy: 'this release' | 'both releases', step: () => Promise<void>): Promise<{ calls: number; failed: number; lostUsd: number }> {
    const steady = startSteadyCalls(node, appPods, user, 200);
    let results: SteadyResult[];
    try {
      await step();
    } finally {
      results = await steady.stop();
    }
    const calls = results.reduce((n, r) => n + r.total, 0);
    const ok = results.reduce((n, r) => n + (r.statuses['200'] ?? 0), 0);
    expect(results.flatMap((r) => r.failures.map((f) => ({ pod: r.pod, ...f })))).toEqual([]);
    expect(ok).toBe(calls);
    const spans = await spansOf(node, appPods, user);
    expect(spans.calls).toBe(ok);
    // Spend reaches the ledger through the operator: wait for the last reports, then compare to the spans. Across
    // a rollback, the reports this release's operator applied before it stepped down are in its patch layout,
    // which the previous release does not read (ADR 1307, a documented limitation): nothing is lost from the
    // ledger's objects, but the previous release enforces only its own part.
    const inLedger = async () => {
      const ours = await ledgerSpentUsd(node, `${APP_NAMESPACE}/roomy`, user, 'this release');
      const previous = readBy === 'both releases' ? await ledgerSpentUsd(node, `${APP_NAMESPACE}/roomy`, user, 'the previous release') : 0;
      return { ours, previous, total: ours + previous };
    };
    const spent = await eventually(
      `the ledger to hold ${user}'s spend`,
      async () => {
        const held = await inLedger();
        return Math.abs(held.total - spans.costUsd) < 1e-6 ? held : undefined;
      },
      90_000,
    ).catch(inLedger);
    if (readBy === 'both releases') {
      console.info(`[node] ${user}'s spend: $${spent.ours.toFixed(4)} in this release's ledger layout, $${spent.previous.toFixed(4)} in the previous release's`);
    }
    return { calls, failed: calls - ok, lostUsd: spans.costUsd - spent.total };
  }

  /**
   * After a change of release: the expected operator leads, and both old sidecars take a price (from a
   * ProxyConfig that may also use a field they do not know) and keep refusing CAPPED_USER.
   */
  async function releaseServes(operatorImage: string, price: number, opts: { withRoute?: boolean } = {}): Promise<void> {
    const leader = await eventually('the expected release to lead', async () => {
      const now = await operatorLeader(node);
      return now.image === operatorImage ? now : undefined;
    });
    expect(leader.holder).not.toBe('');
    await apply(proxyConfigManifest(price, opts));
    for (const pod of appPods) {
      await eventually(`${pod}'s old sidecar to take the new price`, async () => ((await costOfNextCallIn(node, pod)) === price ? true : undefined), 90_000);
      expect((await appClientIn<{ status: number }>(node, pod, ['call', MODEL, CAPPED_USER])).status).toBe(429);
    }
    expect((await runningAppPods(node)).map((p) => [p.name, p.sidecarImage])).toEqual(appPods.map((p) => [p, previous.images.sidecar]));
  }

  it('helm upgrade to this release under a steady stream of calls: none fails, no span or spend is lost, the budget holds, old sidecars follow the new operator', async () => {
    let seconds = 0;
    const figures = await underSteadyCalls('steady-upgrade', 'this release', async () => {
      const started = Date.now();
      // As docs/kubernetes.md says: Helm never upgrades CRDs, so the new ones go first (here they are already the
      // new ones, the suite's first install put them there; applying them is what an upgrade does).
      await kubectl(['apply', '--server-side', '--force-conflicts', '-f', join(CHART, 'crds')]);
      // --reset-values: the previous install's only values were its image tags (standing in for that chart's
      // appVersion); without a value flag Helm would reuse them and run the previous images under this chart.
      const upgraded = await node.helm(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reset-values', '--wait', '--timeout', '5m']);
      seconds = (Date.now() - started) / 1000;
      expect(upgraded.code, `${upgraded.stderr}\n${await node.describe()}`).toBe(0);
      // A price change in a ProxyConfig that also adds a configured route, which the old sidecars' validator
      // refuses: the new operator sends them the config without it and says so (ADR 0723).
      await releaseServes(images.tollgate.ref, 13, { withRoute: true });
      const withheld = await eventually('a ConfigWithheld Event', async () => {
        const events = await getJson<{ items: Array<{ reason: string; note: string; regarding: { name: string } }> }>(['get', 'events.events.k8s.io', '-n', APP_NAMESPACE]);
        return events.items.find((e) => e.reason === 'ConfigWithheld' && e.regarding.name === 'default');
      });
      expect(withheld.note).toContain('routes (fake-compat)');
    });
    console.info(
      `[node] helm upgrade ${previous.commit.slice(0, 12)} → this release: ${seconds.toFixed(1)} s; ${figures.calls} calls from ${appPods.length} old sidecars, ` +
        `${figures.failed} failed, lost spend $${figures.lostUsd.toFixed(10)}`,
    );
    expect(figures.lostUsd).toBeCloseTo(0, 6);
  });

  it('helm rollback to the previous release the same way', async () => {
    let seconds = 0;
    const figures = await underSteadyCalls('steady-rollback', 'both releases', async () => {
      const started = Date.now();
      const rolledBack = await node.helm(['rollback', RELEASE, '1', '-n', NAMESPACE, '--wait', '--timeout', '5m']);
      seconds = (Date.now() - started) / 1000;
      expect(rolledBack.code, `${rolledBack.stderr}\n${await node.describe()}`).toBe(0);
      await releaseServes(previous.images.tollgate, 17);
    });
    console.info(
      `[node] helm rollback → ${previous.commit.slice(0, 12)}: ${seconds.toFixed(1)} s; ${figures.calls} calls from ${appPods.length} old sidecars, ` +
        `${figures.failed} failed, lost spend $${figures.lostUsd.toFixed(10)}`,
    );
    // A rollback across the ledger's layout change (ADR 1307) cannot be exact: a report this release's operator
    // applied but had not acknowledged when it stepped down is sent again to the previous release, whose
    // watermarks are as of the upgrade, so it counts in both layouts (known-limitations says so). Between two
    // releases with the same layout the ledger holds exactly the spans' cost.
    const previousLedger = readFileSync(join(await previousTree(previous.commit), 'operator/src/budgets/ledger-store.ts'), 'utf8');
    if (previousLedger.includes('tollgate-budget-log-')) expect(figures.lostUsd).toBeCloseTo(0, 6);
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
