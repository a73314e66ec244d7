// The ledger for a fleet of central servers: Firestore, through @google-cloud/firestore (ADR 1303).
//
//   <collection>/<user>                 user_id, policy, period_start, updated_at, and per period P
//                                       spent_P, limit_used_P (integers, ledger units), alerted_P_<threshold>
//   <collection>/<user>/grants/<id>     amount, used, reason, created_at, expires_at
//   <collection>_deductions/<batch id>  one marker per written batch (expire_at for a Firestore TTL policy)
//   <collection>/<user>/alerts/<P>_<t>  one per alert logged
//
// Spend is only ever added with FieldValue.increment, never read-modified-written, so any number of servers
// charge the same user at once without losing an update; each period has fields of its own, so a new period
// needs no reset that could race with a late increment of the old one. A batch also creates its marker with
// an exists=false precondition: a batch retried after a timeout that had in fact committed fails on the
// marker as a whole and is recognised, so an increment is never applied twice. Alerts are claimed the same way.
//
// The client honours FIRESTORE_EMULATOR_HOST as every Google library does (tests run the emulator from npm).

import { FieldValue, Firestore, type DocumentData, type DocumentSnapshot } from '@google-cloud/firestore';
import type { Grant, PeriodUsage } from './budget-record.ts';
import { type BudgetLedger, type DeductionBatch, type LedgerUser, refuseInvalidSpend } from './ledger.ts';

export interface FirestoreLedgerOptions {
  collection: string;
  projectId?: string;
  databaseId?: string;
  /** A client to use instead of creating one (tests). */
  client?: Firestore;
  /**
   * How long a write may take before it counts as failed and is retried (the client's own retries can run
   * for a minute). A write that landed after all is recognised by its marker on the retry.
   */
  writeTimeoutMs?: number;
}

const DEFAULT_WRITE_TIMEOUT_MS = 10_000;

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not complete within ${ms} ms`)), ms);
  });
  // A late rejection of the abandoned write must not surface as unhandled.
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Markers outlive any retry by far; a TTL policy on expire_at can delete them afterwards. */
const MARKER_TTL_MS = 7 * 86_400_000;
const ALREADY_EXISTS = 6;

/** Period field suffix: the start instant's digits, e.g. 20261101T000000000Z → "20261101t000000000z". */
export function periodKey(periodStart: number): string {
  return new Date(periodStart).toISOString().replace(/[-:.]/g, '').toLowerCase();
}

function periodFromKey(key: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})t(\d{2})(\d{2})(\d{2})(\d{3})z$/.exec(key);
  return m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, +m[7]!) : Number.NaN;
}

/** Firestore document ids cannot hold '/', be '.' or '..', or look like __x__; user ids can. */
export function userDocId(userId: string): string {
  return encodeURIComponent(userId).replace(/\./g, '%2E');
}

function int(value: unknown): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return BigInt(Math.trunc(value));
  return 0n;
}

function isAlreadyExists(error: unknown): boolean {
  return (error as { code?: unknown })?.code === ALREADY_EXISTS;
}

export class FirestoreLedger implements BudgetLedger {
  readonly kind = 'firestore' as const;
  readonly #db: Firestore;
  readonly #collection: string;
  readonly #ownsClient: boolean;
  readonly #writeTimeoutMs: number;

  constructor(opts: FirestoreLedgerOptions) {
    this.#collection = opts.collection;
    this.#writeTimeoutMs = opts.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.#ownsClient = opts.client === undefined;
    this.#db =
      opts.client ??
      new Firestore({
        ...(opts.projectId ? { projectId: opts.projectId } : {}),
        ...(opts.databaseId ? { databaseId: opts.databaseId } : {}),
        // int64 fields read back as bigint: amounts never pass through a float.
        useBigInt: true,
        ignoreUndefinedProperties: true,
      });
  }

  #users() {
    return this.#db.collection(this.#collection);
  }

  async load(since: number): Promise<LedgerUser[]> {
    const snapshot = await this.#users().get();
    return Promise.all(snapshot.docs.map((doc) => this.#assemble(doc, since)));
  }

  async loadUser(userId: string, since: number): Promise<LedgerUser | undefined> {
    const doc = await this.#users().doc(userDocId(userId)).get();
    if (!doc.exists) return undefined;
    return this.#assemble(doc, since);
  }

  async #assemble(doc: DocumentSnapshot, since: number): Promise<LedgerUser> {
    const data = doc.data() ?? {};
    const userId = typeof data.user_id === 'string' ? data.user_id : decodeURIComponent(doc.id);
    const periods = new Map<number, PeriodUsage>();
    const usage = (key: string): PeriodUsage => {
      const start = periodFromKey(key);
      let u = periods.get(start);
      if (!u) {
        u = { spent: 0n, limitUsed: 0n, alerted: 0 };
        periods.set(start, u);
      }
      return u;
    };
    for (const [field, value] of Object.entries(data)) {
      let m;
      if ((m = /^spent_(\w+)$/.exec(field))) usage(m[1]!).spent = int(value);
      else if ((m = /^limit_used_(\w+)$/.exec(field))) usage(m[1]!).limitUsed = int(value);
      else if ((m = /^alerted_(\w+)_(\d+)$/.exec(field)) && value === true) {
        const u = usage(m[1]!);
        u.alerted = Math.max(u.alerted, Number(m[2]));
      }
    }
    for (const start of [...periods.keys()]) if (!(start >= since)) periods.delete(start);
    const grants = await doc.ref.collection('grants').get();
    return { userId, periods, grants: grants.docs.map((g) => grantFrom(g.id, g.data())) };
  }

  async deduct(batch: DeductionBatch): Promise<void> {
    // Before the marker: a refused batch leaves nothing behind, not even its id.
    refuseInvalidSpend(batch);
    const writes = this.#db.batch();
    // First, so that even a store that applies a batch write by write refuses a repeat before changing anything.
    writes.create(this.#db.collection(`${this.#collection}_deductions`).doc(batch.id), {
      created_at: new Date(),
      expire_at: new Date(Date.now() + MARKER_TTL_MS),
      users: batch.deltas.length,
    });
    for (const delta of batch.deltas) {
      const key = periodKey(delta.periodStart);
      const user = this.#users().doc(userDocId(delta.userId));
      const fields: DocumentData = {
        user_id: delta.userId,
        policy: delta.policy,
        period_start: new Date(delta.periodStart).toISOString(),
        updated_at: new Date(),
        [`spent_${key}`]: FieldValue.increment(Number(delta.split.amount)),
        [`limit_used_${key}`]: FieldValue.increment(Number(delta.split.limitPart)),
      };
      writes.set(user, fields, { merge: true });
      for (const part of delta.split.grantParts) {
        writes.update(user.collection('grants').doc(part.grantId), { used: FieldValue.increment(Number(part.amount)) });
      }
    }
    try {
      await withTimeout(writes.commit(), this.#writeTimeoutMs, 'the Firestore write');
    } catch (error) {
      if (isAlreadyExists(error)) return; // this batch committed before; its answer was lost
      throw error;
    }
  }

  async addGrant(userId: string, grant: Grant): Promise<void> {
    const user = this.#users().doc(userDocId(userId));
    const writes = this.#db.batch();
    writes.set(user, { user_id: userId, updated_at: new Date() }, { merge: true });
    writes.create(user.collection('grants').doc(grant.id), {
      amount: grant.amount,
      used: grant.used,
      reason: grant.reason,
      created_at: new Date(grant.createdAt).toISOString(),
      expires_at: grant.expiresAt === null ? null : new Date(grant.expiresAt).toISOString(),
    });
    await withTimeout(writes.commit(), this.#writeTimeoutMs, 'the Firestore write');
  }

  async claimAlert(userId: string, periodStart: number, threshold: number): Promise<boolean> {
    const key = periodKey(periodStart);
    const user = this.#users().doc(userDocId(userId));
    try {
      await user
        .collection('alerts')
        .doc(`${key}_${threshold}`)
        .create({ threshold, period_start: new Date(periodStart).toISOString(), at: new Date() });
    } catch (error) {
      if (isAlreadyExists(error)) return false;
      throw error;
    }
    await user.set({ [`alerted_${key}_${threshold}`]: true }, { merge: true });
    return true;
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#db.terminate();
  }
}

function grantFrom(id: string, data: DocumentData): Grant {
  return {
    id,
    amount: int(data.amount),
    used: int(data.used),
    reason: typeof data.reason === 'string' ? data.reason : null,
    createdAt: typeof data.created_at === 'string' ? Date.parse(data.created_at) : 0,
    expiresAt: typeof data.expires_at === 'string' ? Date.parse(data.expires_at) : null,
  };
}
