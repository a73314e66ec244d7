// The cluster budget ledger in the leader's memory (ADR 1307): per BudgetPolicy, each user's spend in the
// current and the previous period, what each grant has absorbed, and per pod the last spend report applied. A
// report is applied here as soon as it arrives; what changed since the last write is kept as dirty keys, and
// goes to the API server as a patch of absolute values (ledger-log.ts), so writing a patch twice, or applying
// it to a state that already holds it, changes nothing.

import { addSpend } from '../../../contracts/money.ts';

export interface UsageRecord {
  spent: bigint;
  limitUsed: bigint;
  /** Highest alert threshold reached this period (0: none). */
  alerted: number;
}

export interface Watermark {
  /** The last report of the pod applied to this policy. */
  seq: number;
  /** `namespace/name`, for pruning once the pod is gone. */
  pod: string;
  /** When it was applied (epoch ms). */
  at: number;
}

/** One policy's ledger. */
export class PolicyLedger {
  /** Period start (epoch ms) → user → usage. */
  readonly periods = new Map<number, Map<string, UsageRecord>>();
  /** user → grant id → units absorbed (across periods). */
  readonly grantsUsed = new Map<string, Map<string, bigint>>();
  /** pod UID → the last report of that pod applied here. */
  readonly applied = new Map<string, Watermark>();

  users(periodStart: number): Map<string, UsageRecord> {
    let users = this.periods.get(periodStart);
    if (!users) {
      users = new Map();
      this.periods.set(periodStart, users);
    }
    return users;
  }

  grants(userId: string): Map<string, bigint> {
    let grants = this.grantsUsed.get(userId);
    if (!grants) {
      grants = new Map();
      this.grantsUsed.set(userId, grants);
    }
    return grants;
  }
}

/** The JSON of a patch: absolute values of what it names. Amounts are decimal strings of ledger units. */
export interface PolicyPatch {
  /** The policy's ledger was deleted before what follows (a policy deleted, perhaps created again). */
  removed?: true;
  /** Period start (RFC 3339) → user → [spent, limitUsed, alerted]. */
  periods?: Record<string, Record<string, [string, string, number]>>;
  /** user → grant id → used. */
  grants?: Record<string, Record<string, string>>;
  /** pod UID → [seq, namespace/pod, applied at (epoch ms)]; null: the watermark was pruned. */
  applied?: Record<string, [number, string, number] | null>;
}

export interface LedgerPatch {
  v: 2;
  policies: Record<string, PolicyPatch>;
}

/** What changed since the last patch was taken. */
class Dirty {
  readonly users = new Map<string, Set<string>>();
  readonly grants = new Map<string, Set<string>>();
  readonly applied = new Map<string, Set<string>>();
  readonly removed = new Set<string>();
  userCount = 0;

  add(map: Map<string, Set<string>>, policy: string, key: string): boolean {
    let keys = map.get(policy);
    if (!keys) {
      keys = new Set();
      map.set(policy, keys);
    }
    if (keys.has(key)) return false;
    keys.add(key);
    return true;
  }

  get empty(): boolean {
    return this.users.size === 0 && this.grants.size === 0 && this.applied.size === 0 && this.removed.size === 0;
  }
}

const SEP = '\0';

export class LedgerState {
  readonly policies = new Map<string, PolicyLedger>();
  #dirty = new Dirty();

  policy(key: string): PolicyLedger {
    let ledger = this.policies.get(key);
    if (!ledger) {
      ledger = new PolicyLedger();
      this.policies.set(key, ledger);
    }
    return ledger;
  }

  /** Users (with their period) changed since the last patch was taken. */
  get dirtyUsers(): number {
    return this.#dirty.userCount;
  }

  get dirty(): boolean {
    return !this.#dirty.empty;
  }

  /** Adds a charge to a user's usage and grants; marks them changed. */
  charge(key: string, periodStart: number, userId: string, split: { amount: bigint; limitPart: bigint; grantParts: { grantId: string; amount: bigint }[] }): UsageRecord {
    const ledger = this.policy(key);
    const users = ledger.users(periodStart);
    let usage = users.get(userId);
    if (!usage) {
      usage = { spent: 0n, limitUsed: 0n, alerted: 0 };
      users.set(userId, usage);
    }
    usage.spent = addSpend(usage.spent, split.amount);
    usage.limitUsed = addSpend(usage.limitUsed, split.limitPart);
    if (this.#dirty.add(this.#dirty.users, key, `${periodStart}${SEP}${userId}`)) this.#dirty.userCount++;
    if (split.grantParts.length > 0) {
      const grants = ledger.grants(userId);
      for (const part of split.grantParts) grants.set(part.grantId, addSpend(grants.get(part.grantId) ?? 0n, part.amount));
      this.#dirty.add(this.#dirty.grants, key, userId);
    }
    return usage;
  }

  /** The user's alerted threshold changed (it travels with the usage). */
  touchUser(key: string, periodStart: number, userId: string): void {
    if (this.#dirty.add(this.#dirty.users, key, `${periodStart}${SEP}${userId}`)) this.#dirty.userCount++;
  }

  setApplied(key: string, podUid: string, mark: Watermark): void {
    this.policy(key).applied.set(podUid, mark);
    this.#dirty.add(this.#dirty.applied, key, podUid);
  }

  pruneWatermark(key: string, podUid: string): void {
    const ledger = this.policies.get(key);
    if (!ledger?.applied.delete(podUid)) return;
    this.#dirty.add(this.#dirty.applied, key, podUid);
  }

  /** Drops periods that started before `keepFrom` (they are written out with the next compaction). */
  prunePeriods(key: string, keepFrom: number): void {
    const ledger = this.policies.get(key);
    if (!ledger) return;
    for (const start of ledger.periods.keys()) if (start < keepFrom) ledger.periods.delete(start);
  }

  remove(key: string): void {
    if (!this.policies.delete(key)) return;
    this.#dirty.users.delete(key);
    this.#dirty.grants.delete(key);
    this.#dirty.applied.delete(key);
    this.#dirty.removed.add(key);
  }

  /** What changed since the last call, as a patch of absolute values; starts a new set of changes. */
  takePatch(): LedgerPatch {
    const dirty = this.#dirty;
    this.#dirty = new Dirty();
    const patch: LedgerPatch = { v: 2, policies: {} };
    for (const key of dirty.removed) patch.policies[key] = { removed: true };
    const policyPatch = (key: string): PolicyPatch => (patch.policies[key] ??= {});
    for (const [key, users] of dirty.users) {
      const ledger = this.policies.get(key);
      if (!ledger) continue;
      const periods = (policyPatch(key).periods ??= {});
      for (const entry of users) {
        const at = entry.indexOf(SEP);
        const start = Number(entry.slice(0, at));
        const userId = entry.slice(at + 1);
        const usage = ledger.periods.get(start)?.get(userId);
        if (usage) (periods[new Date(start).toISOString()] ??= {})[userId] = [usage.spent.toString(), usage.limitUsed.toString(), usage.alerted];
      }
    }
    for (const [key, users] of dirty.grants) {
      const ledger = this.policies.get(key);
      if (!ledger) continue;
      const grants = (policyPatch(key).grants ??= {});
      for (const userId of users) grants[userId] = Object.fromEntries([...(ledger.grantsUsed.get(userId) ?? [])].map(([id, used]) => [id, used.toString()]));
    }
    for (const [key, pods] of dirty.applied) {
      const ledger = this.policies.get(key);
      const applied = (policyPatch(key).applied ??= {});
      for (const podUid of pods) {
        const mark = ledger?.applied.get(podUid);
        applied[podUid] = mark ? [mark.seq, mark.pod, mark.at] : null;
      }
    }
    return patch;
  }

  /** The whole state as patches of at most ~maxBytes of JSON each (a compaction's base). */
  chunks(maxBytes: number): LedgerPatch[] {
    const out: LedgerPatch[] = [];
    let current: LedgerPatch = { v: 2, policies: {} };
    let bytes = 0;
    const room = (size: number) => {
      if (bytes + size > maxBytes && bytes > 0) {
        out.push(current);
        current = { v: 2, policies: {} };
        bytes = 0;
      }
      bytes += size;
      return current;
    };
    for (const [key, ledger] of this.policies) {
      // Present even when empty, so a policy that lost all its users is not read back as absent.
      room(key.length + 8).policies[key] ??= {};
      for (const [start, users] of ledger.periods) {
        const iso = new Date(start).toISOString();
        for (const [userId, u] of users) {
          const value: [string, string, number] = [u.spent.toString(), u.limitUsed.toString(), u.alerted];
          const target = room(userId.length + value[0].length + value[1].length + 16);
          (((target.policies[key] ??= {}).periods ??= {})[iso] ??= {})[userId] = value;
        }
      }
      for (const [userId, grants] of ledger.grantsUsed) {
        const value = Object.fromEntries([...grants].map(([id, used]) => [id, used.toString()]));
        room(userId.length + JSON.stringify(value).length + 4);
        ((current.policies[key] ??= {}).grants ??= {})[userId] = value;
      }
      for (const [podUid, mark] of ledger.applied) {
        room(podUid.length + mark.pod.length + 40);
        ((current.policies[key] ??= {}).applied ??= {})[podUid] = [mark.seq, mark.pod, mark.at];
      }
    }
    if (bytes > 0 || out.length === 0) out.push(current);
    return out;
  }

  /** Applies a patch read back from the API server: absolute values, so order within it does not matter. */
  applyPatch(patch: LedgerPatch): void {
    for (const [key, p] of Object.entries(patch.policies ?? {})) {
      if (p.removed) this.policies.delete(key);
      if (p.removed && !p.periods && !p.grants && !p.applied) continue;
      const ledger = this.policy(key);
      for (const [iso, users] of Object.entries(p.periods ?? {})) {
        const target = ledger.users(Date.parse(iso));
        for (const [userId, [spent, limitUsed, alerted]] of Object.entries(users)) target.set(userId, { spent: BigInt(spent), limitUsed: BigInt(limitUsed), alerted });
      }
      for (const [userId, grants] of Object.entries(p.grants ?? {})) {
        ledger.grantsUsed.set(userId, new Map(Object.entries(grants).map(([id, used]) => [id, BigInt(used)])));
      }
      for (const [podUid, mark] of Object.entries(p.applied ?? {})) {
        if (mark === null) ledger.applied.delete(podUid);
        else ledger.applied.set(podUid, { seq: mark[0], pod: mark[1], at: mark[2] });
      }
    }
  }
}
