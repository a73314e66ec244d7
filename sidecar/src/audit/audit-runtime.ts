// One running audit fan-out: the Tetragon source feeding the router and its sinks, built from an `audit`
// config and where this engine runs (a pod's sidecar or a server). Stopping it ends the stream first, then
// drains every sink within the drain deadline and logs the totals.

import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AuditConfig } from '../../../contracts/audit-config.ts';
import { TETRAGON_PORT, type AuditPlacement } from './audit-placement.ts';
import { AuditRouter } from './audit-router.ts';
import type { DeadLetterSettings } from './dead-letter.ts';
import type { AuditSink } from './sinks/audit-sink.ts';
import type { SinkStatus } from './sink-worker.ts';
import { createSink } from './sinks/create-sink.ts';
import type { GetEventsRequest, TetragonEvent, TetragonFilter } from './tetragon-protocol.ts';
import { type SourceStatus, TetragonSource } from './tetragon-source.ts';

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export interface ResolvedSource {
  address: string;
  request: GetEventsRequest;
  sender: string;
}

/**
 * The agent address, the filter and the sender name. A sidecar asks only for its own pod's events unless the
 * config names a filter; an engine outside a pod takes the filter from the config (none: every event).
 */
export function resolveSource(config: AuditConfig, placement: AuditPlacement): ResolvedSource {
  const inPod = placement.podName !== undefined && placement.podNamespace !== undefined;
  const address =
    config.source.address ??
    placement.hostSocket ??
    (placement.hostIp ? `${placement.hostIp.includes(':') ? `[${placement.hostIp}]` : placement.hostIp}:${TETRAGON_PORT}` : `127.0.0.1:${TETRAGON_PORT}`);
  let allow: TetragonFilter[] = [];
  if (config.source.allow) {
    allow = config.source.allow.map((f) => ({ ...(f.namespace ? { namespace: f.namespace } : {}), ...(f.podRegex ? { pod_regex: f.podRegex } : {}) }));
  } else if (inPod) {
    allow = [{ namespace: [placement.podNamespace!], pod_regex: [`^${escapeRegex(placement.podName!)}$`] }];
  }
  const sender = config.sender ?? (inPod ? `${placement.podNamespace}/${placement.podName}` : hostname());
  return { address, request: allow.length ? { allow_list: allow } : {}, sender };
}

/** A pod's state directory is a 64 MiB memory volume shared with the span file and the config snapshot. */
export const POD_DEAD_LETTER_MAX_BYTES = 16 * 1024 * 1024;

/** Where dead letters go when the config names no path, and how much of it they may take. */
export function deadLetterFile(config: AuditConfig, placement: AuditPlacement): { path: string; maxBytes: number } {
  if (config.deadLetter.path) return { path: config.deadLetter.path, maxBytes: config.deadLetter.maxBytes };
  if (placement.stateDir) {
    return { path: join(placement.stateDir, 'audit-dead-letter.jsonl'), maxBytes: Math.min(config.deadLetter.maxBytes, POD_DEAD_LETTER_MAX_BYTES) };
  }
  return { path: 'tollgate-audit-dead-letter.jsonl', maxBytes: config.deadLetter.maxBytes };
}

export interface AuditHealth {
  enabled: true;
  sender: string;
  source: SourceStatus;
  filter: GetEventsRequest;
  sinks: SinkStatus[];
}

/** Another reader of the fan-out's stream (provenance): handed each event after the router, never waited on. */
export interface EventTap {
  deliver(event: TetragonEvent): void;
}

export class AuditRuntime {
  readonly config: AuditConfig;
  readonly resolved: ResolvedSource;
  #source: TetragonSource;
  #router: AuditRouter;
  #logger: Logger;
  #stopped: Promise<SinkStatus[]> | undefined;

  /** Builds the runtime; each sink kind's module (a gRPC client, the BigQuery SDK) is loaded only if configured. */
  static async create(config: AuditConfig, placement: AuditPlacement, logger: Logger, tap?: EventTap): Promise<AuditRuntime> {
    const child = logger.child({ component: 'audit' });
    const resolved = resolveSource(config, placement);
    const sinks = await Promise.all(config.sinks.map((s) => createSink(s, { sender: resolved.sender, logger: child })));
    return new AuditRuntime({ config, resolved, sinks, deadLetter: deadLetterFile(config, placement), logger: child, tap });
  }

  private constructor({
    config,
    resolved,
    sinks,
    deadLetter,
    logger,
    tap,
  }: {
    config: AuditConfig;
    resolved: ResolvedSource;
    sinks: AuditSink[];
    deadLetter: DeadLetterSettings;
    logger: Logger;
    tap: EventTap | undefined;
  }) {
    this.config = config;
    this.#logger = logger;
    this.resolved = resolved;
    this.#router = new AuditRouter({
      sinks,
      worker: {
        maxEvents: config.queue.maxEvents,
        maxBytes: config.queue.maxBytes,
        whenFull: config.queue.whenFull,
        retry: { maxAttempts: config.retry.maxAttempts, initialMs: config.retry.initialBackoffMs, maxMs: config.retry.maxBackoffMs },
      },
      deadLetter,
      logger: this.#logger,
    });
    this.#source = new TetragonSource({
      address: this.resolved.address,
      request: this.resolved.request,
      onEvent: (event) => {
        this.#router.publish(event);
        tap?.deliver(event);
      },
      logger: this.#logger,
    });
  }

  start(): void {
    this.#logger.info(
      { address: this.resolved.address, filter: this.resolved.request, sender: this.resolved.sender, sinks: this.config.sinks.map((s) => `${s.name} (${s.kind})`) },
      'audit fan-out starting',
    );
    if (!this.resolved.request.allow_list) this.#logger.warn({ address: this.resolved.address }, 'audit fan-out has no allow filter: it forwards every event of the agent');
    this.#source.start();
  }

  health(): AuditHealth {
    return { enabled: true, sender: this.resolved.sender, source: this.#source.status(), filter: this.resolved.request, sinks: this.#router.sinks() };
  }

  /** Stops reading, drains the sinks until the deadline, logs totals; idempotent. */
  stop(drainTimeoutMs = this.config.drainTimeoutMs): Promise<SinkStatus[]> {
    this.#stopped ??= (async () => {
      const deadline = Date.now() + drainTimeoutMs;
      const before = this.#source.status();
      await this.#source.stop();
      if (!before.connected) {
        // Graceful shutdown names a stream that had already ended on its own: its gap lost events at the source.
        this.#logger.warn(
          { address: this.resolved.address, reason: before.lastDisconnectReason ?? 'never connected', disconnects: before.disconnects, disconnectedMs: before.disconnectedMs },
          'tetragon audit stream had ended before shutdown',
        );
      }
      const totals = await this.#router.drain(deadline);
      const source = this.#source.status();
      this.#logger.info(
        {
          eventsReceived: source.eventsReceived,
          disconnects: source.disconnects,
          disconnectedMs: source.disconnectedMs,
          undecodable: source.undecodable,
          delivered: Object.fromEntries(totals.map((s) => [s.name, s.delivered])),
          dropped: Object.fromEntries(totals.map((s) => [s.name, s.dropped])),
          deadLettered: Object.fromEntries(totals.map((s) => [s.name, s.deadLettered])),
        },
        'audit fan-out stopped',
      );
      return totals;
    })();
    return this.#stopped;
  }
}
