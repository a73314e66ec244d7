// Which policy limits a user: the policy that names the user id (or the service account it is) exactly, else
// the policy with `*` (which limits each user separately). A user no policy matches is not limited. Above the
// user, a call may also fall under its team's budget and the namespace's (ADR 1312): those are budgets of their
// own, kept under a group key (`@team:<name>`, `@workload:<policy>`, `@namespace:<policy>`) as a user's is kept
// under its id.
// Policies are compiled once per config change, so matching a call is Map lookups.

import type { BudgetPolicyConfig } from './budget-config.ts';
import { parseUsd } from './money.ts';
import { serviceAccountUser } from './budget-subjects.ts';

export interface CompiledPolicy {
  readonly config: BudgetPolicyConfig;
  readonly name: string;
  /** The limit in ledger units. */
  readonly limit: bigint;
  readonly blocks: boolean;
}

export const WILDCARD_USER = '*';

export function compilePolicy(config: BudgetPolicyConfig): CompiledPolicy {
  const limit = parseUsd(config.limitUsd);
  // Policies reach here validated; a string here is a programming error, not input.
  if (typeof limit === 'string') throw new Error(`policy ${config.name}: limitUsd ${limit}`);
  return { config, name: config.name, limit, blocks: config.enforcement === 'block' };
}

/** Ids of budgets above the user level; user ids of this form are reserved (ADR 1312). */
function isGroupKey(key: string): boolean {
  return key.startsWith('@team:') || key.startsWith('@workload:') || key.startsWith('@namespace:');
}

export class PolicySet {
  readonly policies: readonly CompiledPolicy[];
  readonly #exact = new Map<string, CompiledPolicy>();
  readonly #wildcard: CompiledPolicy | undefined;
  readonly #byName = new Map<string, CompiledPolicy>();
  /** Budgets above the user level by group key. */
  readonly #groups = new Map<string, CompiledPolicy>();
  /** Per team member: the group keys of its calls (its team's, then the workloads' and the namespace's). */
  readonly #above = new Map<string, readonly string[]>();
  /** The group keys of a call by a user in no team: the workloads' and the namespace's, where policies set them. */
  readonly #aboveDefault: readonly string[];

  constructor(configs: readonly BudgetPolicyConfig[]) {
    this.policies = configs.map(compilePolicy);
    let wildcard: CompiledPolicy | undefined;
    let namespace: string | undefined;
    const workloads: string[] = [];
    const teams: { key: string; members: string[] }[] = [];
    for (const policy of this.policies) {
      const { config } = policy;
      this.#byName.set(policy.name, policy);
      for (const user of [...config.users, ...(config.serviceAccounts ?? []).map(serviceAccountUser)]) {
        if (user === WILDCARD_USER) wildcard ??= policy;
        else if (!this.#exact.has(user)) this.#exact.set(user, policy);
      }
      // Two BudgetPolicies with different selectors may name one team for this pod: the first keeps it.
      if (config.team && !this.#groups.has(`@team:${config.team.name}`)) {
        const key = `@team:${config.team.name}`;
        this.#groups.set(key, policy);
        teams.push({ key, members: [...config.team.users, ...config.team.serviceAccounts.map(serviceAccountUser)] });
      }
      if (config.scope === 'Workload') {
        // The operator sends a sidecar only the policies whose selector picks its pod: each one here applies.
        const key = `@workload:${policy.name}`;
        this.#groups.set(key, policy);
        workloads.push(key);
      }
      if (config.scope === 'Namespace' && namespace === undefined) {
        namespace = `@namespace:${policy.name}`;
        this.#groups.set(namespace, policy);
      }
    }
    this.#wildcard = wildcard;
    const outer = namespace === undefined ? workloads : [...workloads, namespace];
    this.#aboveDefault = outer;
    for (const { key, members } of teams) {
      const above = [key, ...outer];
      for (const member of members) if (!this.#above.has(member)) this.#above.set(member, above);
    }
  }

  get empty(): boolean {
    return this.policies.length === 0;
  }

  /** The policy that limits `userId` (or the group key of a budget above the user), or undefined when none does. */
  match(userId: string): CompiledPolicy | undefined {
    const policy = this.#exact.get(userId) ?? this.#groups.get(userId);
    if (policy !== undefined) return policy;
    // A group key no policy declares any more (a removed team, in the ledger) is not a user `*` limits.
    return isGroupKey(userId) ? undefined : this.#wildcard;
  }

  /** The group keys of the budgets above the user level that a call of `userId` falls under: team, workloads, namespace. */
  above(userId: string): readonly string[] {
    return this.#above.get(userId) ?? this.#aboveDefault;
  }

  byName(name: string): CompiledPolicy | undefined {
    return this.#byName.get(name);
  }
}
