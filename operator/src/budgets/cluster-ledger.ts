// The cluster's budget ledger, kept by the leading operator (ADR 1302). Sidecars report what they charged;
// the ledger applies each report to the ledger document of every policy it touches, writes the documents,
// and only then acknowledges the report. The operator is the only writer, so it splits spend over grants and
// the limit itself and sees every threshold crossing exactly once (it logs `budget alert` and records the
// Event). Each document remembers, per pod, the last report applied to it, so a report that comes again
// (the sidecar did not hear the ack, a new leader, a restarted sidecar) changes nothing: a killed sidecar or
// a killed leader loses nothing and counts nothing twice.

import type { Logger } from 'pino';
import { periodBounds } from '../../../contracts/budget-period.ts';
import { addSpend, formatUsd, parseUsd, UNITS_PER_USD } from '../../../contracts/money.ts';
import type { CompiledPolicy } from '../../../contracts/budget-policies.ts';
import { type Grant, newlyCrossed, splitCharge } from '../../../contracts/budget-grants.ts';
import type { SpendEntryMessage } from '../../../contracts/push-protocol.ts';
import { emptyLedger, LedgerConflictError, type LedgerDoc, type LedgerStore, type StoredLedger, type UserUsageDoc } from './ledger-store.ts';

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

export interface ClusterLedgerOptions {
  store: LedgerStore;
  logger: Logger;
  /** The compiled policy of a key (`namespace/name`), or undefined when it does not exist or is invalid. */
  policy(key: string): CompiledPolicy | undefined;
  /** Every report of this pod up to `sequence` is durable. */
  acknowledge(source: SpendSource, sequence: number): void;
  /** A flush wrote these users' usage (by policy) and acknowledged these pods' reports. */
  applied(changes: Map<string, Set<string>>, acknowledged: Map<string, number>): void;
  alert(alert: BudgetAlert): void;
  now?: () => number;
  /** Reports arriving within this window are written together. */
  flushDelayMs?: number;
}

/** One report entry can charge at most this much: a bound on what a misbehaving sidecar can claim. */
const MAX_ENTRY_UNITS = 1_000_000n * UNITS_PER_USD;
/** Reports queued per pod; more wait on the sidecar's disk until these are acknowledged. */
const MAX_QUEUED_PER_POD = 16;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;

/** What one flush collects while it applies reports. */
interface FlushState {
  /** Copies of the documents the flush touches, by policy key. */
  working: Map<string, LedgerDoc>;
  at: number;
  /** Users whose current-period usage changed, by policy key. */
  changes: Map<string, Set<string>>;
  alerts: Map<string, BudgetAlert[]>;
  /** Documents the flush changed. */
  dirty: Set<string>;
}

interface QueuedReport {
  source: SpendSource;
  sequence: number;
  entries: SpendEntryMessage[];
}

export class ClusterLedger {
  readonly #opts: ClusterLedgerOptions;
  readonly #now: () => number;
  #docs = new Map<string, StoredLedger>();
  #queue: QueuedReport[] = [];
  #acked = new Map<string, number>();
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> | null = null;
  #retryDelay = RETRY_MIN_MS;
  #stopped = false;

  constructor(opts: ClusterLedgerOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** Reads every ledger document; the leader calls this before it serves sidecars. */
  async load(): Promise<void> {
    this.#docs = await this.#opts.store.list();
    this.#opts.logger.info({ policies: this.#docs.size }, 'budget ledger loaded');
  }

  policies(): string[] {
    return [...this.#docs.keys()];
  }

  /** The last report of a pod this leader acknowledged (0: none yet). */
  acknowledged(podUid: string): number {
    return this.#acked.get(podUid) ?? 0;
  }

  submit(source: SpendSource, sequence: number, entries: SpendEntryMessage[]): void {
    if (this.#stopped || !Number.isSafeInteger(sequence) || sequence <= 0) return;
    const queued = this.#queue.filter((r) => r.source.podUid === source.podUid);
    // Already queued (a resend after a reconnect): the queued one is the same report.
    if (queued.some((r) => r.sequence === sequence)) return;
    if (queued.length >= MAX_QUEUED_PER_POD) return;
    // Acknowledged before: say so again; nothing to apply.
    if (sequence <= this.acknowledged(source.podUid)) {
      this.#opts.acknowledge(source, this.acknowledged(source.podUid));
      return;
    }
    this.#queue.push({ source, sequence, entries });
    this.#schedule(this.#opts.flushDelayMs ?? 100);
  }

  /** Current-period usage of a policy's users (for the sidecars and the status). */
  usage(policyKey: string, at: number): UserUsage[] {
    const policy = this.#opts.policy(policyKey);
    const stored = this.#docs.get(policyKey);
    if (!policy || !stored) return [];
    const start = periodBounds(policy.config.period, policy.config.timeZone, at).start;
    return this.#usersOf(stored.doc, new Date(start).toISOString(), start);
  }

  /** Selected users' usage in the current period. */
  usageOf(policyKey: string, users: Iterable<string>, at: number): UserUsage[] {
    const wanted = new Set(users);
    return this.usage(policyKey, at).filter((u) => wanted.has(u.userId));
  }

  /** The BudgetPolicy is gone: so is its ledger. */
  async removePolicy(policyKey: string): Promise<void> {
    this.#docs.delete(policyKey);
    await this.#opts.store.delete(policyKey);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#flushing;
  }

  /** Writes what is queued now (tests; the timer does it otherwise). */
  async flush(): Promise<void> {
    if (this.#flushing) await this.#flushing;
    if (this.#queue.length > 0) await this.#runFlush();
  }

  #usersOf(doc: LedgerDoc, periodKey: string, start: number): UserUsage[] {
    const users = doc.periods[periodKey] ?? {};
    return Object.entries(users).map(([userId, u]) => ({
      userId,
      periodStart: start,
      spent: BigInt(u.spent),
      limitUsed: BigInt(u.limitUsed),
      alerted: u.alerted,
      grantsUsed: new Map(Object.entries(doc.grantsUsed[userId] ?? {}).map(([id, used]) => [id, BigInt(used)])),
    }));
  }

  #schedule(delayMs: number): void {
    if (this.#timer || this.#flushing || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#runFlush();
    }, delayMs);
  }

  #runFlush(): Promise<void> {
    this.#flushing = this.#flushOnce()
      .catch((error: unknown) => this.#opts.logger.error({ err: (error as Error).message }, 'budget ledger flush failed'))
      .finally(() => {
        this.#flushing = null;
        if (this.#queue.length > 0) this.#schedule(this.#retryDelay);
      });
    return this.#flushing;
  }

  async #flushOnce(): Promise<void> {
    const batch = this.#queue.splice(0);
    if (batch.length === 0) return;
    const at = this.#now();
    const working = new Map<string, LedgerDoc>();
    /** Documents this batch changed (a resent report that was applied before changes nothing). */
    const dirty = new Set<string>();
    const touchedBy = new Map<QueuedReport, Set<string>>();
    const changes = new Map<string, Set<string>>();
    const alerts = new Map<string, BudgetAlert[]>();

    for (const report of batch) {
      const touched = new Set<string>();
      for (const entry of report.entries) {
        const key = this.#applyEntry(report, entry, { working, at, changes, alerts, dirty });
        if (key) touched.add(key);
      }
      for (const key of touched) {
        const doc = working.get(key)!;
        if (dirty.has(key) && (doc.applied[report.source.podUid]?.seq ?? 0) < report.sequence) {
          doc.applied[report.source.podUid] = { seq: report.sequence, pod: `${report.source.namespace}/${report.source.pod}`, at: new Date(at).toISOString() };
        }
      }
      touchedBy.set(report, touched);
    }

    const failed = new Set<string>();
    await Promise.all(
      [...working]
        .filter(([key]) => dirty.has(key))
        .map(async ([key, doc]) => {
          const stored = this.#docs.get(key);
          try {
            const resourceVersion = await this.#opts.store.write(doc, stored?.resourceVersion);
            this.#docs.set(key, { doc, resourceVersion });
          } catch (error) {
            failed.add(key);
            const message = error instanceof Error ? error.message : String(error);
            this.#opts.logger.error({ policy: key, err: message }, 'failed to deduct spend: the budget ledger write failed; the reports stay queued and are retried');
            if (error instanceof LedgerConflictError) {
              // Someone else wrote it: start again from what is stored; the watermarks make the retry exact.
              const fresh = await this.#opts.store.get(key).catch(() => undefined);
              if (fresh) this.#docs.set(key, fresh);
              else this.#docs.delete(key);
            }
          }
        }),
    );

    // Acknowledge per pod up to the first report that touched a failed document; that one and every later
    // one of the same pod are queued again in order (what was written of them is skipped next time).
    const acked = new Map<string, { source: SpendSource; sequence: number }>();
    const blocked = new Set<string>();
    const again: QueuedReport[] = [];
    for (const report of batch) {
      const pod = report.source.podUid;
      const ok = !blocked.has(pod) && ![...touchedBy.get(report)!].some((key) => failed.has(key));
      if (ok) acked.set(pod, { source: report.source, sequence: report.sequence });
      else {
        blocked.add(pod);
        again.push(report);
      }
    }
    this.#queue.unshift(...again);
    this.#retryDelay = failed.size > 0 ? Math.min(RETRY_MAX_MS, this.#retryDelay * 2) : RETRY_MIN_MS;

    for (const [key, list] of alerts) if (!failed.has(key)) for (const alert of list) this.#opts.alert(alert);
    const acknowledged = new Map<string, number>();
    for (const [pod, { source, sequence }] of acked) {
      this.#acked.set(pod, sequence);
      acknowledged.set(pod, sequence);
      this.#opts.acknowledge(source, sequence);
    }
    for (const key of failed) changes.delete(key);
    this.#opts.applied(changes, acknowledged);
  }

  /** Applies one entry to its policy's working document; returns the policy key when the entry was for a known policy. */
  #applyEntry(report: QueuedReport, entry: SpendEntryMessage, flush: FlushState): string | undefined {
    const { working, at, dirty } = flush;
    const { source } = report;
    const key = String(entry.policy ?? '');
    const log = { pod: `${source.namespace}/${source.pod}`, policy: key, user_id: entry.userId, sequence: report.sequence };
    const valid = this.#validEntry(source, entry, log);
    if (!valid) return undefined;
    let doc = working.get(key);
    if (!doc) {
      doc = structuredClone(this.#docs.get(key)?.doc ?? emptyLedger(key));
      working.set(key, doc);
    }
    if ((doc.applied[source.podUid]?.seq ?? 0) >= report.sequence) return key; // applied here before
    dirty.add(key);

    const { policy, amount } = valid;
    const { config } = policy;
    const bounds = periodBounds(config.period, config.timeZone, valid.reported);
    const current = periodBounds(config.period, config.timeZone, at);
    const previousStart = periodBounds(config.period, config.timeZone, current.start - 1).start;
    if (bounds.start < previousStart) {
      this.#opts.logger.warn(
        { ...log, amount_usd: formatUsd(amount), period_start: new Date(bounds.start).toISOString() },
        'spend for a closed period recorded only in the span store',
      );
      return key;
    }
    const { usage, limitUsed } = chargeUser(doc, { config, userId: entry.userId, amount, at, periodStart: bounds.start });
    // Only the current period alerts; a late report for the previous one just completes its record.
    if (bounds.start === current.start) noteCurrentCharge(flush, { key, policy, userId: entry.userId, usage, limitUsed, bounds });
    // Keep the current and the previous period only.
    for (const start of Object.keys(doc.periods)) if (Date.parse(start) < previousStart) delete doc.periods[start];
    return key;
  }

  /** The entry's policy, amount and period, or undefined (logged) when the entry cannot be applied. */
  #validEntry(source: SpendSource, entry: SpendEntryMessage, log: object): { policy: CompiledPolicy; amount: bigint; reported: number } | undefined {
    const key = String(entry.policy ?? '');
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
    let amount: bigint;
    try {
      amount = BigInt(entry.amount);
    } catch {
      amount = -1n;
    }
    const reported = Date.parse(entry.periodStart);
    if (amount <= 0n || amount > MAX_ENTRY_UNITS || typeof entry.userId !== 'string' || entry.userId.length === 0 || entry.userId.length > 256 || Number.isNaN(reported)) {
      this.#opts.logger.warn(log, 'malformed spend report entry ignored');
      return undefined;
    }
    return { policy, amount, reported };
  }
}

/** Adds a charge to a user's period in the document, split over the user's grants as a sidecar would split it. */
function chargeUser(
  doc: LedgerDoc,
  charge: { config: CompiledPolicy['config']; userId: string; amount: bigint; at: number; periodStart: number },
): { usage: UserUsageDoc; limitUsed: bigint } {
  const { config, userId, amount } = charge;
  const users = (doc.periods[new Date(charge.periodStart).toISOString()] ??= {});
  const usage: UserUsageDoc = (users[userId] ??= { spent: '0', limitUsed: '0', alerted: 0 });
  const grantsUsed = (doc.grantsUsed[userId] ??= {});
  const grants: Grant[] = (config.grants ?? [])
    .filter((g) => g.user === userId)
    .map((g) => ({
      id: g.id,
      amount: parseUsd(g.amountUsd) as bigint, // validated when the policy was rendered
      used: BigInt(grantsUsed[g.id] ?? '0'),
      reason: g.reason ?? null,
      createdAt: Date.parse(g.createdAt),
      expiresAt: g.expiresAt ? Date.parse(g.expiresAt) : null,
    }));
  const split = splitCharge(grants, amount, Math.max(charge.at, charge.periodStart));
  usage.spent = addSpend(BigInt(usage.spent), amount).toString();
  const limitUsed = addSpend(BigInt(usage.limitUsed), split.limitPart);
  usage.limitUsed = limitUsed.toString();
  for (const part of split.grantParts) grantsUsed[part.grantId] = addSpend(BigInt(grantsUsed[part.grantId] ?? '0'), part.amount).toString();
  if (Object.keys(grantsUsed).length === 0) delete doc.grantsUsed[userId];
  return { usage, limitUsed };
}

/** A charge in the current period: the thresholds it crossed become alerts, and the user's status changes. */
function noteCurrentCharge(
  flush: FlushState,
  charge: { key: string; policy: CompiledPolicy; userId: string; usage: UserUsageDoc; limitUsed: bigint; bounds: { start: number; end: number } },
): void {
  const { key, policy, userId, usage, limitUsed, bounds } = charge;
  const crossed = newlyCrossed(policy.config.alertThresholds, policy.limit, limitUsed, usage.alerted);
  if (crossed.length > 0) {
    usage.alerted = crossed.at(-1)!;
    const list = flush.alerts.get(key) ?? [];
    for (const threshold of crossed) {
      list.push({ policy: key, userId, threshold, periodStart: bounds.start, periodEnd: bounds.end, spent: BigInt(usage.spent), limit: policy.limit, limitUsed });
    }
    flush.alerts.set(key, list);
  }
  const changed = flush.changes.get(key) ?? new Set<string>();
  changed.add(userId);
  flush.changes.set(key, changed);
}
