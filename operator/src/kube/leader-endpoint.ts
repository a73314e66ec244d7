// The push Service has no selector; its one EndpointSlice lists the current leader only (docs/decisions/0721).
// The leader writes its own pod IP there once its push server listens, and checks it again every resync (a
// deleted or overwritten slice heals itself); a leader that steps down or shuts down empties the slice if it
// is still the one listed. Every write carries the resourceVersion it read, so a new leader's write is never
// undone by an old leader's late one. This needs no pod RBAC, only endpointslices in the operator namespace.

import { isIPv6 } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { Backoff } from '../../../kube-client/backoff.ts';
import { hasOwnerReference, type OwnerReference, withOwnerReference } from '../../../kube-client/owner-reference.ts';

// A label value: no slash allowed.
export const MANAGED_BY = 'operator.tollgate.dev';
export const LEADER_ANNOTATION = 'tollgate.dev/leader';

export interface EndpointSlice {
  apiVersion: 'discovery.k8s.io/v1';
  kind: 'EndpointSlice';
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  addressType: 'IPv4' | 'IPv6' | 'FQDN';
  endpoints: Array<{ addresses: string[]; conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean } }> | null;
  ports?: Array<{ name?: string; port?: number; protocol?: string }> | null;
}

export interface LeaderAddress {
  namespace: string;
  /** The push Service; the slice is named after it. */
  service: string;
  /** The Lease identity of this replica, kept in an annotation for whoever reads the slice. */
  identity: string;
  podIP: string;
  port: number;
  /** The Service port's name; kube-proxy pairs Service and slice ports by name. */
  portName: string;
  /** Named in the slice's ownerReferences, so uninstalling deletes it (ADR 0807). */
  owner?: OwnerReference;
}

/** The slice that sends the push Service's traffic to this replica only. */
export function leaderEndpointSlice(leader: LeaderAddress, resourceVersion?: string): EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: withOwnerReference(
      {
        name: leader.service,
        namespace: leader.namespace,
        ...(resourceVersion ? { resourceVersion } : {}),
        // managed-by tells the endpointslice controllers the slice is not theirs to garbage-collect.
        labels: { 'kubernetes.io/service-name': leader.service, 'endpointslice.kubernetes.io/managed-by': MANAGED_BY },
        annotations: { [LEADER_ANNOTATION]: leader.identity },
      },
      leader.owner,
    ),
    addressType: isIPv6(leader.podIP) ? 'IPv6' : 'IPv4',
    endpoints: [{ addresses: [leader.podIP], conditions: { ready: true, serving: true, terminating: false } }],
    ports: [{ name: leader.portName, port: leader.port, protocol: 'TCP' }],
  };
}

/** The same slice with no endpoints: the Service refuses connections until a new leader writes itself. */
export function emptiedEndpointSlice(slice: EndpointSlice): EndpointSlice {
  const annotations = { ...slice.metadata.annotations };
  delete annotations[LEADER_ANNOTATION];
  return { ...slice, metadata: { ...slice.metadata, annotations }, endpoints: [] };
}

/** True when `slice` already says exactly what leaderEndpointSlice(leader) would write. */
export function listsOnly(slice: EndpointSlice, leader: LeaderAddress): boolean {
  const want = leaderEndpointSlice(leader);
  const endpoints = slice.endpoints ?? [];
  const ports = slice.ports ?? [];
  return (
    slice.addressType === want.addressType &&
    endpoints.length === 1 &&
    endpoints[0]!.addresses.length === 1 &&
    endpoints[0]!.addresses[0] === leader.podIP &&
    endpoints[0]!.conditions?.ready === true &&
    endpoints[0]!.conditions?.serving === true &&
    endpoints[0]!.conditions?.terminating === false &&
    ports.length === 1 &&
    ports[0]!.name === leader.portName &&
    ports[0]!.port === leader.port &&
    (ports[0]!.protocol ?? 'TCP') === 'TCP' &&
    slice.metadata.labels?.['kubernetes.io/service-name'] === leader.service &&
    slice.metadata.labels?.['endpointslice.kubernetes.io/managed-by'] === MANAGED_BY &&
    slice.metadata.annotations?.[LEADER_ANNOTATION] === leader.identity &&
    hasOwnerReference(slice.metadata, leader.owner)
  );
}

/** Addresses the slice lists, for logs and for "am I still the one listed". */
export function listedAddresses(slice: EndpointSlice): string[] {
  return (slice.endpoints ?? []).flatMap((e) => e.addresses);
}

export interface LeaderEndpointOptions {
  api: KubeApi;
  namespace: string;
  service: string;
  identity: string;
  podIP: string;
  portName?: string;
  owner?: OwnerReference;
  logger: Logger;
  /** How often a leader re-reads the slice to heal it (default 30 s). */
  resyncMs?: number;
}

export class LeaderEndpoint {
  #opts: LeaderEndpointOptions;
  #collection: string;
  #path: string;

  constructor(opts: LeaderEndpointOptions) {
    this.#opts = opts;
    this.#collection = `/apis/discovery.k8s.io/v1/namespaces/${opts.namespace}/endpointslices`;
    this.#path = `${this.#collection}/${opts.service}`;
  }

  #leader(port: number): LeaderAddress {
    const { namespace, service, identity, podIP } = this.#opts;
    return { namespace, service, identity, podIP, port, portName: this.#opts.portName ?? 'grpc', ...(this.#opts.owner ? { owner: this.#opts.owner } : {}) };
  }

  /**
   * Keeps the slice listing this replica on `port` until `signal` aborts: written at once, retried with
   * capped, jittered backoff while the API server refuses, then re-checked every resync.
   */
  async publish(port: number, signal: AbortSignal): Promise<void> {
    const { logger } = this.#opts;
    const backoff = new Backoff({ baseMs: 500, maxMs: 30_000, jitter: 0.3 });
    while (!signal.aborted) {
      let delay: number;
      try {
        await this.#ensureListed(this.#leader(port), signal);
        backoff.reset();
        delay = this.#opts.resyncMs ?? 30_000;
      } catch (error) {
        if (signal.aborted) break;
        delay = backoff.next();
        logger.warn({ endpointSlice: this.#where(), err: message(error), retryInMs: delay }, 'could not publish the leader endpoint; retrying');
      }
      await sleep(delay, undefined, { signal }).catch(() => undefined);
    }
  }

  /** One idempotent pass: read, and write only if the slice says something else. */
  async #ensureListed(leader: LeaderAddress, signal: AbortSignal): Promise<void> {
    const { api, logger } = this.#opts;
    let current: EndpointSlice;
    try {
      current = await api.get<EndpointSlice>(this.#path, { signal });
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
      await api.post(this.#collection, leaderEndpointSlice(leader), { signal });
      logger.info({ endpointSlice: this.#where(), address: leader.podIP, port: leader.port }, 'published leader endpoint');
      return;
    }
    if (listsOnly(current, leader)) {
      logger.debug({ endpointSlice: this.#where() }, 'leader endpoint up to date');
      return;
    }
    // A replace, not a patch: whatever else was listed (an old leader) must go.
    await api.put(this.#path, leaderEndpointSlice(leader, current.metadata.resourceVersion), { signal });
    logger.info({ endpointSlice: this.#where(), address: leader.podIP, port: leader.port, replaced: listedAddresses(current) }, 'published leader endpoint');
  }

  /**
   * Empties the slice if it still lists this replica, retrying with backoff for at most `withinMs`. A slice
   * that lists another pod is left alone: a new leader has already taken it over.
   */
  async withdraw(withinMs = 5_000): Promise<void> {
    const { api, logger, podIP } = this.#opts;
    const signal = AbortSignal.timeout(withinMs);
    const backoff = new Backoff({ baseMs: 200, maxMs: 2_000, jitter: 0.3 });
    for (;;) {
      try {
        let current: EndpointSlice;
        try {
          current = await api.get<EndpointSlice>(this.#path, { signal });
        } catch (error) {
          if (isStatus(error, 404)) return;
          throw error;
        }
        if (!listedAddresses(current).includes(podIP)) {
          logger.info({ endpointSlice: this.#where(), listed: listedAddresses(current) }, 'leader endpoint lists another replica; leaving it');
          return;
        }
        await api.put(this.#path, emptiedEndpointSlice(current), { signal });
        logger.info({ endpointSlice: this.#where(), address: podIP }, 'withdrew leader endpoint');
        return;
      } catch (error) {
        const delay = backoff.next();
        if (signal.aborted) {
          logger.warn({ endpointSlice: this.#where(), err: message(error) }, 'could not withdraw the leader endpoint; the next leader replaces it');
          return;
        }
        // 409: someone wrote the slice between our read and write; read again and decide again.
        if (!isStatus(error, 409)) logger.warn({ endpointSlice: this.#where(), err: message(error), retryInMs: delay }, 'could not withdraw the leader endpoint; retrying');
        await sleep(isStatus(error, 409) ? 0 : delay, undefined, { signal }).catch(() => undefined);
      }
    }
  }

  #where(): string {
    return `${this.#opts.namespace}/${this.#opts.service}`;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
