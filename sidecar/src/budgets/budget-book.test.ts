import { describe, expect, it } from 'vitest';
import { parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { parseUsd } from '../../../contracts/money.ts';
import { BudgetBook } from './budget-book.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import { type Grant, splitCharge } from '../../../contracts/budget-grants.ts';

const usd = (text: string) => parseUsd(text) as bigint;
const T0 = Date.parse('2026-11-10T12:00:00Z');
const DAY = 86_400_000;

function policies(list: unknown[]): PolicySet {
  return new PolicySet(parseBudgetPolicies(list, 'policies'));
}

function grant(id: string, amount: string, expiresAt: number | null, createdAt = T0 - DAY): Grant {
  return { id, amount: usd(amount), used: 0n, reason: null, createdAt, expiresAt };
}

describe('policy matching', () => {
  it('an exact user id wins over "*", and the first policy naming a user wins', () => {
    const set = policies([
      { name: 'everyone', users: ['*'], limitUsd: 1 },
      { name: 'alice', users: ['alice'], limitUsd: 5 },
      { name: 'alice-again', users: ['alice', 'bob'], limitUsd: 9 },
    ]);
    expect(set.match('alice')?.name).toBe('alice');
    expect(set.match('bob')?.name).toBe('alice-again');
    expect(set.match('carol')?.name).toBe('everyone');
    expect(policies([{ name: 'only-alice', users: ['alice'], limitUsd: 1 }]).match('carol')).toBeUndefined();
  });
});

describe('grants', () => {
  it('absorb spend first, the one expiring soonest first, never-expiring last, then the limit', () => {
    const grants = [grant('never', '1', null), grant('late', '1', T0 + 10 * DAY), grant('soon', '0.5', T0 + DAY), grant('expired', '5', T0 - 1)];
    const split = splitCharge(grants, usd('2'), T0);
    expect(split.grantParts).toEqual([
      { grantId: 'soon', amount: usd('0.5') },
      { grantId: 'late', amount: usd('1') },
      { grantId: 'never', amount: usd('0.5') },
    ]);
    expect(split.limitPart).toBe(0n);
    expect(splitCharge(grants, usd('4'), T0).limitPart).toBe(usd('1.5'));
  });

  it('a grant added to an exhausted budget lets calls through, and they spend the grant', () => {
    const book = new BudgetBook(policies([{ name: 'p', limitUsd: '0.01' }]));
    book.charge('alice', usd('0.0105'), T0); // an overshoot: the call was admitted before the limit was reached
    expect(book.refusal('alice', T0)).toMatchObject({ userId: 'alice', policy: 'p', limitUsd: 0.01 });
    const record = book.record('alice', T0)!;
    record.grants.push(grant('g', '0.01', null, T0));
    record.refresh(T0);
    expect(book.refusal('alice', T0)).toBeNull();
    expect(record.remaining(T0)).toBe(usd('0.0095'));
    const { split } = book.charge('alice', usd('0.002'), T0)!;
    expect(split).toEqual({ amount: usd('0.002'), limitPart: 0n, grantParts: [{ grantId: 'g', amount: usd('0.002') }] });
  });

  it('an expiring grant stops counting when it expires, without a charge to notice it', () => {
    // A $0 limit: only the grant lets calls through, until it expires.
    const book = new BudgetBook(policies([{ name: 'p', limitUsd: 0 }]), { usage: () => undefined, grants: () => [grant('g', '1', T0 + 1000)] });
    book.charge('alice', usd('0.5'), T0);
    expect(book.refusal('alice', T0 + 999)).toBeNull();
    expect(book.refusal('alice', T0 + 1000)).not.toBeNull();
  });
});

describe('enforcement in memory', () => {
  it('refuses once the limit is spent, with Retry-After until the period ends', () => {
    const book = new BudgetBook(policies([{ name: 'monthly', limitUsd: '1' }]));
    expect(book.refusal('alice', T0)).toBeNull();
    book.charge('alice', usd('0.6'), T0);
    expect(book.refusal('alice', T0)).toBeNull();
    book.charge('alice', usd('0.4'), T0);
    const refusal = book.refusal('alice', T0)!;
    expect(refusal.periodEnd).toBe(Date.parse('2026-12-01T00:00:00Z'));
    expect(refusal.retryAfterSeconds).toBe((Date.parse('2026-12-01T00:00:00Z') - T0) / 1000);
    expect(book.refusal('bob', T0)).toBeNull(); // "*" limits each user separately
  });

  it('a new period starts from zero spend', () => {
    const book = new BudgetBook(policies([{ name: 'daily', limitUsd: '1', period: 'day', timeZone: 'Europe/Berlin' }]));
    book.charge('alice', usd('1'), T0);
    expect(book.refusal('alice', T0)).not.toBeNull();
    // 2026-11-10 ends at 23:00 UTC in Berlin (UTC+1).
    expect(book.refusal('alice', Date.parse('2026-11-10T22:59:59.999Z'))).not.toBeNull();
    expect(book.refusal('alice', Date.parse('2026-11-10T23:00:00Z'))).toBeNull();
    expect(book.record('alice', Date.parse('2026-11-10T23:00:00Z'))!.spent).toBe(0n);
  });

  it('enforcement "alert" never refuses, and a $0 limit refuses everything but grants', () => {
    const alertOnly = new BudgetBook(policies([{ name: 'p', limitUsd: '1', enforcement: 'alert' }]));
    alertOnly.charge('alice', usd('5'), T0);
    expect(alertOnly.refusal('alice', T0)).toBeNull();
    expect(alertOnly.record('alice', T0)!.state(T0)).toBe('exhausted');
    const zero = new BudgetBook(policies([{ name: 'grants-only', limitUsd: 0 }]));
    expect(zero.refusal('alice', T0)).not.toBeNull();
  });

  it('each threshold is crossed once per user per period, never per call, and several at once when a call jumps them', () => {
    const book = new BudgetBook(policies([{ name: 'p', limitUsd: '0.01', period: 'day' }]));
    const crossed: number[][] = [];
    for (let i = 0; i < 12; i++) crossed.push(book.charge('alice', usd('0.001'), T0)!.crossed);
    expect(crossed.flat()).toEqual([80, 90, 100]);
    expect(crossed[7]).toEqual([80]); // 0.008 of 0.01
    expect(book.charge('bob', usd('0.0095'), T0)!.crossed).toEqual([80, 90]);
    // Next day: alerts again.
    expect(book.charge('alice', usd('0.009'), T0 + DAY)!.crossed).toEqual([80, 90]);
  });

  it('a policy change keeps the spend of a record whose period is unchanged', () => {
    const book = new BudgetBook(policies([{ name: 'p', limitUsd: '1' }]));
    book.charge('alice', usd('0.9'), T0);
    expect(book.refusal('alice', T0)).toBeNull();
    book.setPolicies(policies([{ name: 'p', limitUsd: '0.5' }]), T0);
    expect(book.refusal('alice', T0)).toMatchObject({ limitUsd: 0.5 });
    book.setPolicies(policies([]), T0);
    expect(book.refusal('alice', T0)).toBeNull();
  });

  it('concurrent calls near the limit: all admitted before the limit is reached may overshoot, none after', () => {
    // Ten calls of 0.3 USD each against a 1 USD limit, all admitted before any finishes (in flight at once).
    const book = new BudgetBook(policies([{ name: 'p', limitUsd: '1' }]));
    const admitted = Array.from({ length: 10 }, () => book.refusal('alice', T0) === null);
    expect(admitted.every(Boolean)).toBe(true);
    for (let i = 0; i < 10; i++) book.charge('alice', usd('0.3'), T0);
    // Overshoot is exactly what was in flight: 3 USD spent on a 1 USD limit, and nothing more is admitted.
    expect(book.record('alice', T0)!.spent).toBe(usd('3'));
    expect(book.refusal('alice', T0)).not.toBeNull();
  });
});

describe('memory bounded by the users in use (ADR 1306)', () => {
  it('keeps at most maxRecords, keeps the ones in use, and rebuilds a dropped one from its source', () => {
    const spent = new Map<string, bigint>();
    const book = new BudgetBook(
      policies([{ name: 'everyone', users: ['*'], limitUsd: 1 }]),
      { usage: (user) => (spent.has(user) ? { spent: spent.get(user)!, limitUsed: spent.get(user)!, alerted: 0 } : undefined), grants: () => [] },
      { maxRecords: 100 },
    );
    const charge = (user: string, amount: bigint) => {
      book.charge(user, amount, T0);
      spent.set(user, (spent.get(user) ?? 0n) + amount);
    };
    charge('spender', usd('2'));
    for (let i = 0; i < 5000; i++) {
      charge(`user-${i}`, usd('0.01'));
      if (i % 10 === 0) expect(book.refusal('hot', T0)).toBeNull(); // one user keeps calling
    }
    const standing = book.standing(T0, 0);
    expect(standing.records).toBeLessThanOrEqual(100);
    expect(standing.evicted).toBeGreaterThan(4800);
    expect(book.records(T0).some((r) => r.userId === 'hot')).toBe(true);
    expect(book.records(T0).some((r) => r.userId === 'spender')).toBe(false);
    expect(book.refusal('spender', T0)).toMatchObject({ userId: 'spender', policy: 'everyone' });
  });
});
