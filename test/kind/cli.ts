// `./tollgatew cluster …`: Tollgate in a kind cluster on this machine, with a metered call to show for it
// (ADR 0112; docs/real-node.md).
//
//   ./tollgatew cluster up [--nodes N]   kind cluster `tollgate` (N nodes, default 1), images from `docker build`
//                                        of the Dockerfile loaded with `kind load`, `helm install` of the chart,
//                                        a labelled namespace with a sample app calling a fake provider; prints
//                                        the calls' spans and the ProxyConfig and BudgetPolicy status
//   ./tollgatew cluster down             delete it; stop the Docker daemon `up` started and restore the machine
//   ./tollgatew cluster status           is it up, and what runs on it
//   ./tollgatew cluster kubectl ARGS…    kubectl against it (also: helm ARGS…)

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { dockerEngineDown, dockerEngineStatus } from './docker-engine.ts';
import { acquireHostLock } from './host-lock.ts';
import { kindBinaries, prepareKindAssets } from './kind-assets.ts';
import { CLI_CLUSTER, createKindCluster, existingCluster, kindClusters, MACHINE_LOCK, type KindCluster } from './kind-cluster.ts';
import { kindUnavailableReason } from './kind-prerequisites.ts';
import {
  APP_NAMESPACE,
  appClient,
  appDeployment,
  appNamespaceManifests,
  FAKES_NAMESPACE,
  fakeUpstreamManifests,
  MODEL,
  proxyConfigManifest,
  waitForInjection,
} from './tollgate-fixtures.ts';
import { helmInstall, NAMESPACE, RELEASE } from './tollgate-install.ts';

const say = (line: string) => process.stderr.write(`tollgatew cluster: ${line}\n`);
const usage = `usage: ./tollgatew cluster up [--nodes N] | down | status | kubectl ARGS... | helm ARGS...`;
const DEMO_PRICE = 2.5;

interface Span {
  route: string;
  model: string;
  user_id: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  status: string;
}

const tools = kindBinaries;

async function must(cluster: KindCluster, args: string[], input?: string): Promise<string> {
  const r = await cluster.kubectl(args, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** The sample workload: a fake OpenAI in its own namespace, an app in a labelled one, three metered calls. */
async function demo(cluster: KindCluster, testToolsImage: string): Promise<void> {
  say(`sample workload: a fake OpenAI upstream in ${FAKES_NAMESPACE}, namespace ${APP_NAMESPACE} labelled tollgate.dev/injection=enabled, an app Deployment`);
  await must(cluster, ['apply', '-f', '-'], fakeUpstreamManifests(testToolsImage));
  await must(cluster, ['apply', '-f', '-'], appNamespaceManifests());
  await must(cluster, ['apply', '-f', '-'], proxyConfigManifest(DEMO_PRICE));
  await waitForInjection(cluster, testToolsImage);
  await must(cluster, ['apply', '-f', '-'], appDeployment(testToolsImage));
  await must(cluster, ['rollout', 'status', '-n', FAKES_NAMESPACE, 'deployment/fake-openai', '--timeout=180s']);
  await must(cluster, ['rollout', 'status', '-n', APP_NAMESPACE, 'deployment/chat', '--timeout=180s']);
  let calls = 0;
  const deadline = Date.now() + 90_000;
  // The first config snapshot (key and price) reaches the sidecar shortly after it starts.
  while (calls < 3 && Date.now() < deadline) {
    const call = await appClient<{ status: number }>(cluster, ['call', MODEL]);
    if (call.status === 200) calls += 1;
  }
  if (calls < 3) throw new Error("the sample app's calls through the sidecar did not succeed within 90 s");
  const traces = await appClient<{ body: { spans: Span[] } }>(cluster, ['traces', '3']);
  console.log(`\nThree calls from the app container (kubectl exec -n ${APP_NAMESPACE} deploy/chat -c app), metered by its sidecar:\n`);
  console.log('ROUTE  MODEL         USER       INPUT TOKENS  OUTPUT TOKENS  COST (USD)  STATUS');
  for (const s of traces.body.spans) {
    console.log(
      `${s.route.padEnd(6)} ${s.model.padEnd(13)} ${(s.user_id ?? '-').padEnd(10)} ${String(s.input_tokens).padEnd(13)} ${String(s.output_tokens).padEnd(14)} ${String(s.cost_usd).padEnd(11)} ${s.status}`,
    );
  }
  console.log(`\nkubectl get proxyconfigs,budgetpolicies -n ${APP_NAMESPACE}\n${await must(cluster, ['get', 'proxyconfigs,budgetpolicies', '-n', APP_NAMESPACE])}`);
}

async function up(nodes: number): Promise<void> {
  const reason = kindUnavailableReason();
  if (reason) throw new Error(`this machine cannot run kind: ${reason}`);
  const binaries = await kindBinaries();
  const lock = await acquireHostLock(MACHINE_LOCK, 'kind');
  try {
    const assets = await prepareKindAssets(say, binaries);
    const cluster = await createKindCluster({ name: CLI_CLUSTER, workers: nodes - 1, assets, log: say });
    say(`helm install ${RELEASE} charts/tollgate -n ${NAMESPACE} --create-namespace --wait`);
    const installed = await helmInstall(cluster, ['--wait', '--timeout', '5m']);
    if (installed.code !== 0) {
      throw new Error(`helm install failed: ${installed.stderr}\n${await cluster.describe()}\nthe cluster stays up for a look; \`./tollgatew cluster down\` removes it`);
    }
    await demo(cluster, assets.images.testTools.ref);
    console.log(`The kind cluster ${CLI_CLUSTER} is up with Tollgate installed.

  export KUBECONFIG=${cluster.kubeconfigPath}
  alias kubectl=${join(assets.controlPlaneBin, 'kubectl')}
  kubectl get pods -A

or ./tollgatew cluster kubectl …, ./tollgatew cluster helm …
Images: ${assets.images.tollgate.ref} and ${assets.images.sidecar.ref} (docker build, kind load); node image ${assets.nodeImage.ref}.
Take it down with: ./tollgatew cluster down`);
  } finally {
    lock.release();
  }
}

async function down(): Promise<void> {
  const lock = await acquireHostLock(MACHINE_LOCK, 'kind');
  try {
    const t = await tools();
    const running = (await dockerEngineStatus()).startsWith('Docker') && (await kindClusters(t.kindBin)).includes(CLI_CLUSTER);
    if (running) await existingCluster(CLI_CLUSTER, t).delete();
    say(running ? `cluster ${CLI_CLUSTER} deleted` : `no cluster ${CLI_CLUSTER} was up`);
    await dockerEngineDown();
  } finally {
    lock.release();
  }
}

async function status(): Promise<void> {
  const docker = await dockerEngineStatus();
  say(docker);
  if (!docker.startsWith('Docker')) return;
  const t = await tools();
  if (!(await kindClusters(t.kindBin)).includes(CLI_CLUSTER)) {
    say(`no cluster ${CLI_CLUSTER} is up`);
    return;
  }
  const r = await existingCluster(CLI_CLUSTER, t).kubectl(['get', 'nodes,pods', '-A', '-o', 'wide']);
  process.stdout.write(r.stdout || r.stderr);
}

async function passThrough(tool: 'kubectl' | 'helm', args: string[]): Promise<never> {
  const t = await tools();
  const cluster = existingCluster(CLI_CLUSTER, t);
  const r = spawnSync(join(t.controlPlaneBin, tool), args, { stdio: 'inherit', env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath } });
  process.exit(r.status ?? 1);
}

const [command, ...rest] = process.argv.slice(2);
try {
  if (command === 'up') {
    const at = rest.indexOf('--nodes');
    const nodes = at >= 0 ? Number(rest[at + 1]) : 1;
    if (!Number.isInteger(nodes) || nodes < 1 || nodes > 5) throw new Error(`--nodes takes a number from 1 to 5 (got ${rest[at + 1]})`);
    await up(nodes);
  } else if (command === 'down') await down();
  else if (command === 'status') await status();
  else if (command === 'kubectl' || command === 'helm') await passThrough(command, rest);
  else {
    console.error(usage);
    process.exit(2);
  }
  process.exit(0);
} catch (err) {
  say(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
}
