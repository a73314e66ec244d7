// The Redis ledger against a real redis-server (Debian's package), through ioredis as an engine uses it: several
// engines charge the same user at once, a batch is retried after it landed, the server is killed mid-run.

import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBudgetsPatch } from '../../../contracts/budget-config.ts';
import { MAX_SPEND_UNITS, unitsFromCostUsd } from '../../../contracts/money.ts';
import { freePort } from '../../../test/control-plane/free-port.ts';
import { type RedisServer, startRedisServer } from '../../../test/support/redis-server.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { LedgerBudgets } from './ledger-budgets.ts';
import { RedisLedger } from './redis-ledger.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOV = Date.parse('2026-11-01T00:00:00Z'); // 1793491200000
let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedisServer();
}, 120_000);

afterAll(async () => {
  await redis?.stop();
});

function logs() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }) };
}

function ledger(keyPrefix: string) {
  return new RedisLedger({ url: redis.url, keyPrefix, commandTimeoutMs: 1_000 });
}

function engine(keyPrefix: string, log = logs(), refreshMs = 0) {
  const config = { ledger: { kind: 'redis' as const, url: redis.url, keyPrefix }, policies: parseBudgetsPatch({ policies: [{ name: 'team', limitUsd: '10' }] }).policies! };
  return { budgets: new LedgerBudgets({ ledger: ledger(keyPrefix), config, logger: log.logger, now: () => T0, refreshMs }), log };
}

const delta = (userId: string, amount: bigint) => ({ userId, policy: 'team', periodStart: NOV, split: { amount, limitPart: amount, grantParts: [] }, alerted: 0 });

describe('the Redis ledger', () => {
  it('many engines charging one user at once lose no increment: the stored spend is the exact sum', async () => {
    const engines = Array.from({ length: 4 }, () => engine('concurrent').budgets);
    await Promise.all(engines.map((e) => e.ready));
    const costs = [0.0000123, 0.00000855, 0.0012345678, 0.1];
    for (let i = 0; i < 50; i++) for (const e of engines) e.charge('alice', costs[i % costs.length]!, T0);
    await Promise.all(engines.map((e) => e.flushed()));
    // 4 engines × (13 × 0.0000123 + 13 × 0.00000855 + 12 × 0.0012345678 + 12 × 0.1) USD = 4.8603434544 USD
    const stored = await ledger('concurrent').loadUser('alice', 0);
    expect(stored!.periods.get(NOV)).toEqual({ spent: 48_603_434_544n, limitUsed: 48_603_434_544n, alerted: 0 });
    expect(unitsFromCostUsd(0.1)).toBe(1_000_000_000n); // the unit: 10⁻¹⁰ USD
    await Promise.all(engines.map((e) => e.close()));
  });

  it('keeps integer amounts as decimal strings, one field per period, in the documented layout', async () => {
    const { budgets } = engine('layout');
    await budgets.ready;
    await budgets.addGrant('team/alice', { amountUsd: '1', reason: 'launch' }, T0);
    budgets.charge('team/alice', 1.5, T0); // 0.5 USD from the limit, 1 USD from the grant
    await budgets.flushed();
    const client = new Redis(redis.url);
    expect(await client.hgetall('{layout}:u:team/alice')).toEqual({
      user_id: 'team/alice',
      policy: 'team',
      'spent:1793491200000': '15000000000',
      'limit_used:1793491200000': '5000000000',
    });
    const [grantId] = Object.keys(await client.hgetall('{layout}:g:team/alice'));
    expect(await client.hget('{layout}:gu:team/alice', grantId!)).toBe('10000000000');
    expect(await client.zrange('{layout}:users', '0', '-1')).toEqual(['team/alice']);
    client.disconnect();
    await budgets.close();
  });

  it('a batch retried after it had landed is recognised by its marker and not added twice', async () => {
    const l = ledger('retried');
    const batch = { id: 'batch-1', deltas: [delta('bob', 7n)] };
    await l.deduct(batch);
    await l.deduct(batch); // the first answer was "lost"
    await l.deduct({ id: 'batch-2', deltas: [delta('bob', 5n)] });
    expect((await l.loadUser('bob', 0))!.periods.get(NOV)!.spent).toBe(12n);
    await l.close();
  });

  it('stops a sum at MAX_SPEND_UNITS (2^62) exactly instead of overflowing', async () => {
    const l = ledger('bound');
    await l.deduct({ id: 'a', deltas: [delta('erin', MAX_SPEND_UNITS)] });
    await l.deduct({ id: 'b', deltas: [delta('erin', MAX_SPEND_UNITS)] });
    await l.deduct({ id: 'c', deltas: [delta('erin', 5n)] });
    expect((await l.loadUser('erin', 0))!.periods.get(NOV)).toEqual({ spent: 4_611_686_018_427_387_904n, limitUsed: 4_611_686_018_427_387_904n, alerted: 0 });
    await l.close();
  });

  it('refuses a batch with invalid spend whole, before anything (not even its marker) is written', async () => {
    const l = ledger('invalid');
    await expect(l.deduct({ id: 'bad', deltas: [delta('frank', 3n), delta('grace', -1n)] })).rejects.toThrow(/batch bad not written: the spend of user "grace" amount is negative/);
    const client = new Redis(redis.url);
    expect(await client.keys('{invalid}*')).toEqual([]);
    client.disconnect();
    await l.close();
  });

  it('writes nothing of a batch when one of its keys holds another type, so a retry cannot apply half of it twice', async () => {
    const client = new Redis(redis.url);
    await client.set('{wrongtype}:u:zoe', 'not a hash');
    const l = ledger('wrongtype');
    await expect(l.deduct({ id: 'mixed', deltas: [delta('amy', 3n), delta('zoe', 4n)] })).rejects.toThrow(/key \{wrongtype\}:u:zoe holds a string/);
    expect((await client.keys('{wrongtype}*')).sort()).toEqual(['{wrongtype}:u:zoe']);
    client.disconnect();
    await l.close();
  });

  it('logs each alert once across engines, and an engine sees spend made by the others', async () => {
    const a = engine('shared', logs(), 50);
    const b = engine('shared', logs(), 50);
    await Promise.all([a.budgets.ready, b.budgets.ready]);
    a.budgets.charge('carol', 4, T0);
    b.budgets.charge('carol', 4.5, T0); // b alone: 45 % … together 85 %
    await Promise.all([a.budgets.flushed(), b.budgets.flushed()]);
    await waitFor('a to see b’s spend', () => a.budgets.get('carol', T0)!.spent_usd === 8.5);
    await waitFor('b to see a’s spend', () => b.budgets.get('carol', T0)!.spent_usd === 8.5);
    a.budgets.charge('carol', 1, T0);
    b.budgets.charge('carol', 1, T0); // 105 %: the limit holds on both from here
    await Promise.all([a.budgets.flushed(), b.budgets.flushed()]);
    const ninety = () => [...a.log.lines, ...b.log.lines].filter((l) => String(l.msg).includes('budget alert') && l.threshold === 90);
    await waitFor('the 90 % alert', () => ninety().length === 1);
    await waitFor('the exhausted budget on both engines', () => a.budgets.refusal('carol', T0) !== null && b.budgets.refusal('carol', T0) !== null);
    expect(ninety()).toHaveLength(1);
    await Promise.all([a.budgets.close(), b.budgets.close()]);
  });
});

describe('a Redis ledger that cannot be reached', () => {
  it('names the store and the connection error, which a proxy then names as the reason it does not start', async () => {
    const port = await freePort(); // nothing listens there
    const l = new RedisLedger({ url: `redis://127.0.0.1:${port}`, keyPrefix: 'none', commandTimeoutMs: 1_000 });
    await expect(l.load(0)).rejects.toThrow(`the Redis store at 127.0.0.1:${port} cannot be reached: connect ECONNREFUSED 127.0.0.1:${port}`);
    await l.close();
  });
});

describe('the Redis ledger through a kill of the server', () => {
  it('logs `failed to deduct spend` while it is down and writes every charge exactly once when it is back', async () => {
    const log = logs();
    const { budgets } = engine('outage', log);
    await budgets.ready;
    budgets.charge('dave', 0.25, T0);
    await budgets.flushed(); // acknowledged before the kill: on disk with appendfsync always
    await redis.kill();
    budgets.charge('dave', 0.5, T0);
    budgets.charge('dave', 0.125, T0);
    await waitFor('the failed deduction', () => log.lines.some((l) => l.msg === 'failed to deduct spend'), 20_000);
    expect(log.lines.find((l) => l.msg === 'failed to deduct spend')).toMatchObject({ user_id: 'dave', ledger: 'redis' });
    // Enforced from memory meanwhile: 0.875 USD of the 10 USD limit.
    expect(budgets.get('dave', T0)!.spent_usd).toBe(0.875);
    await redis.start();
    await waitFor('the retried deduction', () => budgets.health().pendingDeductions === 0, 40_000);
    const stored = await ledger('outage').loadUser('dave', 0);
    expect(stored!.periods.get(NOV)!.spent).toBe(8_750_000_000n); // 0.25 + 0.5 + 0.125 USD, once each
    await budgets.close();
  }, 90_000);
});

describe('budgets.unreachable while the Redis ledger is down', () => {
  function closedEngine(clock: { now: number }, log = logs()) {
    const keyPrefix = 'closed';
    const config = {
      ledger: { kind: 'redis' as const, url: redis.url, keyPrefix },
      unreachable: 'closed' as const,
      policies: parseBudgetsPatch({
        policies: [
          { name: 'team', users: ['erin'], limitUsd: '10' },
          { name: 'watch', users: ['*'], limitUsd: '10', enforcement: 'alert' },
        ],
      }).policies!,
    };
    return { budgets: new LedgerBudgets({ ledger: ledger(keyPrefix), config, logger: log.logger, now: () => clock.now }), log };
  }

  it('closed: refuses budgeted calls once the ledger has failed for 30 s, and admits them again when it is back', async () => {
    const clock = { now: T0 };
    const { budgets, log } = closedEngine(clock);
    await budgets.ready;
    await redis.kill();
    budgets.charge('erin', 1, clock.now);
    await waitFor('the failed deduction', () => log.lines.some((l) => l.msg === 'failed to deduct spend'), 20_000);
    clock.now = T0 + 29_999; // within the grace: memory decides
    expect(budgets.refusal('erin', clock.now)).toBeNull();
    clock.now = T0 + 30_000;
    const refused = budgets.reserve('erin', clock.now, () => 0.01);
    expect(refused?.refusal?.unreachable).toEqual({ ledger: 'redis', since: T0 });
    expect(refused?.refusal?.policy).toBe('team');
    // A policy that only alerts never refuses; a user no blocking policy names neither.
    expect(budgets.reserve('frank', clock.now, () => 0.01)?.refusal).toBeUndefined();
    await redis.start();
    await waitFor('the retried deduction', () => budgets.health().pendingDeductions === 0, 40_000);
    expect(budgets.refusal('erin', clock.now)).toBeNull();
    await budgets.close();
  }, 90_000);
});
