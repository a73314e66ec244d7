// Keeps provenance in step with the live config (ADR 1600): with a `provenance` section on, every metered
// request's connection is noted (a hook that only reads the socket), finished spans go through the span gate,
// and the Tetragon part is loaded and configured; with it off, spans pass straight through and nothing is
// loaded. The audit fan-out hands its events to `tap`, so one stream serves both when both are on.

import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { ProvenanceConfig } from '../../../contracts/provenance-config.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { AuditPlacement } from '../audit/audit-placement.ts';
import type { TetragonEvent } from '../audit/tetragon-protocol.ts';
import type { ConfigStore } from '../config/config-store.ts';
import type { SpanProcess } from '../spans/span.ts';
import { ArgumentPolicy, splitTetragonArguments } from './argument-redaction.ts';
import { BypassReportQueue } from './bypass-reports.ts';
import { type ConnectionState, ConnectionTracker } from './connection-tracker.ts';
import type { ProvenanceHealth, ProvenanceRuntime } from './provenance-runtime.ts';
import { SpanGate, type SpanRecorder } from './span-gate.ts';
import { TrailKeeper, type TrailSettings } from './trail-keeper.ts';
import { type TrailJson, trailJson } from './trail-view.ts';
import type { TcpConnect } from './tcp-connect-event.ts';

/** How much longer than the attribution window an action waits for its call's span (delivery lag). */
const TRAIL_HOLD_SLACK_MS = 5_000;

/** Requests that record spans: the /proxy routes and the /v1 gateway. */
function metered(url: string): boolean {
  return url.startsWith('/proxy/') || url === '/v1' || url.startsWith('/v1/');
}

export interface ProvenanceCounters {
  bypass: ReadonlyMap<string, number>;
  /** Bypass entries the queue to the operator had no room for (ADR 1605). */
  bypassReportsDropped: number;
}

export class ProvenanceController {
  readonly gate: SpanGate;
  /** Where the audit fan-out hands every event it reads. */
  readonly tap = { deliver: (event: TetragonEvent): void => this.#runtime?.deliver(event) };
  /** Bypasses on their way to the operator (ADR 1605); kept across config changes, read by the operator link. */
  readonly bypassReports: BypassReportQueue;
  readonly #placement: AuditPlacement;
  readonly #logger: Logger;
  #tracker: ConnectionTracker | null = null;
  #procfs = false;
  #policy = new ArgumentPolicy('none', []);
  #runtime: ProvenanceRuntime | undefined;
  #trail: TrailKeeper | null = null;
  #applied = 'null';
  #chain: Promise<void> = Promise.resolve();
  #unsubscribe: () => void;
  #closed = false;

  constructor(opts: { store: ConfigStore; spans: SpanRecorder; placement: AuditPlacement; logger: Logger }) {
    // A span reaches the causal trail when the gate lets it go: only then does it name its caller.
    this.gate = new SpanGate({
      record: (span) => {
        this.#trail?.onCall(span);
        opts.spans.record(span);
      },
    });
    this.#placement = opts.placement;
    this.#logger = opts.logger.child({ component: 'provenance' });
    this.bypassReports = new BypassReportQueue(this.#logger);
    this.#apply(opts.store.get());
    this.#unsubscribe = opts.store.subscribe((snapshot) => this.#apply(snapshot.config));
  }

  /** Notes each metered request's connection; reads the socket only, and only while provenance is on. */
  install(app: FastifyInstance): void {
    // Noted when accepted: closest in time to the client's connect, and a /proc lookup starts while the client
    // still holds the socket (a short call's client can be gone by the time its span is written).
    app.server.on('connection', (socket: Socket) => {
      const fresh = this.#tracker?.noteConnection(socket, Date.now());
      if (fresh) this.#lookUp(fresh);
    });
    app.addHook('onRequest', (request, _reply, done) => {
      const tracker = this.#tracker;
      if (tracker !== null && metered(request.url)) {
        const fresh = tracker.noteRequest(request.id, request.raw.socket, Date.now());
        if (fresh) this.#lookUp(fresh);
      }
      done();
    });
  }

  #lookUp(state: ConnectionState): void {
    if (state.process === null && this.#procfs) this.#runtime?.lookupProcfs(state);
  }

  health(): ProvenanceHealth | { enabled: false } {
    return this.#tracker !== null && this.#runtime ? this.#runtime.health() : { enabled: false };
  }

  counters(): ProvenanceCounters {
    return { bypass: this.#runtime?.bypassCounts() ?? new Map(), bypassReportsDropped: this.bypassReports.dropped };
  }

  /** The causal trail of a trace (ADR 1604); null when none is kept or the trail is off. */
  trail(traceId: string): TrailJson | null {
    const calls = this.#trail?.calls(traceId);
    return calls && this.#trail ? trailJson(traceId, this.#trail.windowMs, calls) : null;
  }

  /** What the trail's bounds pushed out, by bound. */
  trailDrops(): ReadonlyMap<string, number> {
    return this.#trail?.drops() ?? new Map();
  }

  /** Kept across config changes while it stays on, like the tracker. */
  #trailFor(config: RuntimeConfig, wanted: ProvenanceConfig): TrailKeeper | null {
    if (!wanted.trail.enabled) return null;
    const settings: TrailSettings = {
      windowMs: wanted.trail.windowMs,
      maxTraces: wanted.trail.maxTraces,
      // An action can arrive before its call's span, which waits up to the attribution window.
      holdMs: wanted.attributionWindowMs + TRAIL_HOLD_SLACK_MS,
      sidecarPorts: new Set([config.server.port, config.local.lmstudioPort].filter((p) => p > 0)),
    };
    if (this.#trail === null) return new TrailKeeper({ settings, logger: this.#logger });
    this.#trail.configure(settings);
    return this.#trail;
  }

  /** Resolves once every config change seen so far has been applied. */
  settled(): Promise<void> {
    return this.#chain;
  }

  #apply(config: RuntimeConfig): void {
    const wanted = config.provenance?.enabled ? config.provenance : undefined;
    // The audit section decides which stream is read, so its being on is part of what is applied.
    const key = JSON.stringify([wanted ?? null, wanted ? config.audit?.enabled === true : null, config.server.port, config.upstreams, config.routes]);
    if (key === this.#applied || this.#closed) return;
    this.#applied = key;
    this.#chain = this.#chain.then(async () => {
      if (this.#closed) return;
      if (!wanted) {
        this.#tracker = null;
        this.#trail = null;
        this.gate.follow(null, 0);
        await this.#runtime?.stop();
        this.#runtime = undefined;
        return;
      }
      try {
        const policy = new ArgumentPolicy(wanted.arguments, wanted.redact);
        this.#policy = policy;
        // Kept across config changes while provenance stays on: connections already noted stay attributable.
        const tracker = this.#tracker ?? new ConnectionTracker({ describe: (event) => describeConnect(event, this.#policy), aheadMs: wanted.attributionWindowMs });
        tracker.aheadMs = wanted.attributionWindowMs;
        // Loaded on the first provenance section only (ADR 0003).
        const { ProvenanceRuntime } = await import('./provenance-runtime.ts');
        this.#runtime ??= new ProvenanceRuntime(this.#placement, this.#logger, this.bypassReports);
        const trail = this.#trailFor(config, wanted);
        this.#runtime.followTrail(trail);
        await this.#runtime.configure(config, wanted, tracker, policy);
        this.#trail = trail;
        this.#tracker = tracker;
        this.#procfs = wanted.procfs;
        this.gate.follow(tracker, wanted.attributionWindowMs);
      } catch (error) {
        this.#logger.error({ err: (error as Error).message }, 'provenance could not start');
      }
    });
  }

  /** SIGTERM: held spans go on with what is known; the stream ends. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe();
    await this.#chain;
    this.gate.releaseAll();
    await this.#runtime?.stop();
  }
}

/** What a span records of the process behind a Tetragon connect. */
function describeConnect(event: TcpConnect, policy: ArgumentPolicy): SpanProcess {
  return {
    attribution: 'tetragon',
    pid: event.pid,
    executablePath: event.binary || null,
    commandArgs: policy.commandArgs(event.binary, splitTetragonArguments(event.arguments)),
    parentExecutables: event.parents,
    containerName: event.containerName,
    // What the causal trail joins on: the caller's later execs and connects descend from it (ADR 1604).
    execId: event.execId || null,
  };
}
