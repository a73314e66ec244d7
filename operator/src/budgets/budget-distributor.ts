// Sends each connected sidecar the budgets that apply to its pod: the BudgetPolicies of its namespace whose
// selector matches the pod's labels (in name order: the first that names a user exactly, else the first with
// `*`, limits that user), and the cluster-wide usage of the users that matter to it (ADR 1307):
//
// - every user whose budget is used up: every sidecar of the policy must refuse them, whoever spent it;
// - the users the pod itself charged (its last MAX_INTEREST_PER_POD): what it enforces with its own spend.
//
// Not every user to every sidecar: that grows with users changed × sidecars, which at a thousand sidecars is
// more than one operator can send. A sidecar that has not charged a user yet knows only its own spend of them,
// which decides nothing until the budget is used up, and that is sent to all. With the usage goes how far it
// includes the pod's own reports. A sidecar gets its policies and the used-up users when it connects or its
// policies change, then only what changed, after every round of applied reports.

import type { Logger } from 'pino';
import type { BudgetPolicyConfig } from '../../../contracts/budget-config.ts';
import type { LabelSelector } from '../../../crds/index.ts';
import type { BudgetUsageMessage, OperatorMessage } from '../../../contracts/push-protocol.ts';
import { MAX_USAGE_PER_MESSAGE } from '../../../contracts/push-protocol.ts';
import type { CompiledPolicy } from '../../../contracts/budget-policies.ts';
import { type AppliedReports, type ClusterLedger, remainingUnits, type UserUsage } from './cluster-ledger.ts';
import { selectorMatches } from './label-selector.ts';

export interface BudgetSidecar {
  id: string;
  namespace: string;
  podName: string;
  podUid: string;
  serviceAccount: string;
  labels: Record<string, string>;
  /** Throws when the stream is gone. */
  send(message: OperatorMessage): void;
}

export interface DistributedPolicy {
  config: BudgetPolicyConfig;
  selector?: LabelSelector;
}

interface SidecarState {
  sidecar: BudgetSidecar;
  policies: string[];
  policiesJson: string;
  includes: number;
}

/** Users a pod charged whose usage it is sent; the oldest are forgotten first (a bound on operator memory). */
export const MAX_INTEREST_PER_POD = 256;

export class BudgetDistributor {
  readonly #ledger: ClusterLedger;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #compiled: (key: string) => CompiledPolicy | undefined;
  #sidecars = new Map<string, SidecarState>();
  #policies = new Map<string, DistributedPolicy>();
  /** Pod UID → its streams (one, or two while it reconnects). */
  #pods = new Map<string, Set<SidecarState>>();
  /** Pod UID → `policy\0user` it charged, oldest first; and the reverse. */
  #interest = new Map<string, Map<string, true>>();
  #interested = new Map<string, Set<string>>();

  constructor(opts: { ledger: ClusterLedger; logger: Logger; compiled: (key: string) => CompiledPolicy | undefined; now?: () => number }) {
    this.#ledger = opts.ledger;
    this.#logger = opts.logger;
    this.#compiled = opts.compiled;
    this.#now = opts.now ?? Date.now;
  }

  connect(sidecar: BudgetSidecar): void {
    const state: SidecarState = { sidecar, policies: [], policiesJson: '', includes: 0 };
    this.#sidecars.set(sidecar.id, state);
    let streams = this.#pods.get(sidecar.podUid);
    if (!streams) {
      streams = new Set();
      this.#pods.set(sidecar.podUid, streams);
    }
    streams.add(state);
    this.#sendFull(state);
  }

  /** Forgets a stream; returns its pod's namespace (whose policies' sidecar counts changed). */
  disconnect(id: string): string | undefined {
    const state = this.#sidecars.get(id);
    if (!state) return undefined;
    this.#forget(state);
    return state.sidecar.namespace;
  }

  /** Pods with a stream open now. */
  connectedPods(): Set<string> {
    return new Set(this.#pods.keys());
  }

  /** A policy was accepted, changed or removed (undefined). Sidecars of its namespace get their new set. */
  setPolicy(key: string, policy: DistributedPolicy | undefined): void {
    const before = this.#policies.get(key);
    if (policy) this.#policies.set(key, policy);
    else this.#policies.delete(key);
    if (JSON.stringify(before) === JSON.stringify(policy)) return;
    const namespace = key.slice(0, key.indexOf('/'));
    for (const state of [...this.#sidecars.values()]) if (state.sidecar.namespace === namespace) this.#sendFull(state);
  }

  /** The ledger was read again: every sidecar starts over from what it holds. */
  resync(): void {
    for (const state of [...this.#sidecars.values()]) {
      state.includes = 0;
      this.#sendFull(state);
    }
  }

  /** Tells the pod's stream(s) that its reports up to `sequence` are durable. */
  acknowledge(podUid: string, sequence: number): void {
    for (const state of [...(this.#pods.get(podUid) ?? [])]) {
      try {
        state.sidecar.send({ spendAck: { sequence: String(sequence) } });
      } catch {
        this.#forget(state);
      }
    }
  }

  /** Policy keys of a namespace (for status refreshes when its sidecars come and go). */
  policiesIn(namespace: string): string[] {
    return [...this.#policies.keys()].filter((key) => key.startsWith(`${namespace}/`));
  }

  /** Connected sidecars whose pod a policy selects. */
  sidecarsFor(key: string): number {
    let n = 0;
    for (const state of this.#sidecars.values()) if (state.policies.includes(key)) n++;
    return n;
  }

  /** After a round of applied reports: changed users to the sidecars they matter to, and new `includes`. */
  applied(result: AppliedReports): void {
    for (const [pod, users] of result.charged) this.#noteInterest(pod, users);
    const at = this.#now();
    const outbox = new Map<SidecarState, BudgetUsageMessage[]>();
    for (const [key, users] of result.changes) {
      const policy = this.#compiled(key);
      for (const userId of users) {
        const usage = this.#ledger.userUsage(key, userId, at);
        if (!usage) continue;
        const message = usageMessage(key, usage);
        const everyone = policy?.blocks === true && remainingUnits(policy, usage, at) <= 0n;
        for (const state of everyone ? this.#sidecarsOf(key) : this.#interestedIn(key, userId)) {
          let list = outbox.get(state);
          if (!list) {
            list = [];
            outbox.set(state, list);
          }
          list.push(message);
        }
      }
    }
    for (const [pod, sequence] of result.applied) {
      for (const state of this.#pods.get(pod) ?? []) {
        if (sequence > state.includes) state.includes = sequence;
        if (!outbox.has(state)) outbox.set(state, []);
      }
    }
    for (const [state, usage] of outbox) this.#sendUsage(state, usage);
  }

  #sendUsage(state: SidecarState, usage: BudgetUsageMessage[]): void {
    const base = { replace: false, policiesJson: '', policiesChanged: false, includesSequence: String(state.includes), defaultUser: defaultUser(state.sidecar) };
    for (let i = 0; i === 0 || i < usage.length; i += MAX_USAGE_PER_MESSAGE) {
      if (!this.#send(state, { ...base, usage: usage.slice(i, i + MAX_USAGE_PER_MESSAGE) })) return;
    }
  }

  *#sidecarsOf(key: string): Generator<SidecarState> {
    for (const state of this.#sidecars.values()) if (state.policies.includes(key)) yield state;
  }

  *#interestedIn(key: string, userId: string): Generator<SidecarState> {
    for (const pod of this.#interested.get(`${key}\0${userId}`) ?? []) {
      for (const state of this.#pods.get(pod) ?? []) if (state.policies.includes(key)) yield state;
    }
  }

  #noteInterest(pod: string, users: Set<string>): void {
    if (!this.#pods.has(pod)) return;
    let mine = this.#interest.get(pod);
    if (!mine) {
      mine = new Map();
      this.#interest.set(pod, mine);
    }
    for (const user of users) {
      // Most recent last: a Map keeps insertion order, so the first entry is the one charged longest ago.
      mine.delete(user);
      mine.set(user, true);
      let pods = this.#interested.get(user);
      if (!pods) {
        pods = new Set();
        this.#interested.set(user, pods);
      }
      pods.add(pod);
    }
    for (const user of mine.keys()) {
      if (mine.size <= MAX_INTEREST_PER_POD) break;
      mine.delete(user);
      this.#dropInterest(pod, user);
    }
  }

  #dropInterest(pod: string, user: string): void {
    const pods = this.#interested.get(user);
    pods?.delete(pod);
    if (pods?.size === 0) this.#interested.delete(user);
  }

  #forget(state: SidecarState): void {
    this.#sidecars.delete(state.sidecar.id);
    const pod = state.sidecar.podUid;
    const streams = this.#pods.get(pod);
    streams?.delete(state);
    if (streams && streams.size > 0) return;
    this.#pods.delete(pod);
    for (const user of this.#interest.get(pod)?.keys() ?? []) this.#dropInterest(pod, user);
    this.#interest.delete(pod);
  }

  #applicable(sidecar: BudgetSidecar): string[] {
    return [...this.#policies]
      .filter(([key, p]) => key.startsWith(`${sidecar.namespace}/`) && selectorMatches(p.selector, sidecar.labels))
      .map(([key]) => key)
      .sort();
  }

  /** Replaces the sidecar's budget state: its policies, the used-up users, and what of its reports is in them. */
  #sendFull(state: SidecarState): void {
    const at = this.#now();
    state.policies = this.#applicable(state.sidecar);
    state.policiesJson = JSON.stringify(state.policies.map((key) => this.#policies.get(key)!.config));
    state.includes = Math.max(state.includes, this.#ledger.applied(state.sidecar.podUid));
    const usage = state.policies.flatMap((key) => this.#ledger.exhausted(key, at).map((u) => usageMessage(key, u)));
    const sent = new Set(usage.map((m) => `${m.policy}\0${m.userId}`));
    for (const user of this.#interest.get(state.sidecar.podUid)?.keys() ?? []) {
      const key = user.slice(0, user.indexOf('\0'));
      const u = !sent.has(user) && state.policies.includes(key) ? this.#ledger.userUsage(key, user.slice(key.length + 1), at) : undefined;
      if (u) usage.push(usageMessage(key, u));
    }
    const base = { policiesJson: state.policiesJson, includesSequence: String(state.includes), defaultUser: defaultUser(state.sidecar) };
    if (!this.#send(state, { ...base, replace: true, policiesChanged: true, usage: usage.slice(0, MAX_USAGE_PER_MESSAGE) })) return;
    for (let i = MAX_USAGE_PER_MESSAGE; i < usage.length; i += MAX_USAGE_PER_MESSAGE) {
      if (!this.#send(state, { ...base, policiesJson: '', replace: false, policiesChanged: false, usage: usage.slice(i, i + MAX_USAGE_PER_MESSAGE) })) return;
    }
  }

  #send(state: SidecarState, budgetState: NonNullable<OperatorMessage['budgetState']>): boolean {
    try {
      state.sidecar.send({ budgetState });
      return true;
    } catch (error) {
      this.#logger.debug({ pod: `${state.sidecar.namespace}/${state.sidecar.podName}`, err: (error as Error).message }, 'could not send budget state; the stream is gone');
      this.#forget(state);
      return false;
    }
  }
}

function defaultUser(sidecar: BudgetSidecar): string {
  return `system:serviceaccount:${sidecar.namespace}:${sidecar.serviceAccount}`;
}

function usageMessage(policy: string, u: UserUsage): BudgetUsageMessage {
  return {
    policy,
    userId: u.userId,
    periodStart: new Date(u.periodStart).toISOString(),
    spent: u.spent.toString(),
    limitUsed: u.limitUsed.toString(),
    alerted: u.alerted,
    grants: [...u.grantsUsed].map(([id, used]) => ({ id, used: used.toString() })),
  };
}
