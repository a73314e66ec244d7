// Reservations (ADR 1308): what a call holds against its user's budget between admission and settlement.
// Every expected amount below is worked out by hand in the comment beside it.

import { describe, expect, it } from 'vitest';
import { parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import { parseUsd } from '../../../contracts/money.ts';
import { BudgetBook, type ReserveOutcome } from './budget-book.ts';

const usd = (text: string) => parseUsd(text) as bigint;
const T0 = Date.parse('2026-11-10T12:00:00Z');

function book(list: unknown[]): BudgetBook {
  return new BudgetBook(new PolicySet(parseBudgetPolicies(list, 'policies')));
}

function admitted(outcome: ReserveOutcome | null): () => void {
  if (outcome === null || outcome.refusal) throw new Error(`expected the call admitted, got ${JSON.stringify(outcome)}`);
  return outcome.release;
}

describe('reserve', () => {
  it('holds each call until it settles: a 1.00 limit admits two 0.40 calls at once and refuses a third', () => {
    const b = book([{ name: 'p', limitUsd: '1' }]);
    const first = admitted(b.reserve('alice', T0, () => usd('0.4')));
    const second = admitted(b.reserve('alice', T0, () => usd('0.4')));
    expect(b.reserved('alice')).toBe(usd('0.8')); // 0.40 + 0.40
    // 0 spent + 0.80 held + 0.40 = 1.20 > 1.00: refused, naming what is left (1.00 - 0.80 = 0.20) and the hold.
    const third = b.reserve('alice', T0, () => usd('0.4'));
    expect(third?.refusal).toMatchObject({ userId: 'alice', policy: 'p', limitUsd: 1, short: { leftUsd: 0.2, reserveUsd: 0.4 }, retryAfterSeconds: 1 });
    // The first settles at 0.30: spent 0.30, held 0.40; 0.30 + 0.40 + 0.30 = 1.00 fits exactly.
    first();
    b.charge('alice', usd('0.3'), T0);
    expect(b.reserved('alice')).toBe(usd('0.4'));
    const fits = admitted(b.reserve('alice', T0, () => usd('0.3')));
    expect(b.reserved('alice')).toBe(usd('0.7'));
    second();
    fits();
    expect(b.reserved('alice')).toBe(0n);
    expect(b.reservingUsers).toBe(0);
  });

  it('a release called twice releases once', () => {
    const b = book([{ name: 'p', limitUsd: '1' }]);
    const one = admitted(b.reserve('alice', T0, () => usd('0.25')));
    admitted(b.reserve('alice', T0, () => usd('0.25')));
    one();
    one();
    expect(b.reserved('alice')).toBe(usd('0.25')); // the other call still holds its 0.25
  });

  it('a refused call holds nothing, and a spent budget is refused as before, without the short amounts', () => {
    const b = book([{ name: 'p', limitUsd: '0.5' }]);
    expect(b.reserve('alice', T0, () => usd('0.6'))?.refusal).toMatchObject({ short: { leftUsd: 0.5, reserveUsd: 0.6 } });
    expect(b.reserved('alice')).toBe(0n);
    expect(b.reservingUsers).toBe(0);
    b.charge('alice', usd('0.5'), T0);
    const spent = b.reserve('alice', T0, () => usd('0.01'))?.refusal;
    expect(spent).toMatchObject({ userId: 'alice', limitUsd: 0.5 });
    expect(spent?.short).toBeUndefined();
    // Nothing in flight: it cannot come back before the period ends, 2026-12-01T00:00Z, 20.5 days after T0
    // (2026-11-10T12:00Z): 20.5 × 86,400 = 1,771,200 s.
    expect(spent?.retryAfterSeconds).toBe(1_771_200);
  });

  it('grants add room: limit 0.10 plus a 0.20 grant admits a 0.30 hold', () => {
    const withGrant = new BudgetBook(new PolicySet(parseBudgetPolicies([{ name: 'p', limitUsd: '0.1' }], 'policies')), {
      usage: () => undefined,
      grants: () => [{ id: 'g', amount: usd('0.2'), used: 0n, reason: null, createdAt: T0 - 1, expiresAt: null }],
    });
    admitted(withGrant.reserve('alice', T0, () => usd('0.3'))); // 0.10 + 0.20 = 0.30 of room
    // One ledger unit (10⁻¹⁰ USD) more does not fit: 0.30 - 0.30 = 0 left.
    expect(withGrant.reserve('alice', T0, () => 1n)?.refusal?.short).toEqual({ leftUsd: 0, reserveUsd: 1e-10 });
  });

  it('holds nothing for a user no policy limits, a policy that only alerts, or no policies, and asks for no estimate', () => {
    let asked = 0;
    const estimate = () => (asked++, usd('100'));
    expect(book([{ name: 'only-bob', users: ['bob'], limitUsd: 1 }]).reserve('alice', T0, estimate)).toBeNull();
    expect(book([{ name: 'watch', limitUsd: 1, enforcement: 'alert' }]).reserve('alice', T0, estimate)).toBeNull();
    expect(book([]).reserve('alice', T0, estimate)).toBeNull();
    expect(asked).toBe(0);
  });

  it('a hold outlives the record it was made on: a record dropped and rebuilt still sees the calls in flight', () => {
    const b = book([{ name: 'p', limitUsd: '1' }]);
    const release = admitted(b.reserve('alice', T0, () => usd('0.9')));
    b.forget('alice');
    expect(b.reserve('alice', T0, () => usd('0.2'))?.refusal?.short).toEqual({ leftUsd: 0.1, reserveUsd: 0.2 }); // 1.00 - 0.90
    release();
    expect(b.reservingUsers).toBe(0);
  });

  it('many calls at once: the sum of the holds never passes the limit, and every release brings it back to zero', () => {
    const b = book([{ name: 'p', limitUsd: '1' }]);
    const releases: Array<() => void> = [];
    let refused = 0;
    for (let i = 0; i < 50; i++) {
      const outcome = b.reserve('alice', T0, () => usd('0.03'));
      if (outcome?.refusal) refused++;
      else releases.push(outcome!.release);
    }
    // floor(1.00 / 0.03) = 33 holds fit (0.99); the other 17 are refused.
    expect(releases).toHaveLength(33);
    expect(refused).toBe(17);
    expect(b.reserved('alice')).toBe(usd('0.99'));
    for (const release of releases) release();
    expect(b.reserved('alice')).toBe(0n);
  });
});
