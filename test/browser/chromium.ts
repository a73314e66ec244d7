// Debian's Chromium for the browser tests, driven by playwright-core (which never downloads a browser of its
// own). The global setup installs the package when it is missing, as root (CI runs as root); elsewhere it
// says what to install. Launch flags keep Chromium off the network beyond loopback: without them it calls
// Google's services at every start, which a closed network refuses.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.TOLLGATE_CHROMIUM ?? '/usr/bin/chromium';

const QUIET_FLAGS = [
  '--no-sandbox', // root in CI; the pages are the test's own
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
];

/** Installs Debian's chromium when it is missing and this process may (root); else throws naming the command. */
export function ensureChromium(log: (line: string) => void = () => undefined): void {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`the browser tests need Debian's Chromium at ${CHROMIUM}: run \`sudo apt-get install -y chromium\` (or set TOLLGATE_CHROMIUM)`);
  }
  log('installing Debian package chromium for the browser tests (apt-get)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'chromium'], { stdio: 'inherit', env });
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, but ${CHROMIUM} is not there`);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: QUIET_FLAGS });
}
