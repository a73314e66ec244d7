// Leader election on a coordination.k8s.io/v1 Lease with client-go's algorithm and controller-runtime's
// timings (lease 15 s, renew deadline 10 s, retry 2 s); see docs/decisions/0701. Expiry is judged by the
// local time at which this process last saw the Lease record change, never by comparing clocks with the
// holder. A leader that cannot renew within the renew deadline steps down (its leader-only work stops) and
// becomes a candidate again; on shutdown it releases the Lease so a standby takes over at its next retry.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { microTime } from '../../../kube-client/micro-time.ts';
import { type OwnerReference, withOwnerReference } from '../../../kube-client/owner-reference.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string | undefined; ownerReferences?: OwnerReference[] };
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  api: KubeApi;
  namespace: string;
  name: string;
  identity: string;
  logger: Logger;
  /** Named in the Lease's ownerReferences (added at the next write to a Lease that lacks it), ADR 0807. */
  owner?: OwnerReference;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Leader-only work starts here. */
  onStartedLeading: () => void | Promise<void>;
  /** Leader-only work must stop here (lost lease or shutdown). */
  onStoppedLeading: () => void | Promise<void>;
  /** Called whenever the observed holder changes (including to this process). */
  onNewLeader?: (identity: string) => void;
}

type Attempt = 'acquired' | 'held-by-other' | 'error';

export class LeaderElector {
  #opts: Required<Omit<LeaderElectionOptions, 'onNewLeader' | 'owner'>> & Pick<LeaderElectionOptions, 'onNewLeader' | 'owner'>;
  #abort = new AbortController();
  #running: Promise<void> | undefined;
  #leading = false;
  #observed: { record: string; at: number; spec: LeaseSpec } | undefined;
  #resourceVersion: string | undefined;
  #ownerReferences: OwnerReference[] | undefined;
  #path: string;

  constructor(opts: LeaderElectionOptions) {
    this.#opts = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...opts };
    if (this.#opts.renewDeadlineMs >= this.#opts.leaseDurationMs) throw new Error('renew deadline must be shorter than the lease duration');
    this.#path = `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases/${opts.name}`;
  }

  isLeader(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#running ??= this.#run();
  }

  /** Stops campaigning; a leader stops its work and releases the Lease. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    const { logger, retryPeriodMs, renewDeadlineMs } = this.#opts;
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      const attempt = await this.#tryAcquireOrRenew();
      if (attempt !== 'acquired') {
        // Jitter keeps standbys from hitting the Lease in lockstep.
        await this.#sleep(retryPeriodMs * (1 + 0.2 * Math.random()));
        continue;
      }
      this.#leading = true;
      logger.info({ lease: `${this.#opts.namespace}/${this.#opts.name}`, identity: this.#opts.identity }, 'became leader');
      await this.#callback(this.#opts.onStartedLeading, 'onStartedLeading');
      let lastRenew = Date.now();
      let lost = false;
      while (!signal.aborted) {
        await this.#sleep(retryPeriodMs);
        if (signal.aborted) break;
        const renewed = await this.#tryAcquireOrRenew();
        if (renewed === 'acquired') {
          lastRenew = Date.now();
        } else if (renewed === 'held-by-other' || Date.now() - lastRenew > renewDeadlineMs) {
          lost = true;
          break;
        }
      }
      this.#leading = false;
      if (lost) logger.error({ lease: `${this.#opts.namespace}/${this.#opts.name}` }, 'leader election lost; stopping leader-only work');
      await this.#callback(this.#opts.onStoppedLeading, 'onStoppedLeading');
      if (signal.aborted) await this.#release();
    }
  }

  async #tryAcquireOrRenew(): Promise<Attempt> {
    const { api, identity, leaseDurationMs } = this.#opts;
    const now = new Date();
    try {
      let lease: Lease;
      try {
        lease = await api.get<Lease>(this.#path, { signal: this.#attemptSignal() });
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
        const created = await api.post<Lease>(
          `/apis/coordination.k8s.io/v1/namespaces/${this.#opts.namespace}/leases`,
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: withOwnerReference({ name: this.#opts.name, namespace: this.#opts.namespace }, this.#opts.owner),
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: Math.round(leaseDurationMs / 1000),
              acquireTime: microTime(now),
              renewTime: microTime(now),
              leaseTransitions: 0,
            },
          },
          { signal: this.#attemptSignal() },
        );
        this.#observe(created.spec ?? {}, created.metadata);
        return 'acquired';
      }
      const spec = lease.spec ?? {};
      this.#observe(spec, lease.metadata);
      const holder = spec.holderIdentity ?? '';
      const observedAt = this.#observed?.at ?? Date.now();
      const duration = (spec.leaseDurationSeconds ?? Math.round(leaseDurationMs / 1000)) * 1000;
      if (holder && holder !== identity && observedAt + duration > Date.now()) return 'held-by-other';
      const next: LeaseSpec =
        holder === identity
          ? { ...spec, renewTime: microTime(now), leaseDurationSeconds: Math.round(leaseDurationMs / 1000) }
          : {
              holderIdentity: identity,
              leaseDurationSeconds: Math.round(leaseDurationMs / 1000),
              acquireTime: microTime(now),
              renewTime: microTime(now),
              leaseTransitions: (spec.leaseTransitions ?? 0) + 1,
            };
      // Renewing is a write anyway: a Lease from before the chart named an owner gets it here.
      const metadata = withOwnerReference(lease.metadata, this.#opts.owner);
      const updated = await api.put<Lease>(this.#path, { ...lease, metadata, spec: next }, { signal: this.#attemptSignal() });
      this.#observe(updated.spec ?? {}, updated.metadata);
      return 'acquired';
    } catch (error) {
      // 409: someone else wrote the Lease between our read and write; they won this round.
      if (isStatus(error, 409)) return 'held-by-other';
      this.#opts.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'leader election: cannot read or write the Lease');
      return 'error';
    }
  }

  #observe(spec: LeaseSpec, metadata: Lease['metadata']): void {
    const record = JSON.stringify([spec.holderIdentity ?? '', spec.renewTime ?? '', spec.leaseDurationSeconds ?? 0]);
    this.#resourceVersion = metadata.resourceVersion;
    this.#ownerReferences = metadata.ownerReferences;
    if (this.#observed?.record === record) return;
    const previousHolder = this.#observed?.spec.holderIdentity;
    this.#observed = { record, at: Date.now(), spec };
    if (spec.holderIdentity && spec.holderIdentity !== previousHolder) this.#opts.onNewLeader?.(spec.holderIdentity);
  }

  async #release(): Promise<void> {
    if (this.#observed?.spec.holderIdentity !== this.#opts.identity) return;
    const now = microTime();
    try {
      await this.#opts.api.put<Lease>(this.#path, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        // A PUT replaces metadata: carry the owners over, or releasing would orphan the Lease.
        metadata: {
          name: this.#opts.name,
          namespace: this.#opts.namespace,
          resourceVersion: this.#resourceVersion,
          ...(this.#ownerReferences ? { ownerReferences: this.#ownerReferences } : {}),
        },
        spec: {
          ...this.#observed.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
        },
      });
      this.#opts.logger.info({ lease: `${this.#opts.namespace}/${this.#opts.name}` }, 'released leadership');
    } catch (error) {
      this.#opts.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not release the Lease; a standby takes over when it expires');
    }
  }

  async #callback(fn: () => void | Promise<void>, name: string): Promise<void> {
    try {
      await fn();
    } catch (error) {
      this.#opts.logger.error({ err: error instanceof Error ? error.message : String(error) }, `leader election ${name} failed`);
    }
  }

  /** One attempt must not outlive the renew deadline, or a hung request would keep a dead leader leading. */
  #attemptSignal(): AbortSignal {
    return AbortSignal.timeout(Math.max(1_000, this.#opts.renewDeadlineMs / 2));
  }

  #sleep(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.#abort.signal }).catch(() => undefined);
  }
}
