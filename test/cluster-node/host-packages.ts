// Debian packages a node needs from the machine: containerd and runc, the CNI plugins, iptables (kube-proxy,
// kubelet) and conntrack (kube-proxy's clean-up of stale UDP flows). Installed with apt-get when missing; the
// ones installed here are listed in the cache, so `./tollgatew cluster down --remove-packages` can remove them.

import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { tollgateCache } from './cache-dir.ts';
import { run, runSync } from './host-command.ts';

export const NODE_PACKAGES = ['containerd', 'runc', 'iptables', 'containernetworking-plugins', 'conntrack'] as const;

const installedRecord = () => tollgateCache('node', 'packages-installed-by-tollgate');
const POLICY_RC = '/usr/sbin/policy-rc.d';
const APT_ENV = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };

export function missingPackages(packages: readonly string[] = NODE_PACKAGES): string[] {
  return packages.filter((p) => {
    const r = runSync('dpkg-query', ['-W', '-f=${Status}', p], { okCodes: [0, 1] });
    return !r.stdout.includes('install ok installed');
  });
}

/**
 * Installs the packages that are missing with apt-get, without letting them start services (the node runs its
 * own containerd; the benchmark runs its own nginx). Returns the ones it installed.
 */
export async function ensureDebianPackages(packages: readonly string[], log: (line: string) => void): Promise<string[]> {
  const missing = missingPackages(packages);
  if (missing.length === 0) return [];
  log(`installing Debian packages: ${missing.join(' ')}`);
  const ownPolicy = !existsSync(POLICY_RC);
  if (ownPolicy) writeFileSync(POLICY_RC, '#!/bin/sh\n# written by tollgate for the duration of an apt-get install\nexit 101\n', { mode: 0o755 });
  try {
    await run('apt-get', ['update', '-qq'], { env: APT_ENV });
    await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env: APT_ENV });
  } finally {
    if (ownPolicy) rmSync(POLICY_RC, { force: true });
  }
  return missing;
}

export async function ensureNodePackages(log: (line: string) => void): Promise<string[]> {
  const missing = await ensureDebianPackages(NODE_PACKAGES, log);
  if (missing.length === 0) return [];
  mkdirSync(dirname(installedRecord()), { recursive: true });
  appendFileSync(installedRecord(), missing.map((p) => `${p}\n`).join(''));
  return missing;
}

/** Removes the packages ensureNodePackages installed on this machine (and only those). */
export async function removeInstalledPackages(log: (line: string) => void): Promise<string[]> {
  if (!existsSync(installedRecord())) return [];
  const packages = [...new Set(readFileSync(installedRecord(), 'utf8').split('\n').filter(Boolean))];
  if (packages.length > 0) {
    log(`removing Debian packages installed for the node: ${packages.join(' ')}`);
    // purge: the configuration files came with our install too.
    await run('apt-get', ['purge', '-y', '-qq', ...packages], { env: APT_ENV });
  }
  rmSync(installedRecord(), { force: true });
  return packages;
}
