// A ledger in process memory: budgets last as long as the process. For tests and throwaway runs.

import type { Grant } from './budget-record.ts';
import { applyDelta, type BudgetLedger, type DeductionBatch, type LedgerUser, ledgerUser, refuseInvalidSpend } from './ledger.ts';

export class MemoryLedger implements BudgetLedger {
  readonly kind = 'memory' as const;
  readonly #users = new Map<string, LedgerUser>();

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
    refuseInvalidSpend(batch);
    for (const delta of batch.deltas) applyDelta(ledgerUser(this.#users, delta.userId), delta);
  }

  async addGrant(userId: string, grant: Grant): Promise<void> {
    ledgerUser(this.#users, userId).grants.push({ ...grant });
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
