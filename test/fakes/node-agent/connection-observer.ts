// Finds the node's new outgoing TCP connections by polling /proc, the way the fake node agent stands in for
// Tetragon's tcp_connect kprobe (ADR 1606). Every poll reads the socket table of each pod network namespace
// on the node (one process's /proc/<pid>/net/tcp{,6} per namespace), takes the sockets it had not seen that are
// not on a listening port (those were accepted, not connected), finds each one's holder among the namespace's
// processes (/proc/<pid>/fd), and names its pod and container from the holder's cgroup (the container id)
// and the API server's pod list.
//
// What it cannot see, unlike the kprobe: a connection opened and closed within one poll interval (about 50 ms
// plus the time a poll takes), and one whose process exits before the holder is found. The host's own network
// namespace (hostNetwork pods, the node's daemons) is skipped: it is the agent's own, busy with the control
// plane, and no injected pod lives there.

import { readdir, readlink } from 'node:fs/promises';
import type { ObservedConnect } from './observed-tcp-connect.ts';
import type { PodContainer } from './node-pods.ts';
import { readBinary, readProcess } from './proc-process.ts';
import { namespaceSockets, socketHolders } from './proc-tcp.ts';

/** How long a connection whose container the pod list does not show yet waits for it. */
const PENDING_MS = 10_000;
/** Polls a new socket is looked at again while no holder is found (its process may have started after the poll listed /proc). */
const HOLDER_TRIES = 20;

interface Pending {
  seen: Omit<ObservedConnect, 'container'>;
  until: number;
}

export interface ConnectionObserverOptions {
  /** Container id → pod container, refreshed by the caller (the API server's pod list). */
  containers: () => Map<string, PodContainer>;
  onConnect: (connect: ObservedConnect) => void;
  now?: () => number;
}

export class ConnectionObserver {
  readonly #opts: ConnectionObserverOptions;
  /** Per network namespace, the socket inodes seen at the previous poll. */
  #seen = new Map<string, Set<number>>();
  #pending: Pending[] = [];
  /** Per `netns|inode`, the polls that found no holder for a new socket so far. */
  #unowned = new Map<string, number>();
  #ownNetns = '';
  #primed = false;

  constructor(opts: ConnectionObserverOptions) {
    this.#opts = opts;
  }

  /** Connections still waiting for their container to appear in the pod list. */
  get pending(): number {
    return this.#pending.length;
  }

  /** One poll. The first only learns what is already connected: an agent reports connects after it started. */
  async poll(): Promise<void> {
    const now = (this.#opts.now ?? Date.now)();
    this.#ownNetns ||= await readlink('/proc/self/ns/net');
    const byNetns = await this.#podNamespaces();
    const seenNow = new Map<string, Set<number>>();
    const present = new Set<string>();
    for (const [netns, pids] of byNetns) {
      const { owned, listening } = await namespaceSockets(pids[0]!);
      seenNow.set(netns, new Set(owned.keys()));
      for (const inode of owned.keys()) present.add(`${netns}|${inode}`);
      const before = this.#seen.get(netns);
      if (!this.#primed) continue;
      const fresh = [...owned.values()].filter((s) => !before?.has(s.inode) && !listening.has(s.localPort));
      if (fresh.length === 0) continue;
      const holders = await socketHolders(pids, new Set(fresh.map((s) => s.inode)));
      for (const socket of fresh) {
        const pid = holders.get(socket.inode);
        const process = pid === undefined ? null : await readProcess(pid);
        if (process === null) {
          this.#retryLater(netns, socket.inode, seenNow.get(netns)!);
          continue;
        }
        this.#unowned.delete(`${netns}|${socket.inode}`);
        this.#pending.push({ seen: { atMs: now, socket, process, parentBinary: await readBinary(process.ppid) }, until: now + PENDING_MS });
      }
    }
    for (const key of this.#unowned.keys()) if (!present.has(key)) this.#unowned.delete(key);
    this.#seen = seenNow;
    this.#primed = true;
    this.#deliver(now);
  }

  /** A new socket whose holder was not found stays new for the next polls, a bounded number of them. */
  #retryLater(netns: string, inode: number, seen: Set<number>): void {
    const key = `${netns}|${inode}`;
    const tries = (this.#unowned.get(key) ?? 0) + 1;
    this.#unowned.set(key, tries);
    if (tries < HOLDER_TRIES) seen.delete(inode);
  }

  #deliver(now: number): void {
    const containers = this.#opts.containers();
    this.#pending = this.#pending.filter((p) => {
      const container = p.seen.process.containerId === null ? undefined : containers.get(p.seen.process.containerId);
      if (container) this.#opts.onConnect({ ...p.seen, container });
      return container === undefined && p.until > now;
    });
  }

  /** The node's processes in containers, grouped by network namespace, the host's own left out. */
  async #podNamespaces(): Promise<Map<string, number[]>> {
    const groups = new Map<string, number[]>();
    for (const entry of await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const netns = await readlink(`/proc/${entry}/ns/net`).catch(() => '');
      if (netns === '' || netns === this.#ownNetns) continue;
      const pids = groups.get(netns) ?? [];
      pids.push(Number(entry));
      groups.set(netns, pids);
    }
    return groups;
  }
}
