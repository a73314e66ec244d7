// The causal trail of one trace as GET /_local/api/trail/<trace-id> answers it (docs/management-api.md): each
// call with its caller and its answer's tool calls, then what the caller's process tree did, nested so that an
// exec's own connects, file writes, exit and child execs sit under it (call → answer → tool call → exec →
// connection, ADR 1604).

import type { TrailAction } from './trail-event.ts';
import type { TrailCall } from './trail-keeper.ts';

export interface TrailActionJson {
  kind: TrailAction['kind'];
  time: string;
  pid: number | null;
  exec_id: string;
  parent_exec_id: string | null;
  binary: string;
  arguments?: string[] | null;
  destination?: string;
  path?: string;
  exit_code?: number;
  signal?: string;
  children: TrailActionJson[];
}

export interface TrailCallJson {
  span_id: string;
  model: string;
  route: string;
  started: string;
  ended: string;
  process: { pid: number | null; exec_id: string; executable_path: string | null; command_args: string[] | null; container_name: string | null };
  tool_calls: { id: string | null; name: string; arguments_sha256: string }[];
  actions: TrailActionJson[];
}

export interface TrailJson {
  trace_id: string;
  window_ms: number;
  calls: TrailCallJson[];
}

function actionJson(action: TrailAction): TrailActionJson {
  return {
    kind: action.kind,
    time: new Date(action.atMs).toISOString(),
    pid: action.pid,
    exec_id: action.execId,
    parent_exec_id: action.parentExecId,
    binary: action.binary,
    ...(action.kind === 'exec' ? { arguments: action.arguments ?? null } : {}),
    ...(action.destination !== undefined ? { destination: action.destination } : {}),
    ...(action.path !== undefined ? { path: action.path } : {}),
    ...(action.exitCode !== undefined ? { exit_code: action.exitCode } : {}),
    ...(action.signal !== undefined ? { signal: action.signal } : {}),
    children: [],
  };
}

/** The exec node an action hangs under: its own process's (not for an exec), its parent's, an ancestor's. */
function ownerOf(action: TrailAction, execs: ReadonlyMap<string, TrailActionJson>, parentOf: ReadonlyMap<string, string | null>): TrailActionJson | undefined {
  const candidates = [...(action.kind === 'exec' ? [] : [action.execId]), action.parentExecId, ...action.ancestors];
  for (const id of candidates) if (id && execs.has(id)) return execs.get(id);
  // Descendants whose exec the agent reported but whose events carry only their parent: walk the execs seen.
  const seen = new Set<string>();
  let id = action.parentExecId;
  while (id && !seen.has(id)) {
    if (execs.has(id)) return execs.get(id);
    seen.add(id);
    id = parentOf.get(id) ?? null;
  }
  return undefined;
}

/** Actions in time order, each under the nearest exec of its own process or of an ancestor within the call. */
function nest(actions: readonly TrailAction[]): TrailActionJson[] {
  const roots: TrailActionJson[] = [];
  const execs = new Map<string, TrailActionJson>();
  const parentOf = new Map<string, string | null>();
  for (const action of actions) if (action.kind === 'exec') parentOf.set(action.execId, action.parentExecId);
  for (const action of [...actions].sort((a, b) => a.atMs - b.atMs)) {
    const node = actionJson(action);
    (ownerOf(action, execs, parentOf)?.children ?? roots).push(node);
    if (action.kind === 'exec') execs.set(action.execId, node);
  }
  return roots;
}

export function trailJson(traceId: string, windowMs: number, calls: readonly TrailCall[]): TrailJson {
  return {
    trace_id: traceId,
    window_ms: windowMs,
    calls: calls.map((call) => ({
      span_id: call.spanId,
      model: call.model,
      route: call.route,
      started: new Date(call.startedMs).toISOString(),
      ended: new Date(call.endedMs).toISOString(),
      process: {
        pid: call.process.pid,
        exec_id: call.execId,
        executable_path: call.process.executablePath,
        command_args: call.process.commandArgs,
        container_name: call.process.containerName,
      },
      tool_calls: call.toolCalls.map((tool) => ({ id: tool.id, name: tool.name, arguments_sha256: tool.argumentsSha256 })),
      actions: nest(call.actions),
    })),
  };
}
