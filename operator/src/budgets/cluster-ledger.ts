// The cluster's budget ledger, kept by the leading operator (ADR 1302, ADR 1307). Sidecars report what they
// charged; the leader applies each report in memory as it arrives (within ~50 ms), so the sidecars that enforce
// its users hear of it at once, and writes what changed to the API server about once a second as one patch
// (ledger-store.ts). A report is acknowledged (SpendAck) only once the patch holding it is written: the
// sidecar keeps it on its disk until then, and a new leader applies again only what no written patch holds.
// Per policy, the ledger remembers for every pod the last report applied, so a report that comes again (the
// sidecar did not hear the ack, a new leader, a restarted sidecar) changes nothing. The operator is the only
// writer, so it splits spend over grants and the limit itself and sees every threshold crossing exactly once
// (it logs `budget alert` and records the Event when the crossing is written). Watermarks of pods that are
// gone are pruned, and the log is compacted into a new base when it has grown.

import type { Logger } from 'pino';
import { periodBounds } from '../../../contracts/budget-period.ts';
import { formatUsd, parseUsd, spendUnitsProblem } from '../../../contracts/money.ts';
import type { CompiledPolicy } from '../../../contracts/budget-policies.ts';
import { type Grant, isGrantActive, newlyCrossed, splitCharge } from '../../../contracts/budget-grants.ts';
import type { SpendEntryMessage } from '../../../contracts/push-protocol.ts';
import { LedgerState, type UsageRecord } from './ledger-state.ts';
import { type LedgerBackend, LedgerConflictError, LedgerLostError, MAX_PART_BYTES } from './ledger-store.ts';

/** Who sent a report: from the stream's token review, never from the report. */
export interface SpendSource {
  podUid: string;
  namespace: string;
  pod: string;
}

export interface BudgetAlert {
  policy: string;
  userId: string;
  threshold: number;
  periodStart: number;
  periodEnd: number;
  spent: bigint;
  limit: bigint;
  limitUsed: bigint;
}

export interface UserUsage {
  userId: string;
  periodStart: number;
  spent: bigint;
  limitUsed: bigint;
  alerted: number;
  grantsUsed: Map<string, bigint>;
}

/** What one round of applying reports changed. */
export interface AppliedReports {
  /** Users whose usage changed, by policy key. */
  changes: Map<string, Set<string>>;
  /** Pod UID → its last report applied: the usage includes every report of the pod up to it. */
  applied: Map<string, number>;
  /** Pod UID → the users (`policy\0user`) its reports charged: the users that pod serves. */
  charged: Map<string, Set<string>>;
}

export interface ClusterLedgerOptions {
  store: LedgerBackend;
  logger: Logger;
  /** The compiled policy of a key (`namespace/name`), or undefined when it does not exist or is invalid. */
  policy(key: string): CompiledPolicy | undefined;
  /** Reports were applied in memory. */
  applied(result: AppliedReports): void;
  /** Every report of this pod up to `sequence` is durable. */
  acknowledge(source: SpendSource, sequence: number): void;
  /** A patch with these policies' changes was written. */
  written(policies: Set<string>): void;
  /** The ledger was read again (another replica wrote it): every sidecar needs its state anew. */
  reloaded(): void;
  alert(alert: BudgetAlert): void;
  /** Whether a pod still exists (as the same pod); a watermark of a pod that is gone is pruned. */
  podExists?(namespace: string, name: string, uid: string): Promise<boolean>;
  /** Pods with a push stream open now: their watermarks are never pruned. */
  connectedPods?(): Set<string>;
  now?: () => number;
  /** Reports arriving within this window are applied together. */
  applyDelayMs?: number;
  /** How often what changed is written (one patch). */
  writeIntervalMs?: number;
}

/** Reports queued per pod; more wait on the sidecar's disk until these are applied. */
const MAX_QUEUED_PER_POD = 16;
/** Users in one patch: at ~60 bytes each (and the pods' watermarks beside them) it stays under one ConfigMap. */
const MAX_PATCH_USERS = 6_000;
/**
 * Patches sealed and not yet written. Beyond this, no more are sealed: reports are still applied (and pushed to
 * the sidecars, so enforcement sees them) into the one patch being gathered, until it holds MAX_PATCH_USERS;
 * only then do reports wait, on the sidecars' disks, for the store. Memory stays bounded by users, not time.
 */
const MAX_PENDING_PATCHES = 4;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** Compact when this many patches or bytes are on top of the base, at most once a minute. */
const COMPACT_AFTER_PATCHES = 120;
const COMPACT_AFTER_BYTES = 8 * 1024 * 1024;
const COMPACT_EVERY_MS = 60_000;
/** A watermark not advanced for this long, of a pod with no stream, is checked against the API server. */
const PRUNE_AFTER_MS = 10 * 60_000;
const PRUNE_EVERY_MS = 5 * 60_000;
const PRUNE_CHECKS_PER_ROUND = 50;
/** How long a policy's used-up users are kept when nothing changes (grants expire with time). */
const EXHAUSTED_KEPT_MS = 1_000;

interface QueuedReport {
  source: SpendSource;
  sequence: number;
  entries: SpendEntryMessage[];
}

/** What a patch carries besides the ledger's changes: acknowledgements and alerts to give once it is written. */
interface Epoch {
  acks: Map<string, { source: SpendSource; sequence: number }>;
  alerts: BudgetAlert[];
  policies: Set<string>;
}

type WriteJob = { kind: 'patch'; seq: number; json: string; epoch: Epoch } | { kind: 'compact'; gen: number; parts: string[] };

interface Bounds {
  config: CompiledPolicy['config'];
  start: number;
  end: number;
  previousStart: number;
}

const newEpoch = (): Epoch => ({ acks: new Map(), alerts: [], policies: new Set() });

export class ClusterLedger {
  readonly #opts: ClusterLedgerOptions;
  readonly #now: () => number;
  #state = new LedgerState();
  #base = 0;
  #next = 1;
  #manifestVersion: string | undefined;
  #sinceBase = { patches: 0, bytes: 0, legacy: false };
  #lastCompaction = 0;
  #queue: QueuedReport[] = [];
  /** Pod UID → last report applied in memory, and last report written. */
  #appliedSeq = new Map<string, number>();
  #durableSeq = new Map<string, number>();
  #epoch = newEpoch();
  #jobs: WriteJob[] = [];
  #writing: Promise<void> | null = null;
  #applyTimer: NodeJS.Timeout | null = null;
  #writeTimer: NodeJS.Timeout | null = null;
  #pruneTimer: NodeJS.Timeout | null = null;
  #retryDelay = RETRY_MIN_MS;
  #bounds = new Map<string, Bounds>();
  /** Policy key → its used-up users as last computed (exhausted()). */
  #exhausted = new Map<string, { policy: CompiledPolicy; at: number; users: UserUsage[] }>();
  #stopped = false;

  constructor(opts: ClusterLedgerOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** Reads the ledger; the leader calls this before it serves sidecars. */
  async load(): Promise<void> {
    const loaded = await this.#opts.store.load();
    this.#state = loaded.state;
    this.#exhausted.clear();
    this.#base = loaded.base;
    this.#next = loaded.next;
    this.#manifestVersion = loaded.manifestVersion;
    this.#sinceBase = { patches: loaded.patches, bytes: loaded.patchBytes, legacy: loaded.legacy };
    this.#appliedSeq.clear();
    for (const ledger of this.#state.policies.values()) {
      for (const [uid, mark] of ledger.applied) this.#appliedSeq.set(uid, Math.max(this.#appliedSeq.get(uid) ?? 0, mark.seq));
    }
    this.#durableSeq = new Map(this.#appliedSeq);
    const users = [...this.#state.policies.values()].reduce((n, l) => n + [...l.periods.values()].reduce((m, u) => m + u.size, 0), 0);
    this.#opts.logger.info({ policies: this.#state.policies.size, users, base: this.#base, patches: loaded.patches, store: this.#opts.store.where }, 'budget ledger loaded');
    if (!this.#stopped) this.#startTimers();
  }

  #startTimers(): void {
    this.#writeTimer ??= setInterval(() => this.#seal(), this.#opts.writeIntervalMs ?? 1_000);
    this.#pruneTimer ??= setInterval(() => void this.prune(), PRUNE_EVERY_MS);
    this.#writeTimer.unref();
    this.#pruneTimer.unref();
  }

  policies(): string[] {
    return [...this.#state.policies.keys()];
  }

  /** The last report of a pod applied in memory (0: none yet): what the usage sent to it includes. */
  applied(podUid: string): number {
    return this.#appliedSeq.get(podUid) ?? 0;
  }

  submit(source: SpendSource, sequence: number, entries: SpendEntryMessage[]): void {
    if (this.#stopped || !Number.isSafeInteger(sequence) || sequence <= 0) return;
    const pod = source.podUid;
    if (sequence <= this.applied(pod)) {
      // A resend of what is applied: acknowledge what is written, and say again what is applied.
      const durable = this.#durableSeq.get(pod) ?? 0;
      if (sequence <= durable) this.#opts.acknowledge(source, durable);
      this.#opts.applied({ changes: new Map(), applied: new Map([[pod, this.applied(pod)]]), charged: new Map() });
      return;
    }
    let queued = 0;
    for (const r of this.#queue) {
      if (r.source.podUid !== pod) continue;
      // Already queued (a resend after a reconnect): the queued one is the same report.
      if (r.sequence === sequence) return;
      queued++;
    }
    if (queued >= MAX_QUEUED_PER_POD) return;
    this.#queue.push({ source, sequence, entries });
    this.#scheduleApply();
  }

  /** A user's usage in the current period (undefined: no spend yet). */
  userUsage(policyKey: string, userId: string, at: number): UserUsage | undefined {
    const bounds = this.#boundsOf(policyKey, at);
    const ledger = this.#state.policies.get(policyKey);
    const usage = bounds && ledger?.periods.get(bounds.start)?.get(userId);
    return usage ? userUsage(userId, bounds.start, usage, ledger!.grantsUsed.get(userId)) : undefined;
  }

  /** Current-period usage of a policy's users (for the status). */
  *usage(policyKey: string, at: number): Generator<UserUsage> {
    const bounds = this.#boundsOf(policyKey, at);
    const ledger = this.#state.policies.get(policyKey);
    if (!bounds || !ledger) return;
    for (const [userId, usage] of ledger.periods.get(bounds.start) ?? []) yield userUsage(userId, bounds.start, usage, ledger.grantsUsed.get(userId));
  }

  /**
   * Users of the policy whose budget is used up now (every sidecar enforcing it must know them). Finding them
   * takes a pass over every user of the policy, and every connecting sidecar asks: the answer is kept until the
   * policy's usage or config changes, or for a second at most (a grant can expire meanwhile). A new leader's
   * 2,000 reconnecting sidecars spent a quarter of its CPU on these passes (BENCHMARKS.md).
   */
  exhausted(policyKey: string, at: number): UserUsage[] {
    const policy = this.#opts.policy(policyKey);
    if (!policy?.blocks) return [];
    const kept = this.#exhausted.get(policyKey);
    if (kept?.policy === policy && at >= kept.at && at - kept.at < EXHAUSTED_KEPT_MS) return kept.users;
    const users = [...this.usage(policyKey, at)].filter((u) => remainingUnits(policy, u, at) <= 0n);
    this.#exhausted.set(policyKey, { policy, at, users });
    return users;
  }

  /** Users of the policy in the current period. */
  userCount(policyKey: string, at: number): number {
    const bounds = this.#boundsOf(policyKey, at);
    return (bounds && this.#state.policies.get(policyKey)?.periods.get(bounds.start)?.size) ?? 0;
  }

  /** The BudgetPolicy is gone: so is its ledger (the next patch says so). */
  removePolicy(policyKey: string): void {
    this.#state.remove(policyKey);
    this.#bounds.delete(policyKey);
    this.#exhausted.delete(policyKey);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of [this.#applyTimer, this.#writeTimer, this.#pruneTimer]) if (timer) clearTimeout(timer);
    // What is applied and sealed is written if the API server lets it; what is not stays on the sidecars' disks.
    if (this.#queue.length === 0) this.#seal(true);
    await this.#writing;
  }

  /** Applies what is queued and writes everything sealed (tests; the timers do it otherwise). */
  async flush(): Promise<void> {
    this.#applyQueued();
    this.#seal(true);
    while (this.#writing) await this.#writing;
  }

  #scheduleApply(): void {
    if (this.#applyTimer || this.#stopped) return;
    this.#applyTimer = setTimeout(() => {
      this.#applyTimer = null;
      this.#applyQueued();
    }, this.#opts.applyDelayMs ?? 50);
  }

  #applyQueued(): void {
    const result: AppliedReports = { changes: new Map(), applied: new Map(), charged: new Map() };
    const at = this.#now();
    while (this.#queue.length > 0) {
      if (this.#state.dirtyUsers >= MAX_PATCH_USERS) {
        // The store is behind and the patch being gathered is full: the rest waits, unacknowledged.
        if (this.#jobs.length >= MAX_PENDING_PATCHES) break;
        this.#seal(true);
      }
      this.#applyReport(this.#queue.shift()!, at, result);
    }
    if (result.applied.size > 0) this.#opts.applied(result);
  }

  #applyReport(report: QueuedReport, at: number, result: AppliedReports): void {
    const { source, sequence } = report;
    const touched = new Set<string>();
    for (const entry of report.entries) {
      const key = this.#applyEntry(report, entry, at, result);
      if (key) touched.add(key);
    }
    for (const key of touched) {
      const mark = this.#state.policy(key).applied.get(source.podUid);
      if ((mark?.seq ?? 0) < sequence) this.#state.setApplied(key, source.podUid, { seq: sequence, pod: `${source.namespace}/${source.pod}`, at });
      this.#epoch.policies.add(key);
    }
    this.#appliedSeq.set(source.podUid, sequence);
    this.#epoch.acks.set(source.podUid, { source, sequence });
    result.applied.set(source.podUid, sequence);
  }

  /** Applies one entry; returns the policy key when the entry was for a known policy. */
  #applyEntry(report: QueuedReport, entry: SpendEntryMessage, at: number, result: AppliedReports): string | undefined {
    const { source } = report;
    const valid = this.#validEntry(source, entry, report.sequence);
    if (!valid) return undefined;
    const { key, policy, amount } = valid;
    if ((this.#state.policies.get(key)?.applied.get(source.podUid)?.seq ?? 0) >= report.sequence) return key; // applied here before
    const current = this.#boundsOf(key, at)!;
    const periodStart =
      valid.reported === current.start || valid.reported === current.previousStart
        ? valid.reported
        : periodBounds(policy.config.period, policy.config.timeZone, valid.reported).start;
    if (periodStart < current.previousStart) {
      const log = { pod: `${source.namespace}/${source.pod}`, policy: key, user_id: entry.userId, sequence: report.sequence };
      this.#opts.logger.warn(
        { ...log, amount_usd: formatUsd(amount), period_start: new Date(periodStart).toISOString() },
        'spend for a closed period recorded only in the span store',
      );
      return key;
    }
    const ledger = this.#state.policy(key);
    const grants = grantsOf(policy, entry.userId, ledger.grantsUsed.get(entry.userId));
    const usage = this.#state.charge(key, periodStart, entry.userId, splitCharge(grants, amount, Math.max(at, periodStart)));
    this.#exhausted.delete(key);
    // Only the current period alerts; a late report for the previous one just completes its record.
    if (periodStart === current.start) this.#noteAlerts({ key, policy, userId: entry.userId, usage, bounds: current });
    if (ledger.periods.size > 2) this.#state.prunePeriods(key, current.previousStart);
    addTo(result.changes, key, entry.userId);
    addTo(result.charged, source.podUid, `${key}\0${entry.userId}`);
    return key;
  }

  #noteAlerts(charge: { key: string; policy: CompiledPolicy; userId: string; usage: UsageRecord; bounds: Bounds }): void {
    const { key, policy, userId, usage, bounds } = charge;
    const crossed = newlyCrossed(policy.config.alertThresholds, policy.limit, usage.limitUsed, usage.alerted);
    if (crossed.length === 0) return;
    usage.alerted = crossed.at(-1)!;
    this.#state.touchUser(key, bounds.start, userId);
    for (const threshold of crossed) {
      this.#epoch.alerts.push({
        policy: key,
        userId,
        threshold,
        periodStart: bounds.start,
        periodEnd: bounds.end,
        spent: usage.spent,
        limit: policy.limit,
        limitUsed: usage.limitUsed,
      });
    }
  }

  /** The entry's policy, amount and period, or undefined (logged) when the entry cannot be applied. */
  #validEntry(source: SpendSource, entry: SpendEntryMessage, sequence: number): { key: string; policy: CompiledPolicy; amount: bigint; reported: number } | undefined {
    const key = String(entry.policy ?? '');
    const log = { pod: `${source.namespace}/${source.pod}`, policy: key, user_id: entry.userId, sequence };
    // A sidecar can only ever charge the budgets of its own namespace.
    if (!key.startsWith(`${source.namespace}/`)) {
      this.#opts.logger.warn(log, 'spend report entry for a policy outside the pod’s namespace ignored');
      return undefined;
    }
    const policy = this.#opts.policy(key);
    if (!policy) {
      this.#opts.logger.warn(log, 'spend for a BudgetPolicy that no longer exists (or is invalid) dropped');
      return undefined;
    }
    const parsed = parseEntry(entry);
    if (typeof parsed === 'string') {
      this.#opts.logger.warn({ ...log, problem: parsed }, `malformed spend report entry ignored: ${parsed}`);
      return undefined;
    }
    return { key, policy, ...parsed };
  }

  /** The policy's current period, computed once per period (time-zone arithmetic is not free). */
  #boundsOf(key: string, at: number): Bounds | undefined {
    const policy = this.#opts.policy(key);
    if (!policy) return undefined;
    const cached = this.#bounds.get(key);
    if (cached && cached.config === policy.config && at >= cached.start && at < cached.end) return cached;
    const { period, timeZone } = policy.config;
    const current = periodBounds(period, timeZone, at);
    const bounds = { config: policy.config, ...current, previousStart: periodBounds(period, timeZone, current.start - 1).start };
    this.#bounds.set(key, bounds);
    return bounds;
  }

  /** Closes the epoch: what changed becomes the next patch to write (and, when due, a compaction after it). */
  #seal(force = false): void {
    if ((!force && this.#stopped) || (!this.#state.dirty && this.#epoch.acks.size === 0)) return;
    // While the store is behind, what changes gathers in the next patch rather than in more patches.
    if (!force && this.#jobs.length >= MAX_PENDING_PATCHES) return;
    // Reports that changed nothing (every entry refused) still wait their turn: acknowledgements are cumulative.
    const json = this.#state.dirty ? JSON.stringify(this.#state.takePatch()) : '';
    const job: WriteJob = { kind: 'patch', seq: json ? this.#next++ : 0, json, epoch: this.#epoch };
    this.#epoch = newEpoch();
    this.#jobs.push(job);
    this.#sinceBase.patches += json ? 1 : 0;
    this.#sinceBase.bytes += json.length;
    if (json && this.#compactionDue()) {
      for (const key of this.#state.policies.keys()) {
        const bounds = this.#boundsOf(key, this.#now());
        if (bounds) this.#state.prunePeriods(key, bounds.previousStart);
      }
      // The base is the state as of this patch, taken now: later reports change the state, not the parts.
      this.#jobs.push({ kind: 'compact', gen: job.seq, parts: this.#state.chunks(MAX_PART_BYTES).map((p) => JSON.stringify(p)) });
      this.#lastCompaction = this.#now();
      this.#sinceBase = { patches: 0, bytes: 0, legacy: false };
    }
    this.#writing ??= this.#drain();
  }

  #compactionDue(): boolean {
    const { patches, bytes, legacy } = this.#sinceBase;
    if (legacy) return true;
    return (patches >= COMPACT_AFTER_PATCHES || bytes >= COMPACT_AFTER_BYTES) && this.#now() - this.#lastCompaction >= COMPACT_EVERY_MS;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#jobs.length > 0) {
        const job = this.#jobs[0]!;
        try {
          await this.#write(job);
          this.#jobs.shift();
          this.#retryDelay = RETRY_MIN_MS;
        } catch (error) {
          if (error instanceof LedgerConflictError) {
            await this.#reload(error);
            continue;
          }
          if (error instanceof LedgerLostError) {
            this.#rewriteWhole(job, error);
            continue;
          }
          const message = error instanceof Error ? error.message : String(error);
          this.#opts.logger.error(
            { err: message, retryInMs: this.#retryDelay },
            'failed to deduct spend: the budget ledger write failed; the reports stay unacknowledged and it is retried',
          );
          if (this.#stopped) return;
          await new Promise((resolve) => setTimeout(resolve, this.#retryDelay));
          this.#retryDelay = Math.min(RETRY_MAX_MS, this.#retryDelay * 2);
        }
      }
    } finally {
      this.#writing = null;
      if (this.#queue.length > 0) this.#scheduleApply();
    }
  }

  async #write(job: WriteJob): Promise<void> {
    if (job.kind === 'compact') {
      this.#manifestVersion = await this.#opts.store.compact(job.gen, job.parts, { base: this.#base, manifestVersion: this.#manifestVersion });
      this.#base = job.gen;
      this.#opts.logger.info({ base: job.gen, parts: job.parts.length }, 'budget ledger compacted');
      return;
    }
    if (job.json) await this.#opts.store.writePatch(job.seq, this.#base, job.json);
    for (const alert of job.epoch.alerts) this.#opts.alert(alert);
    for (const [pod, { source, sequence }] of job.epoch.acks) {
      this.#durableSeq.set(pod, sequence);
      this.#opts.acknowledge(source, sequence);
    }
    this.#opts.written(job.epoch.policies);
  }

  /**
   * The store lost the base (ADR 1314): everything the ledger holds is in this leader's memory, so it becomes the
   * new base, written before the patch's acknowledgements go out. Later changes in memory ride along; the patches
   * after it carry absolute values, so writing them on top changes nothing twice.
   */
  #rewriteWhole(job: WriteJob, error: LedgerLostError): void {
    const gen = job.kind === 'patch' ? job.seq : job.gen;
    this.#opts.logger.error({ err: error.message, base: gen }, 'budget ledger lost by its store: writing the whole ledger from memory again');
    this.#manifestVersion = undefined;
    this.#base = 0;
    const parts = this.#state.chunks(MAX_PART_BYTES).map((p) => JSON.stringify(p));
    // A compaction's own parts were the whole ledger as of its patch, later changes are in later patches: only
    // the version it checked is wrong. A patch becomes a base of everything now, then its acknowledgements.
    this.#jobs.splice(
      0,
      1,
      ...(job.kind === 'patch'
        ? [
            { kind: 'compact' as const, gen, parts },
            { ...job, json: '' },
          ]
        : [job]),
    );
  }

  /** Someone else wrote the ledger: drop what is not written, read it again, and have every sidecar start over. */
  async #reload(conflict: LedgerConflictError): Promise<void> {
    this.#opts.logger.warn({ err: conflict.message }, 'budget ledger changed under this leader; reading it again');
    this.#jobs = [];
    this.#queue = [];
    this.#epoch = newEpoch();
    for (;;) {
      try {
        await this.load();
        break;
      } catch (error) {
        if (this.#stopped) return;
        this.#opts.logger.error({ err: (error as Error).message, retryInMs: this.#retryDelay }, 'cannot read the budget ledger; retrying');
        await new Promise((resolve) => setTimeout(resolve, this.#retryDelay));
        this.#retryDelay = Math.min(RETRY_MAX_MS, this.#retryDelay * 2);
      }
    }
    this.#opts.reloaded();
  }

  /**
   * Drops the watermarks of pods that are gone (their outbox went with them: they can never resend); the next
   * patch says so. A timer calls it every few minutes; tests call it directly.
   */
  async prune(): Promise<void> {
    if (!this.#opts.podExists) return;
    const connected = this.#opts.connectedPods?.() ?? new Set<string>();
    const before = this.#now() - PRUNE_AFTER_MS;
    const candidates = new Map<string, string>();
    for (const ledger of this.#state.policies.values()) {
      for (const [uid, mark] of ledger.applied) if (mark.at < before && !connected.has(uid) && candidates.size < PRUNE_CHECKS_PER_ROUND) candidates.set(uid, mark.pod);
    }
    const gone: string[] = [];
    for (const [uid, pod] of candidates) {
      const [namespace, name] = pod.split('/') as [string, string];
      try {
        if (!(await this.#opts.podExists(namespace, name, uid))) gone.push(uid);
      } catch (error) {
        this.#opts.logger.debug({ pod, err: (error as Error).message }, 'cannot check a pod for its budget watermark; later');
      }
    }
    for (const uid of gone) {
      for (const key of this.#state.policies.keys()) this.#state.pruneWatermark(key, uid);
      this.#appliedSeq.delete(uid);
      this.#durableSeq.delete(uid);
    }
    if (gone.length > 0) this.#opts.logger.info({ pods: gone.length }, 'budget watermarks of deleted pods pruned');
  }
}

/**
 * A report entry's amount and period, or what is wrong with it. The amount is what the sidecar's outbox added up for
 * a user's period, many calls perhaps, not one: it is bounded as every sum of spend is (spendUnitsProblem, the bound
 * the ledgers check deltas against), and 0 is no spend at all.
 */
function parseEntry(entry: SpendEntryMessage): { amount: bigint; reported: number } | string {
  if (typeof entry.userId !== 'string' || entry.userId.length === 0 || entry.userId.length > 256) return 'has no user id of 1 to 256 characters';
  const reported = Date.parse(entry.periodStart);
  if (Number.isNaN(reported)) return `has period start ${JSON.stringify(entry.periodStart)}, not a time`;
  const raw = entry.amount;
  const amount = typeof raw === 'number' ? (Number.isSafeInteger(raw) ? BigInt(raw) : null) : typeof raw === 'string' && /^-?\d{1,40}$/.test(raw) ? BigInt(raw) : null;
  if (amount === null) return `amount ${JSON.stringify(raw)} is not a whole number of ledger units`;
  if (amount === 0n) return 'amount is zero';
  const problem = spendUnitsProblem(amount);
  return problem === null ? { amount, reported } : `amount ${problem}`;
}

function addTo(map: Map<string, Set<string>>, key: string, value: string): void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(value);
}

function userUsage(userId: string, periodStart: number, usage: UsageRecord, grantsUsed: Map<string, bigint> | undefined): UserUsage {
  return { userId, periodStart, spent: usage.spent, limitUsed: usage.limitUsed, alerted: usage.alerted, grantsUsed: grantsUsed ?? new Map<string, bigint>() };
}

/** The user's grants in the policy, with what each absorbed so far. */
function grantsOf(policy: CompiledPolicy, userId: string, used: Map<string, bigint> | undefined): Grant[] {
  const grants: Grant[] = [];
  for (const g of policy.config.grants ?? []) {
    if (g.user !== userId) continue;
    grants.push({
      id: g.id,
      amount: parseUsd(g.amountUsd) as bigint, // validated when the policy was rendered
      used: used?.get(g.id) ?? 0n,
      reason: g.reason ?? null,
      createdAt: Date.parse(g.createdAt),
      expiresAt: g.expiresAt ? Date.parse(g.expiresAt) : null,
    });
  }
  return grants;
}

/** What the user may still spend at `at`: the limit left plus what active grants have left. */
export function remainingUnits(policy: CompiledPolicy, usage: UserUsage, at: number): bigint {
  let remaining = policy.limit - usage.limitUsed;
  for (const grant of grantsOf(policy, usage.userId, usage.grantsUsed)) if (isGrantActive(grant, at)) remaining += grant.amount - grant.used;
  return remaining;
}
