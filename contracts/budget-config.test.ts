import { describe, expect, it } from 'vitest';
import { parseBudgetsPatch } from './budget-config.ts';
import { formatUsd, parseUsd, unitsFromCostUsd, unitsToUsd } from './money.ts';

describe('money', () => {
  it('parses USD exactly, from numbers and decimal strings, to ledger units of 1e-10 USD', () => {
    expect(parseUsd(0.01)).toBe(100_000_000n);
    expect(parseUsd('0.01')).toBe(100_000_000n);
    expect(parseUsd(25)).toBe(250_000_000_000n);
    expect(parseUsd('0.000001')).toBe(10_000n);
    expect(parseUsd(0.1 + 0.2)).toMatch(/at most 6 decimal places/); // 0.30000000000000004 is not an amount anyone wrote
    expect(parseUsd(-1)).toMatch(/non-negative/);
    expect(parseUsd('1e3')).toMatch(/at most 6 decimal places/);
    expect(parseUsd(2_000_000_000)).toMatch(/at most 100000000 USD/);
    // 922,337,204 USD is past 2^63 ledger units: it used to pass here and fail in the store.
    expect(parseUsd('922337204')).toMatch(/at most 100000000 USD/);
    expect(parseUsd(100_000_000)).toBe(100_000_000n * 10_000_000_000n);
  });

  it('turns span costs back into the integers they were rounded from, so sums are exact', () => {
    const costs = [0.00000855, 0.0000123, 0.1, 0.2, 0.0012345678];
    const units = costs.map(unitsFromCostUsd);
    expect(units).toEqual([85_500n, 123_000n, 1_000_000_000n, 2_000_000_000n, 12_345_678n]);
    expect(formatUsd(units.reduce((a, b) => a + b, 0n))).toBe('0.3012554178');
    expect(unitsToUsd(3_000_000_000n)).toBe(0.3);
    expect(formatUsd(-5n)).toBe('-0.0000000005');
  });
});

describe('budgets config', () => {
  it('fills in the defaults of the issue: sqlite ledger, month, UTC, 80/90/100, block, every user', () => {
    expect(parseBudgetsPatch({ policies: [{ name: 'default', limitUsd: 25 }] })).toEqual({
      policies: [{ name: 'default', users: ['*'], limitUsd: '25', period: 'month', timeZone: 'UTC', alertThresholds: [80, 90, 100], enforcement: 'block' }],
    });
    expect(parseBudgetsPatch({ ledger: { kind: 'firestore', projectId: 'my-project' } })).toEqual({
      ledger: { kind: 'firestore', projectId: 'my-project', collection: 'budgets' },
    });
    expect(parseBudgetsPatch({ ledger: { kind: 'redis', url: 'rediss://tollgate@redis.tollgate:6380/2', passwordEnv: 'REDIS_PASSWORD' }, unreachable: 'closed' })).toEqual({
      ledger: { kind: 'redis', url: 'rediss://tollgate@redis.tollgate:6380/2', keyPrefix: 'tollgate:budgets', passwordEnv: 'REDIS_PASSWORD' },
      unreachable: 'closed',
    });
  });

  it('takes rate limits on a team and on the namespace, for the group as a whole (ADR 1313)', () => {
    const patch = parseBudgetsPatch({
      policies: [
        { name: 'eng', limitUsd: 10, team: { name: 'eng', users: ['ann', 'ben'] }, rateLimits: { requestsPerMinute: 3 } },
        { name: 'all', limitUsd: 100, scope: 'Namespace', rateLimits: { tokensPerMinute: 100_000, concurrent: 4 } },
      ],
    });
    expect(patch.policies?.map((p) => p.rateLimits)).toEqual([{ requestsPerMinute: 3 }, { tokensPerMinute: 100_000, concurrent: 4 }]);
  });

  it.each([
    [{ policies: [{ name: 'a' }] }, 'budgets.policies[0].limitUsd is required'],
    [{ policies: [{ name: 'a', limitUsd: 0.1 + 0.2 }] }, 'budgets.policies[0].limitUsd must be a non-negative amount of USD with at most 6 decimal places'],
    [{ policies: [{ name: 'a', limitUsd: 1, period: 'year' }] }, 'budgets.policies[0].period must be one of day, week, month (got "year")'],
    [{ policies: [{ name: 'a', limitUsd: 1, timeZone: 'Europe/Paname' }] }, 'budgets.policies[0].timeZone must be an IANA time zone'],
    [{ policies: [{ name: 'a', limitUsd: 1, alertThresholds: [90, 80] }] }, 'budgets.policies[0].alertThresholds[1] must be greater than the threshold before it (90)'],
    [{ policies: [{ name: 'a', limitUsd: 1, enforcement: 'warn' }] }, 'budgets.policies[0].enforcement must be one of block, alert (got "warn")'],
    [{ policies: [{ name: 'a', limitUsd: 1, users: [] }] }, 'budgets.policies[0].users must be a list of 1 to 1000 user ids'],
    [{ policies: [{ name: 'a', limitUsd: 1, users: ['x', 'x'] }] }, 'budgets.policies[0].users[1] repeats "x"'],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1 },
          { name: 'a', limitUsd: 2 },
        ],
      },
      'budgets.policies[1].name repeats "a" (already at budgets.policies[0])',
    ],
    [{ policies: [{ name: 'a', limitUsd: 1, grants: [] }] }, 'budgets.policies[0].grants cannot be set here'],
    // Subjects and hierarchy (ADR 1312).
    [{ policies: [{ name: 'a', limitUsd: 0, scope: 'Namespace' }] }, 'budgets.policies[0].limitUsd must be more than 0 USD'],
    [{ policies: [{ name: 'a', limitUsd: -1, team: { name: 't', users: ['x'] } }] }, 'budgets.policies[0].limitUsd must be a non-negative amount'],
    [{ policies: [{ name: 'a', limitUsd: 100_000_001 }] }, 'budgets.policies[0].limitUsd must be at most 100000000 USD'],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1 },
          { name: 'b', limitUsd: 2 },
        ],
      },
      'budgets.policies[1].users[0] names * (every other user), which budgets.policies[0] already names at the same level',
    ],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1, scope: 'Namespace' },
          { name: 'b', limitUsd: 2, scope: 'Namespace' },
        ],
      },
      'budgets.policies[1].scope names the namespace, which budgets.policies[0] already names',
    ],
    [{ policies: [{ name: 'a', limitUsd: 1, scope: 'Cluster' }] }, 'budgets.policies[0].scope must be one of Workload, Namespace (got "Cluster")'],
    [{ policies: [{ name: 'a', limitUsd: 1, scope: 'Workload' }] }, 'budgets.policies[0].scope cannot be Workload here: a workload is the pods a BudgetPolicy selects'],
    [{ policies: [{ name: 'a', limitUsd: 1, scope: 'Namespace', users: ['x'] }] }, 'budgets.policies[0].scope cannot be set together with budgets.policies[0].users'],
    [{ policies: [{ name: 'a', limitUsd: 1, team: { name: 't', users: ['x'], teams: ['u'] } }] }, 'budgets.policies[0].team.teams cannot be set: teams do not nest'],
    [{ policies: [{ name: 'a', limitUsd: 1, team: { name: 't', users: ['*'] } }] }, 'budgets.policies[0].team.users[0] cannot be * in a team'],
    [{ policies: [{ name: 'a', limitUsd: 1, team: { name: 't' } }] }, 'budgets.policies[0].team must list users, serviceAccounts or both'],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1, team: { name: 't', users: ['x'] } },
          { name: 'b', limitUsd: 1, team: { name: 'u', users: ['y', 'x'] } },
        ],
      },
      'budgets.policies[1].team.users[1] names the user "x" as a team member, which budgets.policies[0] already names at the same level',
    ],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1, team: { name: 't', users: ['x'] } },
          { name: 'b', limitUsd: 1, team: { name: 't', users: ['y'] } },
        ],
      },
      'budgets.policies[1].team.name names the team t',
    ],
    [
      {
        policies: [
          { name: 'a', limitUsd: 1, users: ['system:serviceaccount:shop:bot'] },
          { name: 'b', limitUsd: 1, serviceAccounts: ['shop/bot'] },
        ],
      },
      'budgets.policies[1].serviceAccounts[0] names the service account shop/bot',
    ],
    [{ policies: [{ name: 'a', limitUsd: 1, serviceAccounts: ['bot'] }] }, 'budgets.policies[0].serviceAccounts[0] must be a service account as <namespace>/<name>'],
    [{ policies: [{ name: 'a', limitUsd: 1, workloadSelector: { matchLabels: { app: 'x' } } }] }, 'budgets.policies[0].workloadSelector is not a known field'],
    // Rate limits above the user (ADR 1313) are bounded as a user's are.
    [
      { policies: [{ name: 'a', limitUsd: 1, team: { name: 't', users: ['x'] }, rateLimits: { requestsPerMinute: 0 } }] },
      'budgets.policies[0].rateLimits.requestsPerMinute must be a whole number from 1 to 1000000 (got 0)',
    ],
    [
      { policies: [{ name: 'a', limitUsd: 1, scope: 'Namespace', rateLimits: { concurrent: 10_001 } }] },
      'budgets.policies[0].rateLimits.concurrent must be a whole number from 1 to 10000 (got 10001)',
    ],
    [
      { policies: [{ name: 'a', limitUsd: 1, scope: 'Namespace', rateLimits: {} }] },
      'budgets.policies[0].rateLimits must set at least one of requestsPerMinute, tokensPerMinute, concurrent',
    ],
    [{ policies: [{ name: 'a', limitUsd: 1, team: { name: 't', users: ['x'] }, rateLimits: { perMember: 5 } }] }, 'budgets.policies[0].rateLimits.perMember is not a known field'],
    [{ policies: [{ name: 'a', limitUsd: 1, limit: 2 }] }, 'budgets.policies[0].limit is not a known field'],
    [{ ledger: { kind: 'postgres' } }, 'budgets.ledger.kind must be one of sqlite, firestore, memory, redis (got "postgres")'],
    [{ ledger: { kind: 'redis' } }, 'budgets.ledger.url must be a non-empty string'],
    [{ ledger: { kind: 'redis', url: 'http://redis:6379' } }, 'budgets.ledger.url must start with redis:// or rediss:// (got http://)'],
    [
      { ledger: { kind: 'redis', url: 'redis://:s3cret@redis:6379' } },
      'budgets.ledger.url must not contain a password: set budgets.ledger.passwordEnv or budgets.ledger.passwordFile',
    ],
    [{ ledger: { kind: 'redis', url: 'redis://redis', password: 'x' } }, 'budgets.ledger.password is not a known field'],
    [{ ledger: { kind: 'redis', url: 'redis://redis', keyPrefix: '{a}' } }, 'budgets.ledger.keyPrefix must be 1 to 64 letters'],
    [
      { ledger: { kind: 'redis', url: 'redis://redis', passwordEnv: 'A', passwordFile: '/p' } },
      'budgets.ledger.passwordFile cannot be set together with budgets.ledger.passwordEnv',
    ],
    [{ ledger: { kind: 'redis', url: 'redis://redis', passwordEnv: 'REDIS-PASSWORD' } }, 'budgets.ledger.passwordEnv must be the name of an environment variable'],
    [{ unreachable: 'ajar' }, 'budgets.unreachable must be one of open, closed (got "ajar")'],
    [{ ledger: { kind: 'memory', path: 'x' } }, 'budgets.ledger.path is not a known field'],
  ])('refuses %j naming the field', (input, message) => {
    expect(() => parseBudgetsPatch(input)).toThrow(message);
  });
});
