import { describe, expect, it } from 'vitest';
import { parseSpendQuery, spendReport, SpendQueryError } from './spend.ts';

const now = new Date('2026-03-20T12:00:00.000Z');

describe('spend query', () => {
  it('reads durations and ISO times, with defaults for everything', () => {
    expect(parseSpendQuery({}, now)).toEqual({ since: new Date('2026-03-13T12:00:00.000Z'), until: null, groupBy: 'user', bucket: null, limit: 1000 });
    expect(parseSpendQuery({ since: '30m', groupBy: 'model', bucket: 'hour', limit: '5' }, now)).toMatchObject({
      since: new Date('2026-03-20T11:30:00.000Z'),
      groupBy: 'model',
      bucket: 'hour',
      limit: 5,
    });
    expect(parseSpendQuery({ since: '2w', until: '1d' }, now)).toMatchObject({ since: new Date('2026-03-06T12:00:00.000Z'), until: new Date('2026-03-19T12:00:00.000Z') });
    expect(parseSpendQuery({ since: '2026-03-01' }, now).since).toEqual(new Date('2026-03-01T00:00:00.000Z'));
    // a time without an offset is UTC; an offset is honoured
    expect(parseSpendQuery({ since: '2026-03-01T08:00' }, now).since).toEqual(new Date('2026-03-01T08:00:00.000Z'));
    expect(parseSpendQuery({ since: '2026-03-01T08:00:00+02:00' }, now).since).toEqual(new Date('2026-03-01T06:00:00.000Z'));
  });

  it.each([
    [{ since: 'yesterday' }, 'since', /since must be a duration like 7d, 24h or 30m, or an ISO 8601 time .* \(got "yesterday"\)/],
    [{ since: '0d' }, 'since', /since must be a duration from 1m to 3660d \(got "0d"\)/],
    [{ since: '2026-02-30T25:00:00Z' }, 'since', /since must be a duration/],
    [{ until: '8d' }, 'until', /until must be later than since/],
    [{ groupBy: 'team' }, 'groupBy', 'groupBy must be one of user, model, project, provider (got "team")'],
    [{ bucket: 'week' }, 'bucket', 'bucket must be one of hour, day (got "week")'],
    [{ limit: '0' }, 'limit', 'limit must be an integer from 1 to 10000 (got "0")'],
    [{ limit: '1e3' }, 'limit', /limit must be an integer/],
  ])('refuses %j, naming %s', (params, parameter, message) => {
    let error: unknown;
    try {
      parseSpendQuery(params, now);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SpendQueryError);
    expect((error as SpendQueryError).parameter).toBe(parameter);
    expect((error as Error).message).toMatch(message);
  });

  it('turns integer cost units into USD once, orders rows and says when the limit cut them', () => {
    const query = { since: now, until: null, groupBy: 'user' as const, bucket: null, limit: 2 };
    const report = spendReport(query, [
      { key: null, costUnits: 5_000_000_000n, calls: 1, totalTokens: 10 },
      { key: 'b', costUnits: 6_000_000_000n, calls: 3, totalTokens: 30n },
      { key: 'a', costUnits: 6_000_000_000, calls: 3n, totalTokens: 20 },
    ]);
    expect(report).toEqual({
      since: now.toISOString(),
      until: null,
      groupBy: 'user',
      bucket: null,
      rows: [
        { key: 'a', cost_usd: 0.6, calls: 3, total_tokens: 20 },
        { key: 'b', cost_usd: 0.6, calls: 3, total_tokens: 30 },
      ],
      truncated: true,
    });
  });
});
