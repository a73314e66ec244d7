// Debian packages a test or benchmark needs from the machine (nginx and wrk for the benchmarks), installed
// with apt-get when missing.

import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { run, runSync } from './host-command.ts';

const POLICY_RC = '/usr/sbin/policy-rc.d';
const APT_ENV = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };

export function missingPackages(packages: readonly string[]): string[] {
  return packages.filter((p) => {
    const r = runSync('dpkg-query', ['-W', '-f=${Status}', p], { okCodes: [0, 1] });
    return !r.stdout.includes('install ok installed');
  });
}

/**
 * Installs the packages that are missing with apt-get, without letting them start services (the benchmark runs
 * its own nginx). Returns the ones it installed.
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
