// The process behind a loopback connection, read from /proc when the pod shares its process namespace
// (provenance.procfs; provenance.md §2): the client's socket is the line of /proc/net/tcp{,6} whose local port is
// the connection's remote port and whose remote port is the sidecar's; its inode names the socket, and the
// process holding it has a /proc/<pid>/fd link `socket:[inode]`. Reads are asynchronous and run after the
// request has gone on; a process that cannot be read (another user's, gone already) is skipped.

import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

export interface ProcProcess {
  pid: number;
  executablePath: string | null;
  /** argv, argv[0] included. */
  argv: string[];
  /** The parents' executables, nearest first (at most 8). */
  parents: string[];
}

const MAX_PARENTS = 8;

/** The inode of the socket whose local port is `localPort` and remote port `remotePort`, from /proc/net/tcp{,6}. */
async function socketInode(procRoot: string, localPort: number, remotePort: number): Promise<string | undefined> {
  const want = (port: number) => port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = await readFile(join(procRoot, 'net', table), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const [local, remote, inode] = [fields[1]!, fields[2]!, fields[9]!];
      if (local.endsWith(`:${want(localPort)}`) && remote.endsWith(`:${want(remotePort)}`) && inode !== '0') return inode;
    }
  }
  return undefined;
}

async function executable(procRoot: string, pid: number): Promise<string | null> {
  try {
    return await readlink(join(procRoot, String(pid), 'exe'));
  } catch {
    return null;
  }
}

async function parentPid(procRoot: string, pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(join(procRoot, String(pid), 'stat'), 'utf8');
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) && ppid > 0 ? ppid : undefined;
  } catch {
    return undefined;
  }
}

async function holds(procRoot: string, pid: string, link: string): Promise<boolean> {
  let fds: string[];
  try {
    fds = await readdir(join(procRoot, pid, 'fd'));
  } catch {
    return false;
  }
  const links = await Promise.all(fds.map((fd) => readlink(join(procRoot, pid, 'fd', fd)).catch(() => '')));
  return links.includes(link);
}

/** What /proc says of `pid`, read as soon as it is found: a short call's client may live for milliseconds. */
async function describe(procRoot: string, pid: number): Promise<ProcProcess> {
  const [executablePath, cmdline] = await Promise.all([executable(procRoot, pid), readFile(join(procRoot, String(pid), 'cmdline'), 'utf8').catch(() => '')]);
  const parents: string[] = [];
  let at = await parentPid(procRoot, pid);
  while (at !== undefined && parents.length < MAX_PARENTS) {
    const exe = await executable(procRoot, at);
    if (exe !== null) parents.push(exe);
    at = await parentPid(procRoot, at);
  }
  return { pid, executablePath, argv: cmdline.split('\0').filter((a) => a !== ''), parents };
}

/** The process holding the client end of the connection from `clientPort` to `serverPort`, or null. */
export async function lookupProcfs(clientPort: number, serverPort: number, procRoot = '/proc'): Promise<ProcProcess | null> {
  const inode = await socketInode(procRoot, clientPort, serverPort);
  if (inode === undefined) return null;
  const link = `socket:[${inode}]`;
  // Every process at once, each described the moment its descriptors show the socket.
  const pids = (await readdir(procRoot)).filter((name) => /^\d+$/.test(name) && name !== String(process.pid));
  const found = await Promise.all(pids.map(async (pid) => ((await holds(procRoot, pid, link)) ? describe(procRoot, Number(pid)) : null)));
  return found.find((p) => p !== null) ?? null;
}
