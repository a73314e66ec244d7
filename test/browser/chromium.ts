// Debian's Chromium for the browser tests, driven by playwright-core (which never downloads a browser of its
// own). The global setup installs the package when it is missing, as root (CI runs as root); elsewhere it
// says what to install. Launch flags keep Chromium off the network beyond loopback: without them it calls
// Google's services at every start, which a closed network refuses.

import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { installDebianPackages } from '../support/debian-packages.ts';

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

/** Installs Debian's chromium when it is missing and this process may (root); else throws naming the command. */
export async function ensureChromium(log: (line: string) => void = () => undefined): Promise<void> {
  if (existsSync(CHROMIUM)) return;
  if (process.env.TOLLGATE_CHROMIUM !== undefined) throw new Error(`TOLLGATE_CHROMIUM names ${CHROMIUM}, which does not exist`);
  await installDebianPackages(PACKAGES, `the browser tests need Debian's Chromium at ${CHROMIUM}`, log, ' (or set TOLLGATE_CHROMIUM)');
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, but ${CHROMIUM} is not there`);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: QUIET_FLAGS });
}
