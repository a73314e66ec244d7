// Which policy limits a user: the policy that names the user id (or the service account it is) exactly, else
// the policy with `*` (which limits each user separately). A user no policy matches is not limited. Above the
// user, a call may also fall under its team's budget and the namespace's (ADR 1312): those are budgets of their
// own, kept under a group key (`@team:<name>`, `@workload:<policy>`, `@namespace:<policy>`) as a user's is kept
// under its id.
// Rate limits (ADR 1313) follow the same levels: a call is counted in the windows of every level whose policy
// sets `rateLimits`, the group's window shared by all its members' calls.
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

/** The level of a budget: a user's own, or one above it (ADR 1312). */
export type BudgetLevel = 'user' | 'team' | 'workload' | 'namespace';

/** One level whose rate limits a call is counted under (ADR 1313): the user id or the group key, and its policy. */
export interface RateLevel {
  readonly key: string;
  readonly level: BudgetLevel;
  readonly policy: BudgetPolicyConfig;
  readonly limits: NonNullable<BudgetPolicyConfig['rateLimits']>;
}

export function compilePolicy(config: BudgetPolicyConfig): CompiledPolicy {
  const limit = parseUsd(config.limitUsd);
  // Policies reach here validated; a string here is a programming error, not input.
  if (typeof limit === 'string') throw new Error(`policy ${config.name}: limitUsd ${limit}`);
  return { config, name: config.name, limit, blocks: config.enforcement === 'block' };
}

/**
 * Ids of budgets above the user level; user ids of this form are reserved (ADR 1312): a call that names one as
 * its user is refused (sidecar/src/pipeline/refusals.ts), since its budget and rate windows would be the group's.
 */
export function isGroupKey(key: string): boolean {
  return key.startsWith('@team:') || key.startsWith('@workload:') || key.startsWith('@namespace:');
}

function groupLevel(key: string): BudgetLevel {
  return key.startsWith('@team:') ? 'team' : key.startsWith('@workload:') ? 'workload' : 'namespace';
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
  /** Per member of a team with rate limits, and for everyone else: the levels above the user that have them (ADR 1313). */
  readonly #rateAbove = new Map<string, readonly RateLevel[]>();
  readonly #rateAboveDefault: readonly RateLevel[];

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
    this.#rateAboveDefault = this.#rateLevelsOf(outer);
    for (const { key, members } of teams) {
      const above = [key, ...outer];
      // Kept only when the team's own policy has rate limits: otherwise a member's are everyone's (the default).
      const rateAbove = this.#groups.get(key)?.config.rateLimits === undefined ? undefined : this.#rateLevelsOf(above);
      for (const member of members) {
        if (this.#above.has(member)) continue;
        this.#above.set(member, above);
        if (rateAbove !== undefined) this.#rateAbove.set(member, rateAbove);
      }
    }
  }

  #rateLevelsOf(keys: readonly string[]): readonly RateLevel[] {
    const levels: RateLevel[] = [];
    for (const key of keys) {
      const policy = this.#groups.get(key)?.config;
      if (policy?.rateLimits !== undefined) levels.push({ key, level: groupLevel(key), policy, limits: policy.rateLimits });
    }
    return levels;
  }

  get empty(): boolean {
    return this.policies.length === 0;
  }

  /**
   * The policy of a budget record's key: a group key's (a budget above the user), else the user's. Not for a
   * caller's user id: one of a group key's form would get the group's policy (#userPolicy is for those).
   */
  match(userId: string): CompiledPolicy | undefined {
    const policy = this.#exact.get(userId) ?? this.#groups.get(userId);
    if (policy !== undefined) return policy;
    // A group key no policy declares any more (a removed team, in the ledger) is not a user `*` limits.
    return isGroupKey(userId) ? undefined : this.#wildcard;
  }

  /** The policy that limits a caller's user id; never a group's, whatever the id looks like. */
  #userPolicy(userId: string): CompiledPolicy | undefined {
    return isGroupKey(userId) ? undefined : (this.#exact.get(userId) ?? this.#wildcard);
  }

  /** The group keys of the budgets above the user level that a call of `userId` falls under: team, workloads, namespace. */
  above(userId: string): readonly string[] {
    return this.#above.get(userId) ?? this.#aboveDefault;
  }

  /**
   * The levels whose rate limits a call of `userId` is counted under, innermost first (user, team, workloads,
   * namespace), or undefined when none has any. Precomputed above the user; a user's own level is one object.
   */
  rateLevels(userId: string): readonly RateLevel[] | undefined {
    const policy = this.#userPolicy(userId)?.config;
    // No team with rate limits: no second lookup on the hot path.
    const above = (this.#rateAbove.size === 0 ? undefined : this.#rateAbove.get(userId)) ?? this.#rateAboveDefault;
    if (policy?.rateLimits === undefined) return above.length === 0 ? undefined : above;
    const own: RateLevel = { key: userId, level: 'user', policy, limits: policy.rateLimits };
    return above.length === 0 ? [own] : [own, ...above];
  }

  byName(name: string): CompiledPolicy | undefined {
    return this.#byName.get(name);
  }
}
