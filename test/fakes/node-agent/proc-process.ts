// A process on the node as Tetragon describes it in an event's `process` (binary, arguments, cwd, uid, start
// time, parent), read from /proc/<pid>: exe, cmdline, cwd, status and stat. With hostPID the PIDs are the
// node's, as Tetragon's are.

import { readFile, readlink } from 'node:fs/promises';

/** USER_HZ: the unit of stat's start time; 100 on every Linux architecture Kubernetes runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcProcess {
  pid: number;
  binary: string;
  /** argv[1:] as Tetragon prints it: space-joined, an argument with a space in double quotes. */
  arguments: string;
  cwd: string;
  uid: number;
  /** Epoch nanoseconds, from the boot time and stat's start time. */
  startNs: bigint;
  ppid: number;
  /** The 64-hex container id in the process's cgroup path, or null for a process outside a container. */
  containerId: string | null;
}

let bootMs: number | undefined;

async function bootTimeMs(): Promise<number> {
  if (bootMs === undefined) {
    const btime = /^btime (\d+)$/m.exec(await readFile('/proc/stat', 'utf8'))?.[1];
    bootMs = Number(btime) * 1000;
  }
  return bootMs;
}

export function tetragonArguments(argv: string[]): string {
  return argv
    .slice(1)
    .map((a) => (a.includes(' ') ? `"${a}"` : a))
    .join(' ');
}

/** The container id in a /proc/<pid>/cgroup file (cgroup v1 or v2, cgroupfs or systemd driver). */
export function cgroupContainerId(text: string): string | null {
  return /([0-9a-f]{64})(?:\.scope)?\s*$/m.exec(text)?.[1] ?? null;
}

/** The process `pid`, or null when it has gone. */
export async function readProcess(pid: number): Promise<ProcProcess | null> {
  try {
    const [binary, cmdline, cwd, status, stat, cgroup] = await Promise.all([
      readlink(`/proc/${pid}/exe`),
      readFile(`/proc/${pid}/cmdline`, 'utf8'),
      readlink(`/proc/${pid}/cwd`).catch(() => ''),
      readFile(`/proc/${pid}/status`, 'utf8'),
      readFile(`/proc/${pid}/stat`, 'utf8'),
      readFile(`/proc/${pid}/cgroup`, 'utf8'),
    ]);
    // stat's second field is the command in parentheses, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const startTicks = BigInt(fields[19] ?? '0');
    return {
      pid,
      binary,
      arguments: tetragonArguments(cmdline.split('\0').filter((a, i, all) => a !== '' || i < all.length - 1)),
      cwd,
      uid: Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1),
      startNs: BigInt(await bootTimeMs()) * 1_000_000n + (startTicks * 1_000_000_000n) / BigInt(CLOCK_TICKS_PER_SECOND),
      ppid: Number(fields[1]),
      containerId: cgroupContainerId(cgroup),
    };
  } catch {
    return null;
  }
}

/** Only the binary of `pid` (a parent's, for the event's `parent`), or '' when it cannot be read. */
export async function readBinary(pid: number): Promise<string> {
  return readlink(`/proc/${pid}/exe`).catch(() => '');
}
