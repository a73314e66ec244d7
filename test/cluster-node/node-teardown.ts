// Takes the node down and puts the machine back as it was: idempotent, synchronous (so it also runs from an
// exit handler) and driven by what is on the machine rather than by what this process remembers, so the next
// run cleans up after one that was killed half-way. It ends only processes that are the node's, each by PID:
// its components and containerd's shims (in the node's network namespace, with the node's folders in their
// command lines) and the pods' processes (in the node's cgroups).

import { existsSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runSync } from './host-command.ts';
import { hostSnapshot, readHostBefore, restoreHost, type HostSnapshot } from './host-state.ts';
import { CGROUP_ROOT, HOST_LINK, paths, RUN_DIR, STATE_DIR } from './node-layout.ts';

export interface TeardownReport {
  processes: number;
  mounts: number;
  cgroups: number;
  links: number;
  host: string[];
  /** True when there was anything of a node to clean up. */
  found: boolean;
}

const sleepMs = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

const isOurs = (path: string) => path === STATE_DIR || path === RUN_DIR || path.startsWith(`${STATE_DIR}/`) || path.startsWith(`${RUN_DIR}/`);

interface MountEntry {
  target: string;
  fsType: string;
}

// /proc/self/mountinfo escapes space, tab, newline and backslash as octal.
const unescapeMount = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));

export function mounts(): MountEntry[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const fields = line.split(' ');
      const sep = fields.indexOf('-');
      return { target: unescapeMount(fields[4]!), fsType: fields[sep + 1]! };
    });
}

export function cgroupHierarchies(): string[] {
  return mounts()
    .filter((m) => m.fsType === 'cgroup' || m.fsType === 'cgroup2')
    .map((m) => m.target);
}

function pidsInCgroups(): number[] {
  const pids: number[] = [];
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name === 'cgroup.procs') {
        try {
          pids.push(...readFileSync(join(dir, e.name), 'utf8').split('\n').filter(Boolean).map(Number));
        } catch {
          // removed meanwhile
        }
      }
    }
  };
  for (const h of cgroupHierarchies()) walk(join(h, CGROUP_ROOT));
  return pids;
}

function netNamespace(pid: number | 'self'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return undefined;
  }
}

/**
 * PIDs of the node's components and containerd's shims: processes outside the machine's network namespace
 * whose command line names the node's folders. (A `tail -f` of a node log on the machine is not one of them.)
 */
export function nodeProcesses(): number[] {
  const machine = netNamespace('self');
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.includes(`${STATE_DIR}/`) && !cmdline.includes(`${RUN_DIR}/`)) continue;
      const ns = netNamespace(Number(entry));
      if (ns !== undefined && ns !== machine) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '); // a zombie is gone for our purposes
  } catch {
    return false;
  }
}

function signal(pids: Iterable<number>, sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  }
}

// Teardown destroys the node and all its state, so nothing is gained by a graceful stop: kube-apiserver alone
// spends over 15 s draining its watches on SIGTERM. SIGKILL, then wait until every process is gone.
function endProcesses(): number {
  const ended = new Set<number>();
  // A kubelet still running restarts what was just killed, so repeat until nothing is left.
  for (let round = 0; round < 10; round++) {
    const found = [...nodeProcesses(), ...pidsInCgroups()];
    if (found.length === 0) break;
    signal(found, 'SIGKILL');
    for (const pid of found) ended.add(pid);
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && found.some(alive)) sleepMs(50);
  }
  return ended.size;
}

function unmountAll(): number {
  let count = 0;
  for (let round = 0; round < 5; round++) {
    // Deepest first; a later mount can hide an earlier one on the same point, so go in reverse order.
    const ours = mounts()
      .map((m) => m.target)
      .filter(isOurs)
      .reverse();
    if (ours.length === 0) break;
    for (const target of ours) {
      try {
        runSync('umount', [target]);
      } catch {
        runSync('umount', ['-l', target], { okCodes: [0, 1, 32] });
      }
      count++;
    }
  }
  return count;
}

function removeCgroups(): number {
  let count = 0;
  const remove = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) remove(join(dir, e.name));
    // An emptied cgroup can stay busy for a moment after its last process died.
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        rmdirSync(dir);
        count++;
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        sleepMs(100);
      }
    }
  };
  for (const h of cgroupHierarchies()) remove(join(h, CGROUP_ROOT));
  return count;
}

function removeHostLink(): number {
  const show = runSync('ip', ['link', 'show', HOST_LINK], { okCodes: [0, 1] });
  if (show.code !== 0) return 0;
  runSync('ip', ['link', 'delete', HOST_LINK], { okCodes: [0, 1] });
  return 1;
}

export function nodeLeftovers(): boolean {
  return existsSync(STATE_DIR) || existsSync(RUN_DIR) || nodeProcesses().length > 0 || mounts().some((m) => isOurs(m.target));
}

export function tearDownNode(): TeardownReport {
  const found = nodeLeftovers();
  const processes = endProcesses();
  const mountCount = unmountAll();
  const links = removeHostLink();
  const cgroups = removeCgroups();
  const before = readHostBefore(paths.hostBefore);
  const host = before ? restoreHost(before) : [];
  const stillMounted = mounts().filter((m) => isOurs(m.target));
  if (stillMounted.length > 0) {
    // Removing the folders now could reach through a mount into something that is not the node's.
    throw new Error(`node teardown: could not unmount ${stillMounted.map((m) => m.target).join(', ')}; the folders are left in place`);
  }
  rmSync(STATE_DIR, { recursive: true, force: true });
  rmSync(RUN_DIR, { recursive: true, force: true });
  return { processes, mounts: mountCount, cgroups, links, host, found: found || links > 0 || cgroups > 0 };
}

/** The machine as far as a node touches it (host-state.ts), for tests that check teardown. */
export function currentHostSnapshot(): HostSnapshot {
  return hostSnapshot({ mounts, cgroupHierarchies, nodeProcesses, ip: (args) => runSync('ip', args).stdout });
}
