// The causal trail (ADR 1604): what a caller's process tree did after a model's answer. Each finished call whose
// caller Tetragon named (an exec_id) is kept with its tool calls; each exec, exit, connect and file write of the
// pod whose process is that caller or a descendant of it, stamped after the answer ended and within the window,
// is linked to the latest such call. Tetragon's events and the sidecar's spans race (a span waits for its
// attribution), so every action also waits a short while in a pending buffer: a call that arrives later and
// ended later takes it over. Everything is in memory and bounded; what a bound pushes out is counted by reason.

import type { Logger } from 'pino';
import type { Span, SpanProcess, SpanToolCall } from '../spans/span.ts';
import type { TrailAction } from './trail-event.ts';

export type TrailDropReason = 'trace' | 'call' | 'action' | 'process' | 'pending';

export interface TrailLimits {
  /** Calls kept of one trace: an agent may send one trace id for a whole session of calls. */
  maxCallsPerTrace: number;
  /** Actions linked to the calls of one trace. */
  maxActionsPerTrace: number;
  /** Actions linked in all: past it the oldest traces are forgotten, so memory stays bounded whatever maxTraces is. */
  maxActions: number;
  /** exec_id -> parent exec_id entries, to find a descendant whose events carry only its parent. */
  maxProcesses: number;
  /** Actions waiting for a call that may still arrive. */
  maxPending: number;
  /** Recent calls kept per caller exec_id for linking. */
  callsPerProcess: number;
}

export const TRAIL_LIMITS: TrailLimits = { maxCallsPerTrace: 256, maxActionsPerTrace: 500, maxActions: 20_000, maxProcesses: 8_192, maxPending: 2_048, callsPerProcess: 32 };

export interface TrailCall {
  traceId: string;
  spanId: string;
  model: string;
  route: string;
  startedMs: number;
  endedMs: number;
  process: SpanProcess;
  execId: string;
  toolCalls: SpanToolCall[];
  actions: TrailAction[];
}

interface TrailTrace {
  calls: TrailCall[];
  actions: number;
}

interface Pending {
  action: TrailAction;
  chain: string[];
  call: TrailCall | null;
  heldUntilMs: number;
}

export interface TrailSettings {
  windowMs: number;
  maxTraces: number;
  /** How long an action waits for a call still held by the attribution window. */
  holdMs: number;
  /** The sidecar's ports: a connect there is the caller's next call, not an action. */
  sidecarPorts: ReadonlySet<number>;
}

/** How far up a process tree is walked: deeper trees are not a tool's. */
const MAX_DEPTH = 64;
const DROP_LOG_INTERVAL_MS = 60_000;

export class TrailKeeper {
  readonly #limits: TrailLimits;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #traces = new Map<string, TrailTrace>();
  readonly #callsByExec = new Map<string, TrailCall[]>();
  readonly #parents = new Map<string, string | null>();
  readonly #pending: Pending[] = [];
  readonly #drops = new Map<TrailDropReason, number>();
  #settings: TrailSettings;
  /** Actions linked to the traces kept. */
  #linked = 0;
  #lastDropLogMs = -Infinity;
  #droppedSinceLog = 0;

  constructor(opts: { settings: TrailSettings; logger: Logger; limits?: TrailLimits; now?: () => number }) {
    this.#settings = opts.settings;
    this.#logger = opts.logger;
    this.#limits = opts.limits ?? TRAIL_LIMITS;
    this.#now = opts.now ?? Date.now;
  }

  configure(settings: TrailSettings): void {
    this.#settings = settings;
    while (this.#traces.size > settings.maxTraces) this.#forgetOldestTrace();
  }

  get windowMs(): number {
    return this.#settings.windowMs;
  }

  /** Entries pushed out by a bound, by which bound. */
  drops(): ReadonlyMap<TrailDropReason, number> {
    return this.#drops;
  }

  /** The calls of a trace with their linked actions, oldest first; undefined when none is kept. */
  calls(traceId: string): readonly TrailCall[] | undefined {
    return this.#traces.get(traceId)?.calls;
  }

  /** A finished call's span: kept when its caller has an exec_id (a call's span, not an attempt's). */
  onCall(span: Span): void {
    const execId = span.process?.execId;
    if (span.attempt !== null || !span.process || !execId) return;
    const startedMs = Date.parse(span.startTime);
    const call: TrailCall = {
      traceId: span.traceId,
      spanId: span.spanId,
      model: span.model,
      route: span.route,
      startedMs,
      endedMs: startedMs + Math.round(span.durationMs),
      process: span.process,
      execId,
      toolCalls: span.toolCalls ?? [],
      actions: [],
    };
    let trace = this.#traces.get(call.traceId);
    if (!trace) {
      if (this.#traces.size >= this.#settings.maxTraces) this.#forgetOldestTrace();
      trace = { calls: [], actions: 0 };
      this.#traces.set(call.traceId, trace);
    }
    if (trace.calls.length >= this.#limits.maxCallsPerTrace) this.#forgetCall(trace, trace.calls[0]!);
    trace.calls.push(call);
    const ofExec = this.#callsByExec.get(execId) ?? [];
    ofExec.push(call);
    if (ofExec.length > this.#limits.callsPerProcess) ofExec.shift();
    this.#callsByExec.set(execId, ofExec);
    this.#claimPending(call);
  }

  /** An action of the pod: linked to its call now, or held for a call still on its way. */
  onAction(action: TrailAction): void {
    if (action.kind === 'connect' && action.dport !== undefined && this.#settings.sidecarPorts.has(action.dport)) return;
    if (action.kind === 'exec') this.#noteProcess(action.execId, action.parentExecId);
    const chain = this.#chain(action);
    const call = this.#latestCall(chain, action.atMs);
    if (call && !this.#link(call, action)) return;
    this.#hold({ action, chain, call: call ?? null, heldUntilMs: this.#now() + this.#settings.holdMs });
  }

  /** The exec_ids from the action's process up: its own, its parent's, the ancestors the agent sent, then what the exec events said. */
  #chain(action: TrailAction): string[] {
    const chain = [action.execId];
    const seen = new Set(chain);
    const add = (id: string | null | undefined): boolean => {
      if (!id || seen.has(id) || chain.length >= MAX_DEPTH) return false;
      seen.add(id);
      chain.push(id);
      return true;
    };
    add(action.parentExecId);
    for (const id of action.ancestors) add(id);
    let next = this.#parents.get(chain[chain.length - 1]!);
    while (add(next)) next = this.#parents.get(next!);
    return chain;
  }

  #latestCall(chain: readonly string[], atMs: number): TrailCall | undefined {
    let best: TrailCall | undefined;
    for (const id of chain) {
      for (const call of this.#callsByExec.get(id) ?? []) {
        if (!this.#inWindow(call, atMs)) continue;
        if (best === undefined || call.endedMs > best.endedMs) best = call;
      }
    }
    return best;
  }

  #inWindow(call: TrailCall, atMs: number): boolean {
    return atMs >= call.endedMs && atMs - call.endedMs <= this.#settings.windowMs;
  }

  /** Links an action to a call unless its trace is full (counted). */
  #link(call: TrailCall, action: TrailAction): boolean {
    const trace = this.#traces.get(call.traceId);
    if (!trace) return false;
    if (trace.actions >= this.#limits.maxActionsPerTrace) {
      this.#drop('action');
      return false;
    }
    while (this.#linked >= this.#limits.maxActions && this.#traces.keys().next().value !== call.traceId) this.#forgetOldestTrace();
    if (this.#linked >= this.#limits.maxActions) {
      this.#drop('action');
      return false;
    }
    trace.actions++;
    this.#linked++;
    call.actions.push(action);
    return true;
  }

  #unlink(call: TrailCall, action: TrailAction): void {
    const at = call.actions.indexOf(action);
    if (at === -1) return;
    call.actions.splice(at, 1);
    const trace = this.#traces.get(call.traceId);
    if (!trace) return;
    trace.actions--;
    this.#linked--;
  }

  /** A call just arrived: held actions of its tree in its window move to it when it ended later than their call. */
  #claimPending(call: TrailCall): void {
    this.#expirePending();
    for (const held of this.#pending) {
      if (!held.chain.includes(call.execId) || !this.#inWindow(call, held.action.atMs)) continue;
      if (held.call !== null && held.call.endedMs >= call.endedMs) continue;
      if (!this.#link(call, held.action)) continue;
      if (held.call !== null) this.#unlink(held.call, held.action);
      held.call = call;
    }
  }

  #hold(entry: Pending): void {
    this.#expirePending();
    if (this.#pending.length >= this.#limits.maxPending) {
      const oldest = this.#pending.shift()!;
      // An action already linked only loses its chance to move to a later call; an unlinked one is lost.
      if (oldest.call === null) this.#drop('pending');
    }
    this.#pending.push(entry);
  }

  #expirePending(): void {
    const now = this.#now();
    let expired = 0;
    while (expired < this.#pending.length && this.#pending[expired]!.heldUntilMs <= now) expired++;
    if (expired > 0) this.#pending.splice(0, expired);
  }

  #noteProcess(execId: string, parentExecId: string | null): void {
    if (!this.#parents.has(execId) && this.#parents.size >= this.#limits.maxProcesses) {
      this.#parents.delete(this.#parents.keys().next().value!);
      this.#drop('process');
    }
    this.#parents.set(execId, parentExecId);
  }

  #forgetOldestTrace(): void {
    const [traceId, trace] = this.#traces.entries().next().value!;
    this.#traces.delete(traceId);
    this.#linked -= trace.actions;
    for (const call of trace.calls) this.#unindex(call);
    this.#drop('trace');
  }

  /** The oldest call of a trace that holds maxCallsPerTrace, with its actions. */
  #forgetCall(trace: TrailTrace, call: TrailCall): void {
    trace.calls.shift();
    trace.actions -= call.actions.length;
    this.#linked -= call.actions.length;
    this.#unindex(call);
    this.#drop('call');
  }

  /** A forgotten call is no longer found for linking, and held actions linked to it are free again. */
  #unindex(call: TrailCall): void {
    const ofExec = this.#callsByExec.get(call.execId);
    if (ofExec) {
      const left = ofExec.filter((c) => c !== call);
      if (left.length > 0) this.#callsByExec.set(call.execId, left);
      else this.#callsByExec.delete(call.execId);
    }
    for (const held of this.#pending) if (held.call === call) held.call = null;
  }

  #drop(reason: TrailDropReason): void {
    this.#drops.set(reason, (this.#drops.get(reason) ?? 0) + 1);
    this.#droppedSinceLog++;
    const now = this.#now();
    if (now - this.#lastDropLogMs < DROP_LOG_INTERVAL_MS) return;
    this.#logger.warn({ dropped: this.#droppedSinceLog, byReason: Object.fromEntries(this.#drops) }, 'causal trail dropped entries');
    this.#lastDropLogMs = now;
    this.#droppedSinceLog = 0;
  }
}
