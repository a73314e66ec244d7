// A connection from the pod to a provider endpoint that did not come from the sidecar (ADR 1601): the app holds
// no provider key when the webhook injected the sidecar, so such a call is either using a key of its own or
// probing. Each one is counted per provider (tollgate_provenance_bypass_total) and logged as
// `provider call bypassed the sidecar`, naming pid, binary and destination; the line is rate-limited per process
// (one per interval, with how many it stands for). The sidecar's own connects are told apart by container name,
// and by pid where the sidecar shares the PID namespace it is seen in. Each log line also queues an entry for the
// operator, which records it as a ProviderBypass Event on the pod (ADR 1605).

import type { Logger } from 'pino';
import type { BypassReportQueue } from './bypass-reports.ts';
import type { ProviderEndpoints } from './provider-endpoints.ts';
import { plainAddress } from './connect-ring.ts';
import type { TcpConnect } from './tcp-connect-event.ts';

export const BYPASS_LOG_INTERVAL_MS = 60_000;
/** Processes remembered for the rate limit; the oldest is forgotten first. */
const MAX_REMEMBERED_PROCESSES = 1024;

export interface BypassDetectorOptions {
  endpoints: ProviderEndpoints;
  sidecarContainer: string;
  /** The sidecar's own pid as the agent would print it (only equal when both see the same PID namespace). */
  ownPid: number;
  logger: Logger;
  /** Counts per provider, kept across config changes (a counter never goes back). */
  counts: Map<string, number>;
  /** Where each logged bypass goes on to the operator (in a pod with an operator). */
  reports?: BypassReportQueue;
  now?: () => number;
}

export class BypassDetector {
  readonly #opts: BypassDetectorOptions;
  readonly #counts: Map<string, number>;
  /** Per process: its last line, and the connects since then (the first of them at `since`). */
  readonly #lastLog = new Map<string, { at: number; suppressed: number; since: number }>();

  constructor(opts: BypassDetectorOptions) {
    this.#opts = opts;
    this.#counts = opts.counts;
  }

  /** True when `event` was a bypass (counted and, rate permitting, logged). */
  onConnect(event: TcpConnect): boolean {
    const { endpoints, sidecarContainer, ownPid } = this.#opts;
    if (event.containerName === sidecarContainer || event.pid === ownPid) return false;
    const provider = endpoints.providerAt(plainAddress(event.daddr), event.dport);
    if (provider === undefined) return false;
    this.#counts.set(provider, (this.#counts.get(provider) ?? 0) + 1);
    this.#log(event, provider);
    return true;
  }

  #log(event: TcpConnect, provider: string): void {
    const now = (this.#opts.now ?? Date.now)();
    const key = `${event.pid}|${event.binary}`;
    const last = this.#lastLog.get(key);
    if (last && now - last.at < BYPASS_LOG_INTERVAL_MS) {
      if (last.suppressed === 0) last.since = now;
      last.suppressed++;
      return;
    }
    if (!last && this.#lastLog.size >= MAX_REMEMBERED_PROCESSES) this.#lastLog.delete(this.#lastLog.keys().next().value!);
    this.#lastLog.delete(key);
    this.#lastLog.set(key, { at: now, suppressed: 0, since: now });
    const destination = `${event.daddr.includes(':') ? `[${event.daddr}]` : event.daddr}:${event.dport}`;
    this.#opts.reports?.add({
      provider,
      pid: event.pid ?? 0,
      binary: event.binary,
      container: event.containerName ?? '',
      destination,
      connects: 1 + (last?.suppressed ?? 0),
      firstSeenUnixMs: last?.suppressed ? last.since : now,
      lastSeenUnixMs: now,
    });
    this.#opts.logger.warn(
      {
        provider,
        pid: event.pid,
        binary: event.binary,
        container: event.containerName,
        pod: `${event.podNamespace}/${event.podName}`,
        destination: `${event.daddr}:${event.dport}`,
        // connects of this process not logged since its last line
        suppressed: last?.suppressed ?? 0,
      },
      'provider call bypassed the sidecar',
    );
  }
}
