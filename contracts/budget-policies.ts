// Which policy limits a user: the first policy that names the user id exactly, else the first policy with
// `*` (which limits each user separately). A user no policy matches is not limited. Policies are compiled
// once per config change, so matching a call is one Map lookup.

import type { BudgetPolicyConfig } from './budget-config.ts';
import { parseUsd } from './money.ts';

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

export class PolicySet {
  readonly policies: readonly CompiledPolicy[];
  readonly #exact = new Map<string, CompiledPolicy>();
  readonly #wildcard: CompiledPolicy | undefined;
  readonly #byName = new Map<string, CompiledPolicy>();

  constructor(configs: readonly BudgetPolicyConfig[]) {
    this.policies = configs.map(compilePolicy);
    let wildcard: CompiledPolicy | undefined;
    for (const policy of this.policies) {
      this.#byName.set(policy.name, policy);
      for (const user of policy.config.users) {
        if (user === WILDCARD_USER) wildcard ??= policy;
        else if (!this.#exact.has(user)) this.#exact.set(user, policy);
      }
    }
    this.#wildcard = wildcard;
  }

  get empty(): boolean {
    return this.policies.length === 0;
  }

  /** The policy that limits `userId`, or undefined when none does. */
  match(userId: string): CompiledPolicy | undefined {
    return this.#exact.get(userId) ?? this.#wildcard;
  }

  byName(name: string): CompiledPolicy | undefined {
    return this.#byName.get(name);
  }
}
