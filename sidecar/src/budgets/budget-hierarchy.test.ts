// Budgets above the user (ADR 1312): a call is admitted only if its user's, its team's and the namespace's
// budgets all have room, and its cost lands at each. Every expected amount is worked out by hand beside it.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import { parseUsd } from '../../../contracts/money.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { BudgetBook, chargeFinishedCall, type ReserveOutcome } from './budget-book.ts';
import { LedgerBudgets } from './ledger-budgets.ts';
import { SqliteLedger } from './sqlite-ledger.ts';

const usd = (text: string) => parseUsd(text) as bigint;
const T0 = Date.parse('2026-11-10T12:00:00Z');

const POLICIES = [
  { name: 'per-user', users: ['*'], limitUsd: '1' },
  { name: 'payments', team: { name: 'payments', users: ['alice', 'bob'], serviceAccounts: ['shop/checkout'] }, limitUsd: '1.5' },
  { name: 'shop', scope: 'Namespace', limitUsd: '2' },
];

function book(list: unknown[] = POLICIES): BudgetBook {
  return new BudgetBook(new PolicySet(parseBudgetPolicies(list, 'policies')));
}

function admitted(outcome: ReserveOutcome | null): () => void {
  if (outcome === null || outcome.refusal) throw new Error(`expected the call admitted, got ${JSON.stringify(outcome)}`);
  return outcome.release;
}

/** Charges a finished call the way the engines do: to every level it falls under. */
function charge(b: BudgetBook, userId: string, amount: string): void {
  chargeFinishedCall(b, pino({ level: 'silent' }), { userId, costUsd: Number(amount), at: T0 }, () => undefined);
}

const spent = (b: BudgetBook, key: string) => b.record(key, T0)?.spent;

describe('matching', () => {
  it('puts a team member under the team and the namespace, and anyone else under the namespace only', () => {
    const set = new PolicySet(parseBudgetPolicies(POLICIES, 'policies'));
    expect(set.above('alice')).toEqual(['@team:payments', '@namespace:shop']);
    expect(set.above('system:serviceaccount:shop:checkout')).toEqual(['@team:payments', '@namespace:shop']);
    expect(set.above('carol')).toEqual(['@namespace:shop']);
    expect(set.match('@team:payments')?.name).toBe('payments');
    expect(set.match('alice')?.name).toBe('per-user');
  });

  it('limits a service account named in serviceAccounts as the user its calls carry', () => {
    const set = new PolicySet(
      parseBudgetPolicies(
        [
          { name: 'bots', serviceAccounts: ['shop/checkout'], limitUsd: '3' },
          { name: 'rest', limitUsd: '1' },
        ],
        'policies',
      ),
    );
    expect(set.match('system:serviceaccount:shop:checkout')?.name).toBe('bots');
    expect(set.match('system:serviceaccount:other:checkout')?.name).toBe('rest');
  });

  it('reads a parsed policy back as it was (the operator sends sidecars the parsed form)', () => {
    const parsed = parseBudgetPolicies([...POLICIES, { name: 'ops', team: { name: 'ops', users: ['olga'] }, limitUsd: '1' }], 'policies');
    expect(parseBudgetPolicies(JSON.parse(JSON.stringify(parsed)), 'policies')).toEqual(parsed);
  });

  it('does not treat a removed team key found in a ledger as a user * limits', () => {
    const set = new PolicySet(parseBudgetPolicies([{ name: 'rest', limitUsd: '1' }], 'policies'));
    expect(set.match('@team:gone')).toBeUndefined();
  });
});

describe('a workload budget (scope: Workload, from a BudgetPolicy whose selector picks this pod)', () => {
  it('sits between the team and the namespace, and stops a user with room of their own and in their team', () => {
    const b = book([...POLICIES, { name: 'shop/checkout-pods', scope: 'Workload', limitUsd: '0.8' }]);
    expect(b.policies.above('alice')).toEqual(['@team:payments', '@workload:shop/checkout-pods', '@namespace:shop']);
    expect(b.policies.above('carol')).toEqual(['@workload:shop/checkout-pods', '@namespace:shop']);
    charge(b, 'alice', '0.5'); // alice 0.5 of 1, team 0.5 of 1.5, workload 0.5 of 0.8, namespace 0.5 of 2
    expect(spent(b, '@workload:shop/checkout-pods')).toBe(usd('0.5'));
    // 0.5 + 0.4 = 0.9 > 0.8 at the workload only: 0.3 left there.
    expect(b.reserve('bob', T0, () => usd('0.4'))?.refusal).toMatchObject({ userId: 'bob', group: '@workload:shop/checkout-pods', short: { leftUsd: 0.3, reserveUsd: 0.4 } });
  });
});

describe('admission and charging across levels', () => {
  it("stops a user who still has room of their own when the team's budget is spent, and charges every level", () => {
    const b = book();
    // alice 0.9 and bob 0.5: each within their own 1.00; the team has 0.9 + 0.5 = 1.4 of 1.5; the namespace 1.4 of 2.
    charge(b, 'alice', '0.9');
    charge(b, 'bob', '0.5');
    expect(spent(b, 'alice')).toBe(usd('0.9'));
    expect(spent(b, 'bob')).toBe(usd('0.5'));
    expect(spent(b, '@team:payments')).toBe(usd('1.4'));
    expect(spent(b, '@namespace:shop')).toBe(usd('1.4'));
    // bob asks to hold 0.2: his own 0.5 + 0.2 = 0.7 ≤ 1.00, but the team's 1.4 + 0.2 = 1.6 > 1.5: refused by the team.
    const refused = b.reserve('bob', T0, () => usd('0.2'));
    expect(refused?.refusal).toMatchObject({ userId: 'bob', group: '@team:payments', policy: 'payments', limitUsd: 1.5, short: { leftUsd: 0.1, reserveUsd: 0.2 } });
    // Nothing is held anywhere after a refusal: bob's own hold was given back.
    expect(b.reserved('bob')).toBe(0n);
    expect(b.reserved('@namespace:shop')).toBe(0n);
    // A 0.1 call fits the team exactly (1.4 + 0.1 = 1.5) and is held at all three levels.
    const release = admitted(b.reserve('bob', T0, () => usd('0.1')));
    expect([b.reserved('bob'), b.reserved('@team:payments'), b.reserved('@namespace:shop')]).toEqual([usd('0.1'), usd('0.1'), usd('0.1')]);
    release();
    expect(b.reservingUsers).toBe(0);
  });

  it('lets a user outside the team spend up to the namespace budget, then refuses everyone', () => {
    const b = book();
    charge(b, 'alice', '0.9'); // team 0.9, namespace 0.9
    charge(b, 'carol', '1'); // carol's own 1.00 spent; namespace 1.9; the team untouched
    expect(spent(b, '@team:payments')).toBe(usd('0.9'));
    expect(spent(b, '@namespace:shop')).toBe(usd('1.9'));
    expect(b.refusal('carol', T0)).toMatchObject({ userId: 'carol', policy: 'per-user' });
    charge(b, 'dave', '0.1'); // namespace 1.9 + 0.1 = 2.0: spent
    // alice has 0.1 of her own and 0.6 of the team's left, but the namespace has none.
    expect(b.refusal('alice', T0)).toMatchObject({ userId: 'alice', group: '@namespace:shop', policy: 'shop', limitUsd: 2 });
    expect(b.reserve('erin', T0, () => usd('0.01'))?.refusal).toMatchObject({ userId: 'erin', group: '@namespace:shop' });
  });

  it('holds open reservations at each level: two team members in flight fill the team before either spends', () => {
    const b = book();
    const first = admitted(b.reserve('alice', T0, () => usd('0.8'))); // team holds 0.8
    // bob: own 0 + 0.8 ≤ 1.00; team 0 spent + 0.8 held + 0.8 = 1.6 > 1.5: refused, 0.7 left.
    expect(b.reserve('bob', T0, () => usd('0.8'))?.refusal).toMatchObject({ group: '@team:payments', short: { leftUsd: 0.7, reserveUsd: 0.8 }, retryAfterSeconds: 1 });
    first();
    admitted(b.reserve('bob', T0, () => usd('0.8')));
  });

  it('asks for the estimate once, whatever the number of levels', () => {
    const b = book();
    let asked = 0;
    admitted(
      b.reserve('alice', T0, () => {
        asked++;
        return usd('0.1');
      }),
    );
    expect(asked).toBe(1);
  });
});

describe('budgets.unreachable closed', () => {
  it('refuses a user whose only blocking budget is the namespace once the ledger has failed for 30 s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-hierarchy-'));
    const path = join(dir, 'tollgate-budgets.db');
    const clock = { now: T0 };
    const lines: { msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
    const policies = parseBudgetPolicies([{ name: 'shop', scope: 'Namespace', limitUsd: '2' }], 'policies');
    const budgets = new LedgerBudgets({ ledger: new SqliteLedger(path), config: { ledger: { kind: 'sqlite' }, unreachable: 'closed', policies }, logger, now: () => clock.now });
    await budgets.ready;
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE'); // another process holds the write lock: the ledger cannot be written
    budgets.charge('carol', 0.25, T0);
    await waitFor('the failed deduction', () => lines.some((l) => l.msg === 'failed to deduct spend'));
    clock.now = T0 + 30_000;
    // dave has no policy of his own; the namespace's budget is one this engine can no longer see spent elsewhere.
    expect(budgets.reserve('dave', clock.now, () => 0.01)?.refusal).toMatchObject({ userId: 'dave', policy: 'shop', unreachable: { ledger: 'sqlite', since: T0 } });
    other.exec('COMMIT');
    other.close();
    await budgets.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('rate limits across levels (ADR 1313)', () => {
  const levelsOf = (list: unknown[], userId: string) =>
    new PolicySet(parseBudgetPolicies(list, 'policies')).rateLevels(userId)?.map((l) => ({ key: l.key, level: l.level, policy: l.policy.name, limits: l.limits }));

  it('counts a call under each level whose policy has rate limits, innermost first', () => {
    const list = [
      { name: 'per-user', users: ['*'], limitUsd: '1', rateLimits: { requestsPerMinute: 2 } },
      { name: 'payments', team: { name: 'payments', users: ['alice'] }, limitUsd: '1.5', rateLimits: { requestsPerMinute: 3 } },
      { name: 'ops', team: { name: 'ops', users: ['olga'] }, limitUsd: '1.5' },
      { name: 'shop', scope: 'Namespace', limitUsd: '2', rateLimits: { concurrent: 4 } },
    ];
    expect(levelsOf(list, 'alice')).toEqual([
      { key: 'alice', level: 'user', policy: 'per-user', limits: { requestsPerMinute: 2 } },
      { key: '@team:payments', level: 'team', policy: 'payments', limits: { requestsPerMinute: 3 } },
      { key: '@namespace:shop', level: 'namespace', policy: 'shop', limits: { concurrent: 4 } },
    ]);
    // Olga's team has no rate limits: her own and the namespace's.
    expect(levelsOf(list, 'olga')?.map((l) => l.key)).toEqual(['olga', '@namespace:shop']);
  });

  it('has no levels for a user no rate limit applies to, and only the groups’ for a user without limits of her own', () => {
    const list = [
      { name: 'vip', users: ['vera'], limitUsd: '1' },
      { name: 'per-user', users: ['*'], limitUsd: '1', rateLimits: { requestsPerMinute: 2 } },
      { name: 'payments', team: { name: 'payments', users: ['alice'] }, limitUsd: '1.5', rateLimits: { tokensPerMinute: 1000 } },
    ];
    expect(levelsOf(list, 'vera')).toBeUndefined();
    expect(levelsOf([{ name: 'vip', users: ['vera', 'alice'], limitUsd: '1' }, list[2]], 'alice')).toEqual([
      { key: '@team:payments', level: 'team', policy: 'payments', limits: { tokensPerMinute: 1000 } },
    ]);
  });

  it('never gives a user id of a group key’s form the group’s window as its own, nor the namespace’s twice', () => {
    const list = [
      { name: 'payments', team: { name: 'payments', users: ['alice'] }, limitUsd: '1.5', rateLimits: { requestsPerMinute: 3 } },
      { name: 'shop', scope: 'Namespace', limitUsd: '2', rateLimits: { concurrent: 4 } },
    ];
    // Such a call is refused before it is counted (pipeline/refusals.ts); were it asked, it gets only what a user in
    // no team gets: the namespace's window, once.
    expect(levelsOf(list, '@team:payments')?.map((l) => l.key)).toEqual(['@namespace:shop']);
    expect(levelsOf(list, '@namespace:shop')?.map((l) => l.key)).toEqual(['@namespace:shop']);
  });
});
