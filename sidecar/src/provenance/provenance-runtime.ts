// The part of provenance that reads Tetragon, loaded only when a `provenance` section is on (ADR 0003: gRPC and
// protobufjs stay out of a sidecar that does not use them). It reads the pod's tcp_connect events from one
// stream per sidecar (ADR 1600): the audit fan-out's when `audit` is on (its events arrive through deliver()),
// else a stream of its own that asks only for the pod's kprobe events. Connects into the sidecar's ports go to
// the connection tracker; connects to provider endpoints go to the bypass detector (ADR 1601).

import type { Logger } from 'pino';
import type { ProvenanceConfig } from '../../../contracts/provenance-config.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { type AuditPlacement, TETRAGON_PORT } from '../audit/audit-placement.ts';
import type { GetEventsRequest, TetragonEvent } from '../audit/tetragon-protocol.ts';
import { type SourceStatus, TetragonSource } from '../audit/tetragon-source.ts';
import type { SpanProcess } from '../spans/span.ts';
import type { ArgumentPolicy } from './argument-redaction.ts';
import { BypassDetector } from './bypass-detector.ts';
import type { BypassReportQueue } from './bypass-reports.ts';
import type { ConnectionState, ConnectionTracker } from './connection-tracker.ts';
import { lookupProcfs } from './procfs-lookup.ts';
import { ProviderEndpoints, providerHosts } from './provider-endpoints.ts';
import { readTcpConnect } from './tcp-connect-event.ts';
import { readTrailAction } from './trail-event.ts';
import type { TrailKeeper } from './trail-keeper.ts';

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The agent's address: the configured one, the socket the chart mounts, or the node's port. */
export function agentAddress(config: ProvenanceConfig, placement: AuditPlacement): string {
  if (config.address) return config.address;
  if (placement.hostSocket) return placement.hostSocket;
  if (placement.hostIp) return `${placement.hostIp.includes(':') ? `[${placement.hostIp}]` : placement.hostIp}:${TETRAGON_PORT}`;
  return `127.0.0.1:${TETRAGON_PORT}`;
}

/** Only the pod's own kprobe events, when the sidecar knows its pod; its execs and exits too for the causal trail (ADR 1604). */
export function provenanceRequest(placement: AuditPlacement, trail = false): GetEventsRequest {
  const eventSet = trail ? ['PROCESS_EXEC', 'PROCESS_EXIT', 'PROCESS_KPROBE'] : ['PROCESS_KPROBE'];
  if (placement.podName === undefined || placement.podNamespace === undefined) return { allow_list: [{ event_set: eventSet }] };
  return { allow_list: [{ namespace: [placement.podNamespace], pod_regex: [`^${escapeRegex(placement.podName)}$`], event_set: eventSet }] };
}

export interface ProvenanceHealth {
  enabled: true;
  /** `audit` when the audit fan-out's stream serves provenance too. */
  stream: 'own' | 'audit';
  source?: SourceStatus;
  providerAddresses: number;
  bypass: Record<string, number>;
}

export class ProvenanceRuntime {
  readonly #placement: AuditPlacement;
  readonly #logger: Logger;
  readonly #endpoints = new ProviderEndpoints();
  readonly #bypassCounts = new Map<string, number>();
  #tracker: ConnectionTracker | null = null;
  #policy: ArgumentPolicy | null = null;
  #bypass: BypassDetector | null = null;
  #ports = new Set<number>();
  #source: TetragonSource | null = null;
  #sourceKey = '';
  #resolveTimer: NodeJS.Timeout | null = null;
  #trail: TrailKeeper | null = null;

  readonly #reports: BypassReportQueue | undefined;

  /** `reports`: where bypasses go on to the operator (ADR 1605). */
  constructor(placement: AuditPlacement, logger: Logger, reports?: BypassReportQueue) {
    this.#placement = placement;
    this.#logger = logger;
    this.#reports = reports;
  }

  /** Applies a config (provenance on): ports, provider endpoints, the bypass detector and which stream to read. */
  async configure(config: RuntimeConfig, provenance: ProvenanceConfig, tracker: ConnectionTracker, policy: ArgumentPolicy): Promise<void> {
    this.#tracker = tracker;
    this.#policy = policy;
    this.#ports = new Set([config.server.port, config.local.lmstudioPort].filter((p) => p > 0));
    // In a pod the agent prints host PIDs, which the sidecar's own PID says nothing about: its container name does.
    const ownPid = this.#placement.podName === undefined ? process.pid : -1;
    this.#bypass = provenance.bypass.enabled
      ? new BypassDetector({
          endpoints: this.#endpoints,
          sidecarContainer: provenance.sidecarContainer,
          ownPid,
          logger: this.#logger,
          counts: this.#bypassCounts,
          ...(this.#reports ? { reports: this.#reports } : {}),
        })
      : null;
    if (this.#resolveTimer) clearInterval(this.#resolveTimer);
    this.#resolveTimer = null;
    if (provenance.bypass.enabled) {
      const hosts = providerHosts(config, provenance.bypass.extraHosts);
      const refresh = () =>
        this.#endpoints.refresh(hosts).catch((error: unknown) => this.#logger.warn({ err: (error as Error).message }, 'provider endpoints could not be resolved'));
      await refresh();
      this.#resolveTimer = setInterval(() => void refresh(), provenance.bypass.resolveIntervalMs);
      this.#resolveTimer.unref();
    }
    await this.#followStream(config, provenance);
  }

  /** One stream per sidecar: the audit fan-out's when it runs, else this runtime's own. */
  async #followStream(config: RuntimeConfig, provenance: ProvenanceConfig): Promise<void> {
    const auditOn = config.audit?.enabled === true;
    const address = agentAddress(provenance, this.#placement);
    // The trail widens the filter, so turning it on or off opens the stream again.
    const key = auditOn ? 'audit' : `${address} trail=${this.#trail !== null}`;
    if (key === this.#sourceKey) return;
    this.#sourceKey = key;
    await this.#source?.stop();
    this.#source = null;
    if (auditOn) {
      this.#logger.info('provenance reads the audit fan-out stream');
      return;
    }
    const request = provenanceRequest(this.#placement, this.#trail !== null);
    this.#source = new TetragonSource({ address, request, onEvent: (event) => this.deliver(event), logger: this.#logger });
    this.#logger.info({ address, filter: request }, 'provenance stream starting');
    this.#source.start();
  }

  /** The causal trail this runtime feeds, or null; set before configure(), which picks the stream's filter. */
  followTrail(trail: TrailKeeper | null): void {
    this.#trail = trail;
  }

  /** Every event of the stream; only this pod's are read further: tcp_connect kprobes, and the trail's actions. */
  deliver(event: TetragonEvent): void {
    const { podName, podNamespace } = this.#placement;
    if (podName !== undefined && (event.info.podName !== podName || event.info.podNamespace !== podNamespace)) return;
    if (this.#trail !== null && this.#policy !== null) {
      const action = readTrailAction(event, this.#policy);
      if (action !== null) this.#trail.onAction(action);
    }
    const connect = readTcpConnect(event);
    if (connect === null) return;
    if (this.#ports.has(connect.dport)) this.#tracker?.onConnect(connect);
    this.#bypass?.onConnect(connect);
  }

  /** /proc lookup of a new connection, after the request has gone on; Tetragon may have answered first. */
  lookupProcfs(state: ConnectionState): void {
    void lookupProcfs(state.remotePort, state.localPort)
      .then((found) => {
        if (found === null || this.#tracker === null || this.#policy === null) return;
        const binary = found.executablePath ?? found.argv[0] ?? '';
        const process: SpanProcess = {
          attribution: 'procfs',
          pid: found.pid,
          executablePath: found.executablePath,
          commandArgs: this.#policy.commandArgs(binary, found.argv.slice(1)),
          parentExecutables: found.parents,
          containerName: null,
        };
        this.#tracker.resolve(state, process);
      })
      .catch((error: unknown) => this.#logger.debug({ err: (error as Error).message }, 'provenance /proc lookup failed'));
  }

  health(): ProvenanceHealth {
    return {
      enabled: true,
      stream: this.#sourceKey === 'audit' ? 'audit' : 'own',
      ...(this.#source ? { source: this.#source.status() } : {}),
      providerAddresses: this.#endpoints.size,
      bypass: Object.fromEntries(this.#bypassCounts),
    };
  }

  bypassCounts(): ReadonlyMap<string, number> {
    return this.#bypassCounts;
  }

  async stop(): Promise<void> {
    if (this.#resolveTimer) clearInterval(this.#resolveTimer);
    this.#resolveTimer = null;
    this.#sourceKey = '';
    await this.#source?.stop();
    this.#source = null;
  }
}
