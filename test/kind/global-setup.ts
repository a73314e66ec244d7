// vitest globalSetup of the `node` project: decides whether this machine can run kind and, if so, prepares
// what the clusters need (a Docker daemon, the binaries, the node image and Tollgate's images built by
// `docker build`; seconds when cached). A machine that cannot run it skips the kind tests with the reason;
// under CI=true that reason is an error instead, so a regression cannot pass unnoticed because no cluster
// ever ran. The teardown stops the Docker daemon if this setup started it and puts the machine's settings back.

import type { TestProject } from 'vitest/node';
import { dockerEngineDown, dockerEngineStatus } from './docker-engine.ts';
import { kindBinaries, prepareKindAssets, type KindAssets } from './kind-assets.ts';
import { acquireHostLock } from './host-lock.ts';
import { CLI_CLUSTER, MACHINE_LOCK } from './kind-cluster.ts';
import { kindUnavailableReason } from './kind-prerequisites.ts';
import { run } from './host-command.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the kind tests are skipped on this machine; '' when they run. */
    kindSkipReason: string;
    kindAssets: KindAssets | null;
  }
}

async function skipReason(): Promise<string | undefined> {
  const unavailable = kindUnavailableReason();
  if (unavailable) return unavailable;
  if (process.env.TOLLGATE_NODE_TEST === '0') return 'TOLLGATE_NODE_TEST=0';
  const cli = await run('docker', ['ps', '-q', '--filter', `label=io.x-k8s.kind.cluster=${CLI_CLUSTER}`], { okCodes: [0, 1] }).catch(() => undefined);
  if (cli?.stdout.trim()) return `the cluster \`./tollgatew cluster up\` made is running; \`./tollgatew cluster down\` frees the machine for the test`;
  return undefined;
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const reason = await skipReason();
  if (reason !== undefined) {
    if (process.env.CI === 'true') throw new Error(`the kind tests must run under CI=true, but cannot: ${reason}`);
    const message = `\n[kind] the kind tests are SKIPPED: ${reason}\n`;
    process.stderr.write(message);
    project.provide('kindSkipReason', reason);
    project.provide('kindAssets', null);
    return async () => {
      process.stderr.write(message);
    };
  }
  const started = Date.now();
  const binaries = await kindBinaries();
  // The Docker daemon and its networks change the machine's links and settings: not while another run's
  // cluster (or an older checkout's hand-built node) is being compared before and after.
  const lock = await acquireHostLock(MACHINE_LOCK, 'kind');
  let assets: KindAssets;
  try {
    // The previous release's chart and images too: the one-node suite upgrades from it (ADR 0113).
    assets = await prepareKindAssets((line) => process.stderr.write(`[kind] ${line}\n`), binaries, { previousRelease: true });
  } finally {
    lock.release();
  }
  process.stderr.write(`[kind] binaries, node image and Tollgate's images ready in ${Math.round((Date.now() - started) / 1000)} s (${await dockerEngineStatus()})\n`);
  project.provide('kindSkipReason', '');
  project.provide('kindAssets', assets);
  return async () => {
    const teardown = await acquireHostLock(MACHINE_LOCK, 'kind');
    try {
      await dockerEngineDown();
    } finally {
      teardown.release();
    }
  };
}
