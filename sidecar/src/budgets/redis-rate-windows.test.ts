// Rate-limit windows on a real redis-server, shared by two engines (two clients), on an injected clock. Expected
// numbers are worked out by hand from the GCRA of ADR 1309: a limit of L per minute spends 60 000 / L ms per unit.

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../../../test/support/redis-server.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { RateStoreUnreachable } from './rate-windows.ts';
import { RedisRateWindows } from './redis-rate-windows.ts';

const T = Date.parse('2026-11-10T12:00:00Z');
let redis: RedisServer;
let a: RedisRateWindows;
let b: RedisRateWindows;

beforeAll(async () => {
  redis = await startRedisServer();
  a = new RedisRateWindows({ url: redis.url, keyPrefix: 'rates', commandTimeoutMs: 1_000 });
  b = new RedisRateWindows({ url: redis.url, keyPrefix: 'rates', commandTimeoutMs: 1_000 });
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await redis?.stop();
});

describe('rate windows on Redis shared by two engines', () => {
  const limits = { requestsPerMinute: 3, tokensPerMinute: 1000, concurrent: 2 };

  it('count requests, tokens and calls in flight across engines, all or none', async () => {
    // 1 request = 20 000 ms of the requests TAT; 100 tokens = 6 000 ms of the tokens TAT.
    expect(await a.admit([{ key: 'alice', limits }], 100, T)).toEqual({
      refusedBy: null,
      retryAfterMs: 0,
      requests: { limit: 3, remaining: 2, resetMs: 20_000 },
      tokens: { limit: 1000, remaining: 900, resetMs: 6_000 },
    });
    expect(await b.admit([{ key: 'alice', limits }], 100, T)).toMatchObject({
      refusedBy: null,
      requests: { remaining: 1, resetMs: 40_000 },
      tokens: { remaining: 800, resetMs: 12_000 },
    });
    // Two in flight: the third is refused by `concurrent` and counts nothing (the requests window stays at 1 left).
    expect(await a.admit([{ key: 'alice', limits }], 100, T)).toEqual({
      refusedBy: 'concurrent',
      refusedAt: 0,
      retryAfterMs: 1_000,
      requests: { limit: 3, remaining: 1, resetMs: 40_000 },
      tokens: { limit: 1000, remaining: 800, resetMs: 12_000 },
    });
    // b's call used 40 of its 100 tokens: the tokens TAT goes back 60 × 60 = 3 600 ms, to T + 8 400.
    await b.settle([{ key: 'alice', limits }], 100, 40, T);
    expect(await a.admit([{ key: 'alice', limits }], 100, T)).toMatchObject({
      refusedBy: null,
      requests: { remaining: 0, resetMs: 60_000 },
      tokens: { remaining: 760, resetMs: 14_400 },
    });
    await a.settle([{ key: 'alice', limits }], 100, null, T);
    // A fourth request within the minute: refused until the first one's 20 s have passed.
    expect(await b.admit([{ key: 'alice', limits }], 100, T)).toMatchObject({ refusedBy: 'requests', retryAfterMs: 20_000 });
    expect(await b.admit([{ key: 'alice', limits }], 100, T + 20_000)).toMatchObject({ refusedBy: null, requests: { remaining: 0, resetMs: 60_000 } });
  });

  it('refuses a call over the whole tokens limit for a full window', async () => {
    expect(await a.admit([{ key: 'bob', limits: { tokensPerMinute: 1000 } }], 1001, T)).toEqual({
      refusedBy: 'tokens',
      refusedAt: 0,
      tokensLeft: 1000,
      retryAfterMs: 60_000,
      requests: null,
      tokens: { limit: 1000, remaining: 1000, resetMs: 0 },
    });
  });

  it('keeps a fraction of a millisecond per token under a high tokens limit', async () => {
    // 61 440 000 tokens per minute: one token is 1/1024 ms. Three calls of 10 tokens: 30/1024 ms of the window.
    const high = { tokensPerMinute: 61_440_000 };
    await a.admit([{ key: 'carol', limits: high }], 10, T);
    await b.admit([{ key: 'carol', limits: high }], 10, T);
    expect((await a.admit([{ key: 'carol', limits: high }], 10, T)).tokens).toEqual({ limit: 61_440_000, remaining: 61_439_970, resetMs: 1 });
  });

  it('admits from this engine’s memory while the store is down, and counts in the store again when it is back', async () => {
    await redis.kill();
    const whileDown = await a.admit([{ key: 'dave', limits: { requestsPerMinute: 1 } }], 0, T);
    expect(whileDown.refusedBy).toBeNull();
    expect((await a.admit([{ key: 'dave', limits: { requestsPerMinute: 1 } }], 0, T)).refusedBy).toBe('requests');
    await a.settle([{ key: 'dave', limits: { requestsPerMinute: 1 } }], 0, null, T);
    await redis.start();
    // The store never saw dave: its window is whole.
    expect(await b.admit([{ key: 'dave', limits: { requestsPerMinute: 1 } }], 0, T)).toMatchObject({ refusedBy: null, requests: { remaining: 0, resetMs: 60_000 } });
  }, 60_000);

  it('settles a call in the windows that admitted it: one admitted from memory in an outage does not take over the settlement of its team’s next call', async () => {
    // Team ops may have one call in flight; its members have no limits of their own, so the team's key is each
    // call's first level. Ann's call is admitted from engine a's memory during an outage.
    const ops = [{ key: '@team:ops', limits: { concurrent: 1 } }];
    await redis.kill();
    const inOutage = await a.admit(ops, 0, T);
    expect(inOutage).toMatchObject({ refusedBy: null, countedHere: true });
    await redis.start();
    const probe = [{ key: 'probe', limits: {} }];
    await waitFor('engine a counting in the store again', async () => (await a.admit(probe, 0, T), a.store.unreachableSince === null));
    // Ben's call is counted in the store: the team's one slot there is taken, as engine b sees.
    const inStore = await a.admit(ops, 0, T);
    expect(inStore.refusedBy).toBeNull();
    expect(inStore.countedHere).toBeUndefined();
    expect(await b.admit(ops, 0, T)).toMatchObject({ refusedBy: 'concurrent', refusedAt: 0 });
    // Ben's call ends: its slot is freed in the store (not in engine a's memory), so engine b's next call fits.
    await a.settle(ops, 0, null, T, inStore.countedHere);
    const next = await b.admit(ops, 0, T);
    expect(next.refusedBy).toBeNull();
    await b.settle(ops, 0, null, T, next.countedHere);
    await a.settle(ops, 0, null, T, inOutage.countedHere);
  }, 60_000);

  it('with budgets.unreachable closed, admits from memory for the 30 s grace, then refuses naming the store, and counts in the store once it is back', async () => {
    const closed = new RedisRateWindows({ url: redis.url, keyPrefix: 'rates', commandTimeoutMs: 1_000, unreachable: 'closed' });
    try {
      await redis.kill();
      const minute = { requestsPerMinute: 60 };
      // The outage starts at T (the first failed admission); 29 999 ms later it is still within the grace.
      expect((await closed.admit([{ key: 'erin', limits: minute }], 0, T)).refusedBy).toBeNull();
      expect((await closed.admit([{ key: 'erin', limits: minute }], 0, T + 29_999)).refusedBy).toBeNull();
      const refused = await closed.admit([{ key: 'erin', limits: minute }], 0, T + 30_000).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(RateStoreUnreachable);
      expect((refused as RateStoreUnreachable).since).toBe(T);
      expect((refused as RateStoreUnreachable).message).toContain(`redis at ${new URL(redis.url).host}`);
      await redis.start();
      // Back: the store counts erin's first request there (60 per minute: 1 000 ms of the TAT, 59 left).
      const back = await waitFor('the store answering again', () => closed.admit([{ key: 'erin', limits: minute }], 0, T + 31_000).catch(() => undefined));
      expect(back).toMatchObject({ refusedBy: null, requests: { remaining: 59, resetMs: 1_000 } });
    } finally {
      await closed.close();
    }
  }, 60_000);
});

describe('rate windows of a team on Redis (ADR 1313)', () => {
  // Team eng (ann and ben) may make 3 requests a minute in all (20 000 ms of its TAT each); ann also 2 of her
  // own (30 000 ms each). Ann calls through engine a, ben through engine b.
  const team = { key: '@team:eng', limits: { requestsPerMinute: 3 } };
  const ann = [{ key: 'ann', limits: { requestsPerMinute: 2 } }, team];
  const ben = [team];

  it('count both members’ calls in one window across engines, and a team refusal counts nothing in ann’s own', async () => {
    const t = T + 3_600_000;
    expect((await b.admit(ben, 0, t)).refusedBy).toBeNull();
    expect((await b.admit(ben, 0, t)).refusedBy).toBeNull();
    // Ann's own window has 1 of 2 left, the team's 0 of 3: the headers show the team's.
    expect(await a.admit(ann, 0, t)).toEqual({ refusedBy: null, retryAfterMs: 0, requests: { limit: 3, remaining: 0, resetMs: 60_000 }, tokens: null });
    // The 4th of the minute, whoever makes it: refused by the team (index 1 for ann, 0 for ben), 20 s to wait.
    expect(await a.admit(ann, 0, t)).toEqual({ refusedBy: 'requests', refusedAt: 1, retryAfterMs: 20_000, requests: { limit: 3, remaining: 0, resetMs: 60_000 }, tokens: null });
    expect(await b.admit(ben, 0, t)).toMatchObject({ refusedBy: 'requests', refusedAt: 0, retryAfterMs: 20_000 });
    // At 20 s the team has one back, and ann's own window still has her second call (the refusal counted
    // nothing there): hers goes from t + 30 s to t + 60 s (40 s ahead, 0 left), the team's to t + 80 s (60 s
    // ahead, 0 left); on the tie the inner level's is shown.
    expect(await a.admit(ann, 0, t + 20_000)).toMatchObject({ refusedBy: null, requests: { limit: 2, remaining: 0, resetMs: 40_000 } });
  });

  it('a refusal by ann’s own limit counts nothing in the team’s window, and a settlement frees the slot at every level', async () => {
    const t = T + 7_200_000;
    const annConc = [
      { key: 'ann2', limits: { requestsPerMinute: 1 } },
      { key: '@team:ops', limits: { concurrent: 1 } },
    ];
    const benConc = [{ key: '@team:ops', limits: { concurrent: 1 } }];
    expect((await a.admit(annConc, 0, t)).refusedBy).toBeNull();
    // The team's one slot is ann's call: ben is refused by it.
    expect(await b.admit(benConc, 0, t)).toMatchObject({ refusedBy: 'concurrent', refusedAt: 0, retryAfterMs: 1_000 });
    await a.settle(annConc, 0, null, t);
    // Ann's second request of the minute is refused by her own limit (index 0), 60 s to wait; the team's slot is not taken.
    expect(await a.admit(annConc, 0, t)).toMatchObject({ refusedBy: 'requests', refusedAt: 0, retryAfterMs: 60_000 });
    expect((await b.admit(benConc, 0, t)).refusedBy).toBeNull();
  });

  it('keeps every rate key of a prefix under one hash tag, so a call’s levels are one Redis Cluster slot', async () => {
    const raw = new Redis(redis.url);
    try {
      expect(
        (
          await a.admit(
            [
              { key: 'kim', limits: { requestsPerMinute: 1 } },
              { key: '@namespace:all', limits: { concurrent: 5 } },
            ],
            0,
            T,
          )
        ).refusedBy,
      ).toBeNull();
      const keys = await raw.keys('{rates:rate}:*');
      expect(keys).toEqual(expect.arrayContaining(['{rates:rate}:kim', '{rates:rate}:@namespace:all']));
      expect(await raw.keys('{rates:rate:*')).toEqual([]);
    } finally {
      raw.disconnect();
    }
  });
});
