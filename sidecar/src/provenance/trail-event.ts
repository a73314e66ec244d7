// A Tetragon event read as one action of the causal trail (ADR 1604): a process_exec, a process_exit, a
// tcp_connect kprobe, or a kprobe with a file argument (a file-monitoring policy such as
// security_file_permission). What it keeps is what the trail shows and joins on: the process's exec_id, its
// parent's, and the ancestors' when the agent runs with --enable-ancestors (provenance.md §1.2, §6).

import type { TetragonEvent } from '../audit/tetragon-protocol.ts';
import { type ArgumentPolicy, splitTetragonArguments } from './argument-redaction.ts';
import { decodedEvent, timeMs, wrapped } from './tcp-connect-event.ts';

export type TrailActionKind = 'exec' | 'exit' | 'connect' | 'file';

export interface TrailAction {
  kind: TrailActionKind;
  /** Event time, epoch ms (the agent's clock, on the sidecar's node). */
  atMs: number;
  pid: number | null;
  execId: string;
  parentExecId: string | null;
  /** The ancestors' exec_ids the agent sent, nearest first; empty without --enable-ancestors. */
  ancestors: string[];
  binary: string;
  /** An exec's argv with argv[0], per provenance.arguments; null when arguments are not recorded. */
  arguments?: string[] | null;
  /** A connect's daddr:dport. */
  destination?: string;
  dport?: number;
  /** A file action's path. */
  path?: string;
  /** An exit's status and signal. */
  exitCode?: number;
  signal?: string;
}

type Obj = Record<string, unknown>;

/** An exec's arguments kept at most (Tetragon's own limit is larger): the trail holds thousands of them. */
const MAX_ARGUMENTS_CHARS = 1024;

/** The kernel's MAY_WRITE bit in security_file_permission's mask: a policy that also posts reads gets them skipped. */
const MAY_WRITE = 0x2;

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function base(kind: TrailActionKind, atMs: number, body: Obj): TrailAction {
  const process = (body.process as Obj | undefined) ?? {};
  const ancestors = ((body.ancestors as Obj[] | undefined) ?? []).map((a) => str(a.exec_id)).filter((id) => id !== '');
  return {
    kind,
    atMs,
    pid: wrapped(process.pid),
    execId: str(process.exec_id),
    parentExecId: str(process.parent_exec_id) || str((body.parent as Obj | undefined)?.exec_id) || null,
    ancestors,
    binary: str(process.binary),
  };
}

function kprobeAction(atMs: number, kprobe: Obj): TrailAction | null {
  const args = (kprobe.args as Obj[] | undefined) ?? [];
  if (kprobe.function_name === 'tcp_connect') {
    const sock = args.map((a) => a.sock_arg as Obj | undefined).find((s) => s !== undefined);
    if (!sock) return null;
    const daddr = str(sock.daddr);
    const dport = Number(sock.dport ?? 0);
    return { ...base('connect', atMs, kprobe), destination: `${daddr.includes(':') ? `[${daddr}]` : daddr}:${dport}`, dport };
  }
  const file = args.map((a) => (a.file_arg ?? a.path_arg) as Obj | undefined).find((f) => f !== undefined);
  if (!file) return null;
  // A decoded oneof member that is not set still reads its default (0) from the prototype: ask which is set.
  const mask = args.filter((a) => Object.hasOwn(a, 'int_arg')).map((a) => a.int_arg as number)[0];
  if (kprobe.function_name === 'security_file_permission' && mask !== undefined && (mask & MAY_WRITE) === 0) return null;
  return { ...base('file', atMs, kprobe), path: str(file.path) };
}

/** The trail action in `event`, or null for an event that is none (another kprobe, a read, a tracepoint). */
export function readTrailAction(event: TetragonEvent, policy: ArgumentPolicy): TrailAction | null {
  const type = event.info.type;
  if (type !== 'process_exec' && type !== 'process_exit' && type !== 'process_kprobe') return null;
  const message = decodedEvent(event);
  const body = message[type] as Obj | undefined;
  if (!body) return null;
  const atMs = timeMs(message.time);
  let action: TrailAction | null;
  if (type === 'process_exec') {
    const process = (body.process as Obj | undefined) ?? {};
    const args = splitTetragonArguments(str(process.arguments).slice(0, MAX_ARGUMENTS_CHARS));
    action = { ...base('exec', atMs, body), arguments: policy.commandArgs(str(process.binary), args) };
  } else if (type === 'process_exit') {
    action = { ...base('exit', atMs, body), exitCode: Number(body.status ?? 0), ...(str(body.signal) ? { signal: str(body.signal) } : {}) };
  } else {
    action = kprobeAction(atMs, body);
  }
  return action !== null && action.execId !== '' ? action : null;
}
