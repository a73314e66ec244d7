// The node's TCP sockets as /proc shows them (proc(5): /proc/<pid>/net/tcp and tcp6, one table per network
// namespace), and the process holding a socket (its /proc/<pid>/fd links). The fake node agent reads these to
// observe connections the way Tetragon's tcp_connect kprobe would report them, without eBPF.

import { readdir, readFile, readlink } from 'node:fs/promises';

/** proc(5)'s `st` column, the states in which a socket still has an owner worth naming. */
const LISTEN = 0x0a;
const OWNED_STATES = new Set([0x01 /* ESTABLISHED */, 0x02 /* SYN_SENT */, 0x04 /* FIN_WAIT1 */, 0x05 /* FIN_WAIT2 */, 0x08 /* CLOSE_WAIT */]);

export interface TcpSocket {
  family: 'AF_INET' | 'AF_INET6';
  localAddress: string;
  localPort: number;
  remoteAddress: string;
  remotePort: number;
  state: number;
  inode: number;
}

/** One 32-bit word of /proc/net/tcp's address column: printed in the kernel's (little-endian) byte order. */
function wordBytes(hex: string): number[] {
  const n = Number.parseInt(hex, 16);
  return [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];
}

/** `0100007F` → `127.0.0.1`; 32 hex digits → an IPv6 address as Tetragon prints it (a v4-mapped one dotted). */
export function procAddress(hex: string): string {
  if (hex.length === 8) return wordBytes(hex).join('.');
  const bytes = [0, 8, 16, 24].flatMap((at) => wordBytes(hex.slice(at, at + 8)));
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return `::ffff:${bytes.slice(12).join('.')}`;
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16)).join(':');
  // The URL parser prints the canonical (RFC 5952) form.
  return new URL(`http://[${groups}]/`).hostname.slice(1, -1);
}

/** The rows of one /proc/<pid>/net/tcp or tcp6 file. */
export function parseTcpTable(text: string, family: TcpSocket['family']): TcpSocket[] {
  const rows: TcpSocket[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [local, remote] = [f[1]!.split(':'), f[2]!.split(':')];
    rows.push({
      family,
      localAddress: procAddress(local[0]!),
      localPort: Number.parseInt(local[1]!, 16),
      remoteAddress: procAddress(remote[0]!),
      remotePort: Number.parseInt(remote[1]!, 16),
      state: Number.parseInt(f[3]!, 16),
      inode: Number(f[9]),
    });
  }
  return rows;
}

export interface NamespaceSockets {
  /** Sockets a process holds (inode ≠ 0) that have a peer, by inode. */
  owned: Map<number, TcpSocket>;
  /** Ports something listens on in this network namespace: a socket on one of them was accepted, not connected. */
  listening: Set<number>;
}

/** The TCP sockets of the network namespace `pid` lives in. */
export async function namespaceSockets(pid: number): Promise<NamespaceSockets> {
  const tables = await Promise.all(
    (['tcp', 'tcp6'] as const).map(async (name) => parseTcpTable(await readFile(`/proc/${pid}/net/${name}`, 'utf8').catch(() => ''), name === 'tcp' ? 'AF_INET' : 'AF_INET6')),
  );
  const owned = new Map<number, TcpSocket>();
  const listening = new Set<number>();
  for (const s of tables.flat()) {
    if (s.state === LISTEN) listening.add(s.localPort);
    else if (OWNED_STATES.has(s.state) && s.inode !== 0) owned.set(s.inode, s);
  }
  return { owned, listening };
}

/** Which of `pids` holds each of `inodes` (a socket shared after fork goes to the first found). */
export async function socketHolders(pids: number[], inodes: Set<number>): Promise<Map<number, number>> {
  const holders = new Map<number, number>();
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      if (inode !== undefined && inodes.has(Number(inode)) && !holders.has(Number(inode))) holders.set(Number(inode), pid);
    }
    if (holders.size === inodes.size) break;
  }
  return holders;
}
