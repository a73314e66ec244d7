// Where etcd, kube-apiserver, kubectl and helm come from: build.sh decides (KUBEBUILDER_ASSETS or the cache
// of pinned builds from the Go module proxy) and prints the folder as its last stdout line.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The environment variable through which global-setup.ts hands the binary folder to test files. */
export const BIN_DIR_ENV = 'TOLLGATE_CONTROL_PLANE_BIN';

export const REQUIRED_BINARIES = ['etcd', 'kube-apiserver', 'kubectl', 'helm'] as const;

const BUILD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'build.sh');

/** Runs build.sh (seconds when cached, many minutes cold) with its progress on our stderr. */
export async function ensureControlPlaneBinaries(): Promise<string> {
  const binDir = await runBuildScript('control-plane');
  assertBinDir(binDir);
  return binDir;
}

/** Runs `build.sh TARGET` and returns the folder it prints last. */
export async function runBuildScript(target: 'control-plane' | 'kind'): Promise<string> {
  const child = spawn('bash', [BUILD_SCRIPT, target], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout = (stdout + chunk).slice(-64 * 1024); // only the last line matters
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`${BUILD_SCRIPT} ${target} failed with exit code ${code}; see its output above`);
  return stdout.trimEnd().split('\n').at(-1) ?? '';
}

export function assertBinDir(binDir: string): void {
  const missing = REQUIRED_BINARIES.filter((name) => !existsSync(join(binDir, name)));
  if (binDir === '' || missing.length > 0) {
    throw new Error(`control-plane binary folder '${binDir}' lacks ${missing.join(', ')}`);
  }
}

/** opts.binDir, else what global-setup exported, else a build.sh run (so scripts outside vitest work too). */
export async function resolveBinDir(explicit?: string): Promise<string> {
  const binDir = explicit ?? process.env[BIN_DIR_ENV];
  if (binDir === undefined || binDir === '') return ensureControlPlaneBinaries();
  assertBinDir(binDir);
  return binDir;
}
