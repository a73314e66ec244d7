// Debian packages a test suite needs (chromium for the browser tests, redis-server for the Redis store): installed
// with apt-get when missing and this process may (root: CI runs as root on a fresh Debian machine); elsewhere
// the error names the command to run.

import { setTimeout as delay } from 'node:timers/promises';
import { CommandError, onPath, run } from '../kind/host-command.ts';

const APT_ENV = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
/** Another apt-get (a fresh VM's daily upgrade, another engineer's install) may hold the locks for a while. */
const LOCK_WAIT_SECONDS = 300;
const APT_OPTIONS = ['-qq', '-o', `DPkg::Lock::Timeout=${LOCK_WAIT_SECONDS}`, '-o', 'Acquire::Retries=3'];

/**
 * Installs `packages` without their recommends. `need` says what for, in the error a non-root user gets;
 * `hint` what else they may do (a variable naming another binary).
 */
export async function installDebianPackages(packages: string[], need: string, log: (line: string) => void, hint = ''): Promise<void> {
  const command = `apt-get install -y --no-install-recommends ${packages.join(' ')}`;
  if (process.getuid?.() !== 0) throw new Error(`${need}: run \`sudo ${command}\`${hint}`);
  if (!onPath('apt-get')) throw new Error(`${need}, and this machine has no apt-get to install it${hint}`);
  const started = Date.now();
  log(`installing Debian packages ${packages.join(' ')} (apt-get)`);
  // A machine whose package index already offers them skips `apt-get update`; a fresh one's index is empty.
  const offered = await run('apt-get', ['install', '-s', '-qq', '--no-install-recommends', ...packages], { env: APT_ENV, okCodes: [0, 100] });
  if (offered.code !== 0) await aptGet(['update']);
  try {
    await aptGet(['install', '-y', '--no-install-recommends', ...packages]);
  } catch (err) {
    // The index was used as found: an old one names versions the mirror has dropped. Refresh it once, try again.
    if (offered.code !== 0) throw err;
    log(`apt-get install failed with the package index as found (${err instanceof Error ? err.message.split('\n')[1] : String(err)}): apt-get update, then the install again`);
    await aptGet(['update']);
    await aptGet(['install', '-y', '--no-install-recommends', ...packages]);
  }
  log(`installed in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * apt-get with a wait for its locks. `install` waits for dpkg's lock itself (DPkg::Lock::Timeout); `update`
 * takes the package lists' lock, for which apt-get has no wait, so a busy lock is tried again every few seconds.
 */
async function aptGet(args: string[]): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_SECONDS * 1000;
  for (;;) {
    try {
      await run('apt-get', [...APT_OPTIONS, ...args], { env: APT_ENV });
      return;
    } catch (err) {
      if (!(err instanceof CommandError) || !err.message.includes('Could not get lock') || Date.now() > deadline) throw err;
      await delay(3000);
    }
  }
}
