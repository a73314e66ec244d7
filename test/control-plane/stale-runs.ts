// A test process killed with SIGKILL takes etcd and kube-apiserver with it (pdeathsig) but cannot remove its
// folders, and the etcd data on /dev/shm holds memory. The next start removes such leftovers: folders of
// this harness that no live process mentions and that are old enough not to belong to a run still starting.

import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const RUN_PREFIX = 'tollgate-control-plane-';
const RUN_NAME = /^tollgate-control-plane-[A-Za-z0-9]{6}(-etcd)?$/;
// A run generates its certificates before etcd starts; give it ample time before its folder counts as stale.
const MIN_AGE_MS = 5 * 60_000;

function liveCommandLines(): string[] {
  const lines: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      lines.push(readFileSync(`/proc/${entry}/cmdline`, 'utf8'));
    } catch {
      // exited meanwhile
    }
  }
  return lines;
}

export function removeStaleRuns(parents: string[], now = Date.now()): string[] {
  let live: string[];
  try {
    live = liveCommandLines();
  } catch {
    return []; // no /proc: cannot tell live from stale, so touch nothing
  }
  const removed: string[] = [];
  for (const parent of new Set(parents)) {
    let names: string[];
    try {
      names = readdirSync(parent);
    } catch {
      continue;
    }
    for (const name of names) {
      if (!RUN_NAME.test(name)) continue;
      const run = name.replace(/-etcd$/, '');
      const path = join(parent, name);
      try {
        if (now - statSync(path).mtimeMs < MIN_AGE_MS) continue;
        if (live.some((cmdline) => cmdline.includes(run))) continue;
        rmSync(path, { recursive: true, force: true });
        removed.push(path);
      } catch {
        // someone else removed it, or it is not ours to remove
      }
    }
  }
  return removed;
}
