// Debian's Chromium for the browser tests, driven by playwright-core (which never downloads a browser of its
// own). The global setup installs the package when it is missing, as root (CI runs as root); elsewhere it
// says what to install. Launch flags keep Chromium off the network beyond loopback: without them it calls
// Google's services at every start, which a closed network refuses.

import { existsSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { chromium, type Browser } from 'playwright-core';
import { CommandError, onPath, run } from '../kind/host-command.ts';

export const CHROMIUM = process.env.TOLLGATE_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Chromium without its recommends (which bring printing, Samba, Avahi and Perl: a minute more on a fresh
 * machine) plus the one it needs to draw text: a minimal image has no font at all.
 */
const PACKAGES = ['chromium', 'fonts-liberation'];

const QUIET_FLAGS = [
  '--no-sandbox', // root in CI; the pages are the test's own
  '--disable-dev-shm-usage', // a container's /dev/shm is often 64 MiB, too small for a renderer
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
];

const APT_ENV = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
/** Another apt-get (a fresh VM's daily upgrade, another engineer's install) may hold the locks for a while. */
const LOCK_WAIT_SECONDS = 300;
const APT_OPTIONS = ['-qq', '-o', `DPkg::Lock::Timeout=${LOCK_WAIT_SECONDS}`, '-o', 'Acquire::Retries=3'];

/** Installs Debian's chromium when it is missing and this process may (root); else throws naming the command. */
export async function ensureChromium(log: (line: string) => void = () => undefined): Promise<void> {
  if (existsSync(CHROMIUM)) return;
  if (process.env.TOLLGATE_CHROMIUM !== undefined) throw new Error(`TOLLGATE_CHROMIUM names ${CHROMIUM}, which does not exist`);
  if (process.getuid?.() !== 0) {
    throw new Error(
      `the browser tests need Debian's Chromium at ${CHROMIUM}: run \`sudo apt-get install -y --no-install-recommends ${PACKAGES.join(' ')}\` (or set TOLLGATE_CHROMIUM)`,
    );
  }
  if (!onPath('apt-get')) throw new Error(`the browser tests need Chromium at ${CHROMIUM}, and this machine has no apt-get to install it: install it and set TOLLGATE_CHROMIUM`);

  const started = Date.now();
  log(`installing Debian packages ${PACKAGES.join(' ')} (apt-get)`);
  // A machine whose package index already offers them skips `apt-get update`; a fresh one's index is empty.
  const offered = await run('apt-get', ['install', '-s', '-qq', '--no-install-recommends', ...PACKAGES], { env: APT_ENV, okCodes: [0, 100] });
  if (offered.code !== 0) await aptGet(['update']);
  try {
    await aptGet(['install', '-y', '--no-install-recommends', ...PACKAGES]);
  } catch (err) {
    // The index was used as found: an old one names versions the mirror has dropped. Refresh it once, try again.
    if (offered.code !== 0) throw err;
    log(`apt-get install failed with the package index as found (${err instanceof Error ? err.message.split('\n')[1] : String(err)}): apt-get update, then the install again`);
    await aptGet(['update']);
    await aptGet(['install', '-y', '--no-install-recommends', ...PACKAGES]);
  }
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, but ${CHROMIUM} is not there`);
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

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: QUIET_FLAGS });
}
