// A ledger in process memory: budgets last as long as the process. For tests and throwaway runs.

import { addSpend } from '../../../contracts/money.ts';
import type { Grant } from './budget-record.ts';
import type { BudgetLedger, DeductionBatch, LedgerUser } from './ledger.ts';

export class MemoryLedger implements BudgetLedger {
  readonly kind = 'memory' as const;
  readonly #users = new Map<string, LedgerUser>();

  #user(userId: string): LedgerUser {
    let user = this.#users.get(userId);
    if (!user) {
      user = { userId, periods: new Map(), grants: [] };
      this.#users.set(userId, user);
    }
    return user;
  }

  async load(since: number): Promise<LedgerUser[]> {
    return [...this.#users.values()].map((u) => copyUser(u, since));
  }

  async loadUser(userId: string, since: number): Promise<LedgerUser | undefined> {
    return this.readUser(userId, since);
  }

  readUser(userId: string, since: number): LedgerUser | undefined {
    const user = this.#users.get(userId);
    return user ? copyUser(user, since) : undefined;
  }

  userIds(after: string | null, limit: number): string[] {
    return [...this.#users.keys()]
      .filter((id) => after === null || id > after)
      .sort()
      .slice(0, limit);
  }

  async deduct(batch: DeductionBatch): Promise<void> {
    for (const delta of batch.deltas) {
      const user = this.#user(delta.userId);
      const usage = user.periods.get(delta.periodStart) ?? { spent: 0n, limitUsed: 0n, alerted: 0 };
      usage.spent = addSpend(usage.spent, delta.split.amount);
      usage.limitUsed = addSpend(usage.limitUsed, delta.split.limitPart);
      if (delta.alerted > usage.alerted) usage.alerted = delta.alerted;
      user.periods.set(delta.periodStart, usage);
      for (const part of delta.split.grantParts) {
        const grant = user.grants.find((g) => g.id === part.grantId);
        if (grant) grant.used = addSpend(grant.used, part.amount);
      }
    }
  }

  async addGrant(userId: string, grant: Grant): Promise<void> {
    this.#user(userId).grants.push({ ...grant });
  }

  async claimAlert(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {}
}

function copyUser(user: LedgerUser, since: number): LedgerUser {
  return {
    userId: user.userId,
    periods: new Map([...user.periods].filter(([start]) => start >= since).map(([start, u]) => [start, { ...u }])),
    grants: user.grants.map((g) => ({ ...g })),
  };
}
