import { describe, expect, it } from 'vitest';
import type { BudgetPolicy } from '../../../crds/index.ts';
import { compilePolicy } from '../../../contracts/budget-policies.ts';
import { summary } from './budget-policy-controller.ts';
import { selectorMatches } from './label-selector.ts';
import { renderBudgetPolicy } from './render-budget-policy.ts';

const CREATED = '2026-11-02T08:00:00Z';
const policy = (spec: NonNullable<BudgetPolicy['spec']>): BudgetPolicy => ({ metadata: { name: 'cap', namespace: 'shop', creationTimestamp: CREATED }, spec });

describe('BudgetPolicy → runtime policy', () => {
  it('fills the CRD defaults, sorts thresholds and turns micro-dollars into exact USD', () => {
    expect(renderBudgetPolicy('shop/cap', policy({ users: ['*'], limitMicroUsd: 12_345_678, alertThresholds: [100, 50] }))).toEqual({
      name: 'shop/cap',
      users: ['*'],
      limitUsd: '12.345678',
      period: 'month',
      timeZone: 'UTC',
      alertThresholds: [50, 100],
      enforcement: 'block',
      grants: [],
    });
  });

  it("renders a team's and the policy's service accounts in the policy's namespace, and the namespace scope (ADR 1312)", () => {
    expect(renderBudgetPolicy('shop/cap', policy({ team: { name: 'payments', users: ['alice'], serviceAccounts: ['checkout'] }, limitUsd: '50' }))).toMatchObject({
      users: [],
      team: { name: 'payments', users: ['alice'], serviceAccounts: ['shop/checkout'] },
    });
    expect(renderBudgetPolicy('shop/cap', policy({ serviceAccounts: ['checkout', 'worker'], limitUsd: '5' }))).toMatchObject({
      users: [],
      serviceAccounts: ['shop/checkout', 'shop/worker'],
    });
    expect(renderBudgetPolicy('shop/cap', policy({ scope: 'Namespace', limitUsd: '500' }))).toMatchObject({ users: [], scope: 'Namespace', limitUsd: '500' });
    // No subject at all: every user, as `users` was required to say before.
    expect(renderBudgetPolicy('shop/cap', policy({ limitUsd: '1' })).users).toEqual(['*']);
    expect(() => renderBudgetPolicy('shop/cap', policy({ scope: 'Namespace', limitUsd: '0' }))).toThrow('spec.limitUsd must be more than 0 USD');
    expect(() => renderBudgetPolicy('shop/cap', policy({ team: { name: 'payments', users: ['*'] }, limitUsd: '1' }))).toThrow('spec.team.users[0] cannot be * in a team');
  });

  it('gives grants stable ids from their content, distinct for identical grants', () => {
    const spec = {
      users: ['*'],
      limitUsd: '1',
      grants: [
        { user: 'alice', amountUsd: '2', reason: 'launch' },
        { user: 'alice', amountUsd: '2', reason: 'launch' },
        { user: 'bob', amountMicroUsd: 500_000, expiresAt: '2027-01-01T00:00:00Z' },
      ],
    };
    const first = renderBudgetPolicy('shop/cap', policy(spec)).grants!;
    const again = renderBudgetPolicy('shop/cap', policy(structuredClone(spec))).grants!;
    expect(first.map((g) => g.id)).toEqual(again.map((g) => g.id));
    expect(new Set(first.map((g) => g.id)).size).toBe(3);
    expect(first[2]).toMatchObject({ user: 'bob', amountUsd: '0.5', expiresAt: '2027-01-01T00:00:00.000Z', createdAt: '2026-11-02T08:00:00.000Z' });
  });

  it('refuses what the schema cannot catch, naming the field', () => {
    expect(() => renderBudgetPolicy('shop/cap', policy({ users: ['*'], limitUsd: '1', timeZone: 'Europe/Nowhere' }))).toThrow('spec.timeZone must be an IANA time zone');
  });

  it('passes rateLimits through (ADR 1309), checked by the runtime parser', () => {
    expect(renderBudgetPolicy('shop/cap', policy({ users: ['*'], limitUsd: '1', rateLimits: { requestsPerMinute: 60, concurrent: 4 } })).rateLimits).toEqual({
      requestsPerMinute: 60,
      concurrent: 4,
    });
    expect(() => renderBudgetPolicy('shop/cap', policy({ users: ['*'], limitUsd: '1', rateLimits: {} }))).toThrow('spec.rateLimits must set at least one of');
  });

  it('passes a team’s and the namespace’s rateLimits through, for the group as a whole (ADR 1313)', () => {
    expect(renderBudgetPolicy('shop/cap', policy({ team: { name: 'payments', users: ['alice'] }, limitUsd: '50', rateLimits: { requestsPerMinute: 3 } }))).toMatchObject({
      team: { name: 'payments' },
      rateLimits: { requestsPerMinute: 3 },
    });
    expect(renderBudgetPolicy('shop/cap', policy({ scope: 'Namespace', limitUsd: '50', rateLimits: { concurrent: 8 } })).rateLimits).toEqual({ concurrent: 8 });
    expect(() => renderBudgetPolicy('shop/cap', policy({ scope: 'Namespace', limitUsd: '50', rateLimits: { tokensPerMinute: 0 } }))).toThrow(
      'spec.rateLimits.tokensPerMinute must be a whole number from 1 to 1000000000 (got 0)',
    );
  });
});

describe('label selectors', () => {
  it('match as the API server defines them', () => {
    const labels = { app: 'checkout', tier: 'web' };
    expect(selectorMatches(undefined, labels)).toBe(true);
    expect(selectorMatches({}, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { app: 'checkout' } }, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { app: 'cart' } }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['web', 'api'] }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['web'] }] }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'canary', operator: 'DoesNotExist' }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'canary', operator: 'Exists' }] }, labels)).toBe(false);
  });
});

describe('BudgetPolicy status from the ledger', () => {
  it('counts users at or over each threshold and the exhausted (grants included), and lists the top spenders, bounded', () => {
    const compiled = compilePolicy(
      renderBudgetPolicy('shop/cap', policy({ users: ['*'], limitUsd: '1', alertThresholds: [80, 100], grants: [{ user: 'carol', amountUsd: '1' }] })),
    );
    const grantId = compiled.config.grants![0]!.id;
    const at = Date.parse('2026-11-10T00:00:00Z');
    const usage = (userId: string, limitUsed: bigint, spent = limitUsed, grantsUsed = new Map<string, bigint>()) => ({
      userId,
      periodStart: Date.parse('2026-11-01T00:00:00Z'),
      spent,
      limitUsed,
      alerted: 0,
      grantsUsed,
    });
    const users = [
      usage('alice', 10_000_000_000n), // 100 %
      usage('bob', 8_500_000_000n), // 85 %
      usage('carol', 10_000_000_000n, 15_000_000_000n, new Map([[grantId, 5_000_000_000n]])), // limit spent, grant half left
      ...Array.from({ length: 12 }, (_, i) => usage(`user-${i}`, BigInt(i) * 10_000_000n)),
    ];
    const status = summary(compiled, users, at);
    expect(status).toMatchObject({
      limitUsd: '1',
      periodStart: '2026-11-01T00:00:00.000Z',
      periodEnd: '2026-12-01T00:00:00.000Z',
      users: 15,
      usersOverThreshold: 3,
      usersExhausted: 1,
      thresholds: [
        { percent: 80, users: 3 },
        { percent: 100, users: 2 },
      ],
    });
    expect(status.topSpenders).toHaveLength(10);
    expect(status.topSpenders!.slice(0, 3)).toEqual([
      { user: 'carol', spentUsd: '1.5', percent: 100 },
      { user: 'alice', spentUsd: '1', percent: 100 },
      { user: 'bob', spentUsd: '0.85', percent: 85 },
    ]);
    expect(status.spentUsd).toBe('3.416'); // 1 + 0.85 + 1.5 + (0 + 1 + … + 11) × 0.001
  });
});
