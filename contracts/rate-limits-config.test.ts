// A budget policy's rateLimits (ADR 1309): what is accepted, and each refusal naming its field.

import { describe, expect, it } from 'vitest';
import { parseBudgetPolicies } from './budget-config.ts';

const policy = (rateLimits: unknown) => [{ name: 'team-a', limitUsd: 100, rateLimits }];

describe('rateLimits', () => {
  it('takes requests per minute, tokens per minute and concurrent calls, any of them', () => {
    expect(parseBudgetPolicies(policy({ requestsPerMinute: 60, tokensPerMinute: 100000, concurrent: 4 }), 'budgets.policies')[0]!.rateLimits).toEqual({
      requestsPerMinute: 60,
      tokensPerMinute: 100000,
      concurrent: 4,
    });
    expect(parseBudgetPolicies(policy({ concurrent: 1 }), 'p')[0]!.rateLimits).toEqual({ concurrent: 1 });
    expect(parseBudgetPolicies([{ name: 'plain', limitUsd: 1 }], 'p')[0]!.rateLimits).toBeUndefined();
  });

  it.each([
    [{ requestsPerMinute: 0 }, 'budgets.policies[0].rateLimits.requestsPerMinute must be a whole number from 1 to 1000000 (got 0)'],
    [{ tokensPerMinute: 1.5 }, 'budgets.policies[0].rateLimits.tokensPerMinute must be a whole number from 1 to 1000000000 (got 1.5)'],
    [{ concurrent: 10001 }, 'budgets.policies[0].rateLimits.concurrent must be a whole number from 1 to 10000 (got 10001)'],
    [{ concurrent: '2' }, 'budgets.policies[0].rateLimits.concurrent must be a whole number from 1 to 10000 (got "2")'],
    [{ requestsPerHour: 5 }, 'budgets.policies[0].rateLimits.requestsPerHour is not a known field (expected one of: requestsPerMinute, tokensPerMinute, concurrent)'],
    [{}, 'budgets.policies[0].rateLimits must set at least one of requestsPerMinute, tokensPerMinute, concurrent'],
    [[1], 'budgets.policies[0].rateLimits must be an object'],
  ])('refuses %j naming the field', (rateLimits, message) => {
    expect(() => parseBudgetPolicies(policy(rateLimits), 'budgets.policies')).toThrow(message);
  });

  it('still needs limitUsd: a policy is a budget first', () => {
    expect(() => parseBudgetPolicies([{ name: 'rpm-only', rateLimits: { requestsPerMinute: 5 } }], 'budgets.policies')).toThrow('budgets.policies[0].limitUsd is required');
  });
});
