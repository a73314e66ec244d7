// `./tollgatew cluster …`: a real single-node cluster with Tollgate installed, on this machine (root needed).
//
//   ./tollgatew cluster up                  build what is missing, bring the node up, helm install Tollgate
//   ./tollgatew cluster down [--remove-packages]   take it down; the machine is as it was (packages aside)
//   ./tollgatew cluster status              is a node up, and what is running on it
//   ./tollgatew cluster kubectl ARGS…       kubectl against the node (also: helm ARGS…)

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureControlPlaneBinaries } from '../control-plane/binaries.ts';
import { removeInstalledPackages } from './host-packages.ts';
import { acquireHostLock } from './host-lock.ts';
import { prepareNodeAssets } from './node-assets.ts';
import { logTails, NodeBusyError, runningCliNode, startNodeCluster, tools } from './node-cluster.ts';
import { LOCK_PATH, nodeNetwork, paths } from './node-layout.ts';
import { nodeUnavailableReason } from './node-prerequisites.ts';
import { nodeLeftovers, nodeProcesses, tearDownNode } from './node-teardown.ts';
import { helmInstall, NAMESPACE, RELEASE } from './tollgate-install.ts';

const say = (line: string) => process.stderr.write(`tollgatew cluster: ${line}\n`);
const usage = `usage: ./tollgatew cluster up | down [--remove-packages] | status | kubectl ARGS... | helm ARGS...`;

function requireMachine(): void {
  const reason = nodeUnavailableReason();
  if (reason) {
    say(`this machine cannot run a node: ${reason}`);
    process.exit(1);
  }
}

async function up(): Promise<void> {
  requireMachine();
  const assets = await prepareNodeAssets();
  const node = await startNodeCluster({ owner: 'cli', ...assets, log: say });
  say(`installing the chart (release ${RELEASE} in ${NAMESPACE}, local images, pull policy Never)`);
  const installed = await helmInstall(node, ['--wait', '--timeout', '5m']);
  if (installed.code !== 0) {
    say(`helm install failed: ${installed.stderr}\n${logTails(15)}\nthe node stays up for a look; \`./tollgatew cluster down\` removes it`);
    process.exit(1);
  }
  const kubectl = join(assets.controlPlaneBin, 'kubectl');
  console.log(`The node is up with Tollgate installed.

  export KUBECONFIG=${node.kubeconfigPath}
  alias kubectl=${kubectl}
  kubectl get pods -A
  kubectl label namespace default tollgate.dev/injection=enabled   # then create pods there

Images: ${assets.images.tollgate.ref} and ${assets.images.sidecar.ref} (imported, pull policy Never).
The API server is https://${node.network.nodeAddress}:6443; pods have no route off the machine.
Take it down with: ./tollgatew cluster down`);
}

async function down(removePackages: boolean): Promise<void> {
  const lock = await acquireHostLock(LOCK_PATH, 'node');
  try {
    const report = tearDownNode();
    say(
      report.found
        ? `node removed: ${report.processes} processes ended, ${report.mounts} mounts, ${report.cgroups} cgroups, ${report.links} links removed${report.host.length ? `; ${report.host.join(', ')}` : ''}`
        : 'no node was up',
    );
    if (removePackages) await removeInstalledPackages(say);
  } finally {
    lock.release();
  }
}

async function status(): Promise<void> {
  const cli = runningCliNode();
  if (!nodeLeftovers()) {
    say('no node is up');
    return;
  }
  const program = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!;
    } catch {
      return '';
    }
  };
  const apiServerUp = nodeProcesses().some((pid) => program(pid).endsWith('/kube-apiserver'));
  if (!apiServerUp) {
    say('the leftovers of a node are on this machine, but its API server is not running (was a run killed?); `./tollgatew cluster down` removes them');
    return;
  }
  say(cli ? `a node brought up by \`./tollgatew cluster up\` is running (since ${cli.startedAt})` : "a node is running (a test run's, most likely)");
  if (existsSync(paths.adminKubeconfig)) {
    const t = tools(nodeNetwork(), await ensureControlPlaneBinaries());
    const pods = await t.kubectl(['get', 'nodes,pods', '-A', '-o', 'wide']);
    process.stdout.write(pods.stdout || pods.stderr);
  }
}

async function passThrough(tool: 'kubectl' | 'helm', args: string[]): Promise<never> {
  const binDir = await ensureControlPlaneBinaries();
  const r = spawnSync(join(binDir, tool), args, { stdio: 'inherit', env: tools(nodeNetwork(), binDir).env });
  process.exit(r.status ?? 1);
}

const [command, ...rest] = process.argv.slice(2);
try {
  if (command === 'up') await up();
  else if (command === 'down') await down(rest.includes('--remove-packages'));
  else if (command === 'status') await status();
  else if (command === 'kubectl' || command === 'helm') await passThrough(command, rest);
  else {
    console.error(usage);
    process.exit(2);
  }
  process.exit(0);
} catch (err) {
  say(err instanceof NodeBusyError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
}
