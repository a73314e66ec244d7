// A Tetragon `process_kprobe` event for `tcp_connect` (provenance.md §1.3, §1.4), read into what attribution and
// bypass detection need: who connected (pid, binary, arguments, container, parent), from where to where, when.
// Any other event reads as null. The kprobe runs in the connecting thread, so `process` is the caller; at this
// point the source port is already chosen, so saddr:sport -> daddr:dport names the connection.

import type protobuf from 'protobufjs';
import { type TetragonEvent, tetragonRoot } from '../audit/tetragon-protocol.ts';

export interface TcpConnect {
  /** Event time, epoch milliseconds. */
  atMs: number;
  podNamespace: string;
  podName: string;
  containerName: string | null;
  pid: number | null;
  /** Tetragon's exec_id of the connecting process (unique on the node across time); '' when the agent left it out. */
  execId?: string | undefined;
  parentExecId?: string | undefined;
  binary: string;
  /** Tetragon's argv[1:], space-joined, arguments with spaces in double quotes. */
  arguments: string;
  /** The parent's binary, then the ancestors' when the agent sends them; nearest first. */
  parents: string[];
  saddr: string;
  daddr: string;
  sport: number;
  dport: number;
}

type Obj = Record<string, unknown>;

/** A protobuf wrapper's value (pid: UInt32Value), or null when unset. */
export function wrapped(value: unknown): number | null {
  const v = (value as { value?: unknown } | undefined)?.value;
  return typeof v === 'number' ? v : null;
}

/** A protobuf Timestamp as epoch ms; now when absent. */
export function timeMs(time: unknown): number {
  const t = time as { seconds?: number | { toString(): string }; nanos?: number } | undefined;
  if (!t) return Date.now();
  return Number(String(t.seconds ?? 0)) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

let responseType: protobuf.Type | undefined;
const decoded = new WeakMap<TetragonEvent, Obj>();

/**
 * The event's whole message, decoded once however many readers look at it (the connect reader and the causal
 * trail's both read a tcp_connect kprobe).
 */
export function decodedEvent(event: TetragonEvent): Obj {
  let message = decoded.get(event);
  if (message === undefined) {
    responseType ??= tetragonRoot().lookupType('tetragon.GetEventsResponse');
    message = responseType.decode(event.raw) as unknown as Obj;
    decoded.set(event, message);
  }
  return message;
}

/** The connect in `event`, or null for any event that is not a tcp_connect kprobe with a socket argument. */
export function readTcpConnect(event: TetragonEvent): TcpConnect | null {
  if (event.info.type !== 'process_kprobe') return null;
  const message = decodedEvent(event);
  const kprobe = message.process_kprobe as Obj | undefined;
  if (kprobe?.function_name !== 'tcp_connect') return null;
  const sock = ((kprobe.args as Obj[] | undefined) ?? []).map((a) => a.sock_arg as Obj | undefined).find((s) => s !== undefined);
  if (!sock) return null;
  const process = (kprobe.process as Obj | undefined) ?? {};
  const parent = kprobe.parent as Obj | undefined;
  const pod = process.pod as Obj | undefined;
  const container = pod?.container as Obj | undefined;
  const ancestors = ((kprobe.ancestors as Obj[] | undefined) ?? []).map((a) => (typeof a.binary === 'string' ? a.binary : ''));
  return {
    atMs: timeMs(message.time),
    podNamespace: (pod?.namespace as string | undefined) ?? '',
    podName: (pod?.name as string | undefined) ?? '',
    containerName: (container?.name as string | undefined) || null,
    pid: wrapped(process.pid),
    execId: (process.exec_id as string | undefined) ?? '',
    parentExecId: (process.parent_exec_id as string | undefined) ?? '',
    binary: (process.binary as string | undefined) ?? '',
    arguments: (process.arguments as string | undefined) ?? '',
    parents: [typeof parent?.binary === 'string' ? parent.binary : '', ...ancestors].filter((b) => b !== ''),
    saddr: (sock.saddr as string | undefined) ?? '',
    daddr: (sock.daddr as string | undefined) ?? '',
    sport: Number(sock.sport ?? 0),
    dport: Number(sock.dport ?? 0),
  };
}
