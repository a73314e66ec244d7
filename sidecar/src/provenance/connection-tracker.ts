// Which process opened each connection the sidecar accepted (ADR 1600). A connection is noted when accepted (a
// WeakMap on the socket, so a kept-alive connection is looked up once), matched at once against the
// recent connects in the ring, and otherwise left waiting for a connect that arrives late; whoever waits on it
// (the span gate) is told when it resolves. Everything is bounded: the ring, the waiting connections, the
// request index. Nothing here waits: the request path only notes the socket.

import type { SpanProcess } from '../spans/span.ts';
import { type AcceptedConnection, ConnectRing, connectMatches, type MatchWindow } from './connect-ring.ts';
import type { TcpConnect } from './tcp-connect-event.ts';

export interface ConnectionState extends AcceptedConnection {
  process: SpanProcess | null;
  /** Told once, when `process` is found. */
  readonly waiters: Set<() => void>;
}

/** What a socket shows of its connection (net.Socket, or HTTP/2's proxy of it). */
export interface SocketView {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
  localPort?: number | undefined;
}

export interface TrackerLimits {
  /** Recent connects kept for matching. */
  ringSize: number;
  /** Connections waiting for a late connect. */
  maxWaiting: number;
  /** Requests whose connection can still be looked up by request id. */
  maxRequests: number;
}

export const TRACKER_LIMITS: TrackerLimits = { ringSize: 4096, maxWaiting: 4096, maxRequests: 10_000 };

/** How long before its first request a kept-alive connection's connect may be. */
const CONNECT_LOOKBACK_MS = 5 * 60_000;

export class ConnectionTracker {
  readonly #ring: ConnectRing;
  readonly #limits: TrackerLimits;
  readonly #bySocket = new WeakMap<object, ConnectionState>();
  readonly #byRequest = new Map<string, ConnectionState>();
  /** In first-seen order, so the oldest goes first when full. */
  readonly #waiting = new Set<ConnectionState>();
  readonly #describe: (event: TcpConnect) => SpanProcess;
  #aheadMs: number;
  #gaveUp = 0;

  constructor(opts: { describe: (event: TcpConnect) => SpanProcess; aheadMs: number; limits?: TrackerLimits }) {
    this.#limits = opts.limits ?? TRACKER_LIMITS;
    this.#ring = new ConnectRing(this.#limits.ringSize);
    this.#describe = opts.describe;
    this.#aheadMs = opts.aheadMs;
  }

  set aheadMs(ms: number) {
    this.#aheadMs = ms;
  }

  #window(): MatchWindow {
    return { aheadMs: this.#aheadMs, behindMs: CONNECT_LOOKBACK_MS };
  }

  stats(): { ringDropped: number; waiting: number; waitingGivenUp: number } {
    return { ringDropped: this.#ring.dropped, waiting: this.#waiting.size, waitingGivenUp: this.#gaveUp };
  }

  /**
   * A connection, noted and matched the first time it is seen (when accepted, or at its first request where the
   * listener hands requests another socket object, as HTTP/2 does). Returns it when new.
   */
  noteConnection(socket: SocketView & object, nowMs: number): ConnectionState | undefined {
    if (this.#bySocket.has(socket)) return undefined;
    const state: ConnectionState = {
      remoteAddress: socket.remoteAddress ?? '',
      remotePort: socket.remotePort ?? 0,
      localPort: socket.localPort ?? 0,
      seenAtMs: nowMs,
      process: null,
      waiters: new Set(),
    };
    this.#bySocket.set(socket, state);
    const found = this.#ring.find(state, this.#window());
    if (found) state.process = this.#describe(found);
    else this.#wait(state);
    return state;
  }

  /** On a request's arrival: its connection (noted now if it was not yet), found later by the request id. */
  noteRequest(requestId: string, socket: SocketView & object, nowMs: number): ConnectionState | undefined {
    const fresh = this.noteConnection(socket, nowMs);
    const state = fresh ?? this.#bySocket.get(socket)!;
    if (this.#byRequest.size >= this.#limits.maxRequests) this.#byRequest.delete(this.#byRequest.keys().next().value!);
    this.#byRequest.set(requestId, state);
    return fresh;
  }

  connectionOf(requestId: string): ConnectionState | undefined {
    return this.#byRequest.get(requestId);
  }

  #wait(state: ConnectionState): void {
    if (this.#waiting.size >= this.#limits.maxWaiting) {
      const oldest = this.#waiting.values().next().value!;
      this.#waiting.delete(oldest);
      this.#gaveUp++;
    }
    this.#waiting.add(state);
  }

  /** A tcp_connect into the sidecar's port: kept for later connections, and given to those that wait for it. */
  onConnect(event: TcpConnect): void {
    this.#ring.add(event);
    const window = this.#window();
    // Every waiting state it matches: an HTTP/2 connection is noted twice (its socket when accepted, the
    // session's socket object at its first request), and both are the same connection.
    let process: SpanProcess | undefined;
    for (const state of this.#waiting) {
      if (!connectMatches(event, state, window)) continue;
      process ??= this.#describe(event);
      // resolve() deletes the state being visited, which a Set's iteration allows.
      this.resolve(state, process);
    }
  }

  /** Sets the process of a connection still unknown (from Tetragon or /proc) and tells its waiters. */
  resolve(state: ConnectionState, process: SpanProcess): void {
    if (state.process !== null) return;
    state.process = process;
    this.#waiting.delete(state);
    for (const wake of state.waiters) wake();
    state.waiters.clear();
  }
}
