// Sends each connected sidecar the budgets that apply to its pod: the BudgetPolicies of its namespace whose
// selector matches the pod's labels (in name order: the first that names a user exactly, else the first
// with `*`, limits that user), the cluster-wide usage of their users, and how far the usage includes the
// pod's own reports. A sidecar gets everything when it connects or its policies change, then only the users
// whose usage a ledger flush changed, so every pod refuses a user within a report-and-push round trip of
// the budget being spent anywhere.

import type { Logger } from 'pino';
import type { BudgetPolicyConfig } from '../../../contracts/budget-config.ts';
import type { LabelSelector } from '../../../crds/index.ts';
import type { BudgetUsageMessage, OperatorMessage } from '../../../contracts/push-protocol.ts';
import { MAX_USAGE_PER_MESSAGE } from '../../../contracts/push-protocol.ts';
import type { ClusterLedger, UserUsage } from './cluster-ledger.ts';
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

export class BudgetDistributor {
  readonly #ledger: ClusterLedger;
  readonly #logger: Logger;
  readonly #now: () => number;
  #sidecars = new Map<string, SidecarState>();
  #policies = new Map<string, DistributedPolicy>();

  constructor(opts: { ledger: ClusterLedger; logger: Logger; now?: () => number }) {
    this.#ledger = opts.ledger;
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
  }

  connect(sidecar: BudgetSidecar): void {
    const state: SidecarState = { sidecar, policies: [], policiesJson: '', includes: 0 };
    this.#sidecars.set(sidecar.id, state);
    this.#sendFull(state);
  }

  /** Forgets a stream; returns its pod's namespace (whose policies' sidecar counts changed). */
  disconnect(id: string): string | undefined {
    const state = this.#sidecars.get(id);
    this.#sidecars.delete(id);
    return state?.sidecar.namespace;
  }

  /** A policy was accepted, changed or removed (undefined). Sidecars of its namespace get their new set. */
  setPolicy(key: string, policy: DistributedPolicy | undefined): void {
    const before = this.#policies.get(key);
    if (policy) this.#policies.set(key, policy);
    else this.#policies.delete(key);
    if (JSON.stringify(before) === JSON.stringify(policy)) return;
    const namespace = key.slice(0, key.indexOf('/'));
    for (const state of this.#sidecars.values()) if (state.sidecar.namespace === namespace) this.#sendFull(state);
  }

  /** Tells the pod's stream(s) that its reports up to `sequence` are durable. */
  acknowledge(podUid: string, sequence: number): void {
    for (const state of [...this.#sidecars.values()]) {
      if (state.sidecar.podUid !== podUid) continue;
      try {
        state.sidecar.send({ spendAck: { sequence: String(sequence) } });
      } catch {
        this.#sidecars.delete(state.sidecar.id);
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

  /** After a ledger flush: changed users to the sidecars that enforce their policies, and new `includes`. */
  applied(changes: Map<string, Set<string>>, acknowledged: Map<string, number>): void {
    const at = this.#now();
    const usageCache = new Map<string, BudgetUsageMessage[]>();
    for (const state of [...this.#sidecars.values()]) {
      const usage: BudgetUsageMessage[] = [];
      for (const key of state.policies) {
        const users = changes.get(key);
        if (!users) continue;
        let list = usageCache.get(key);
        if (!list) {
          list = this.#ledger.usageOf(key, users, at).map((u) => usageMessage(key, u));
          usageCache.set(key, list);
        }
        usage.push(...list);
      }
      const ack = acknowledged.get(state.sidecar.podUid);
      if (ack !== undefined && ack > state.includes) state.includes = ack;
      if (usage.length === 0 && ack === undefined) continue;
      this.#send(state, { replace: false, policiesJson: '', policiesChanged: false, usage, includesSequence: String(state.includes), defaultUser: defaultUser(state.sidecar) });
    }
  }

  #applicable(sidecar: BudgetSidecar): string[] {
    return [...this.#policies]
      .filter(([key, p]) => key.startsWith(`${sidecar.namespace}/`) && selectorMatches(p.selector, sidecar.labels))
      .map(([key]) => key)
      .sort();
  }

  #sendFull(state: SidecarState): void {
    const at = this.#now();
    state.policies = this.#applicable(state.sidecar);
    state.policiesJson = JSON.stringify(state.policies.map((key) => this.#policies.get(key)!.config));
    state.includes = Math.max(state.includes, this.#ledger.acknowledged(state.sidecar.podUid));
    const usage = state.policies.flatMap((key) => this.#ledger.usage(key, at).map((u) => usageMessage(key, u)));
    const base = { policiesJson: state.policiesJson, includesSequence: String(state.includes), defaultUser: defaultUser(state.sidecar) };
    this.#send(state, { ...base, replace: true, policiesChanged: true, usage: usage.slice(0, MAX_USAGE_PER_MESSAGE) });
    for (let i = MAX_USAGE_PER_MESSAGE; i < usage.length; i += MAX_USAGE_PER_MESSAGE) {
      this.#send(state, { ...base, policiesJson: '', replace: false, policiesChanged: false, usage: usage.slice(i, i + MAX_USAGE_PER_MESSAGE) });
    }
  }

  #send(state: SidecarState, budgetState: NonNullable<OperatorMessage['budgetState']>): void {
    try {
      state.sidecar.send({ budgetState });
    } catch (error) {
      this.#logger.debug({ pod: `${state.sidecar.namespace}/${state.sidecar.podName}`, err: (error as Error).message }, 'could not send budget state; the stream is gone');
      this.#sidecars.delete(state.sidecar.id);
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
