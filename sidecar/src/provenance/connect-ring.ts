// The recent tcp_connect events into the sidecar's port, in a fixed ring: the newest `capacity` are kept and each
// one pushed out is counted. A connection the sidecar accepted is matched to the event whose source port is the
// connection's remote port and whose destination port is the sidecar's, at a time close to when the sidecar first
// saw the connection (ADR 1600). Ports are reused once a connection closes, so of several events for the same
// ports the latest that is not after the connection (give or take the clock skew allowed) wins.

import type { TcpConnect } from './tcp-connect-event.ts';

/** A connection the sidecar accepted, as its socket shows it. */
export interface AcceptedConnection {
  remoteAddress: string;
  remotePort: number;
  localPort: number;
  /** When the sidecar first saw it (its first request), epoch ms. */
  seenAtMs: number;
}

export interface MatchWindow {
  /** How much later than `seenAtMs` an event may be stamped (the agent's clock, its delivery lag). */
  aheadMs: number;
  /** How much earlier: a kept-alive connection's first request can come a while after its connect. */
  behindMs: number;
}

/** IPv4 in IPv6 (::ffff:127.0.0.1) as Tetragon prints the plain IPv4 address. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address;
}

/** Whether `event` can be the connect of `conn` within `window`. */
export function connectMatches(event: TcpConnect, conn: AcceptedConnection, window: MatchWindow): boolean {
  if (event.sport !== conn.remotePort || event.dport !== conn.localPort) return false;
  if (event.saddr !== '' && conn.remoteAddress !== '' && plainAddress(event.saddr) !== plainAddress(conn.remoteAddress)) return false;
  return event.atMs <= conn.seenAtMs + window.aheadMs && event.atMs >= conn.seenAtMs - window.behindMs;
}

export class ConnectRing {
  readonly #slots: (TcpConnect | undefined)[];
  #next = 0;
  #dropped = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`connect ring capacity must be a positive integer, got ${capacity}`);
    this.#slots = new Array<TcpConnect | undefined>(capacity);
  }

  /** Events pushed out of the ring by newer ones. */
  get dropped(): number {
    return this.#dropped;
  }

  add(event: TcpConnect): void {
    if (this.#slots[this.#next] !== undefined) this.#dropped++;
    this.#slots[this.#next] = event;
    this.#next = (this.#next + 1) % this.#slots.length;
  }

  /** The latest event that matches `conn`, or undefined. */
  find(conn: AcceptedConnection, window: MatchWindow): TcpConnect | undefined {
    let best: TcpConnect | undefined;
    for (const event of this.#slots) {
      if (event === undefined || !connectMatches(event, conn, window)) continue;
      if (best === undefined || event.atMs > best.atMs) best = event;
    }
    return best;
  }
}
