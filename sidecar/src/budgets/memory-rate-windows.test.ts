// The in-memory rate-limit windows (ADR 1309) with an injected clock. Every expected number is worked out by
// hand beside it: a limit of L per minute spends 60 000 / L ms of the window per request or token.

import { describe, expect, it } from 'vitest';
import { MemoryRateWindows } from './memory-rate-windows.ts';

const T0 = Date.parse('2026-11-29T12:00:00Z');

describe('requests per minute', () => {
  it('lets 3 requests through at once, refuses the 4th for 20 s, and lets one more in every 20 s', () => {
    const w = new MemoryRateWindows();
    const limits = { requestsPerMinute: 3 };
    // 60 000 / 3 = 20 000 ms per request: after n requests at T0 the window is n · 20 s ahead.
    expect(w.admit([{ key: 'alice', limits }], 0, T0)).toEqual({ refusedBy: null, retryAfterMs: 0, requests: { limit: 3, remaining: 2, resetMs: 20_000 }, tokens: null });
    expect(w.admit([{ key: 'alice', limits }], 0, T0).requests).toEqual({ limit: 3, remaining: 1, resetMs: 40_000 });
    expect(w.admit([{ key: 'alice', limits }], 0, T0).requests).toEqual({ limit: 3, remaining: 0, resetMs: 60_000 });
    // A 4th would put the window 80 s ahead, 20 s past the minute: refused, nothing counted.
    expect(w.admit([{ key: 'alice', limits }], 0, T0)).toEqual({
      refusedBy: 'requests',
      refusedAt: 0,
      retryAfterMs: 20_000,
      requests: { limit: 3, remaining: 0, resetMs: 60_000 },
      tokens: null,
    });
    // 5 s later it is 15 s away.
    expect(w.admit([{ key: 'alice', limits }], 0, T0 + 5_000).retryAfterMs).toBe(15_000);
    // At 20 s one request has come back: admitted, the window again a minute ahead.
    expect(w.admit([{ key: 'alice', limits }], 0, T0 + 20_000).requests).toEqual({ limit: 3, remaining: 0, resetMs: 60_000 });
    expect(w.admit([{ key: 'alice', limits }], 0, T0 + 20_000).refusedBy).toBe('requests');
    // Another user is counted apart.
    expect(w.admit([{ key: 'bob', limits }], 0, T0 + 20_000).requests?.remaining).toBe(2);
  });

  it('never lets more than the limit plus one per 60 000 / L ms through: 7 per minute over 2 minutes admits 7 + 14', () => {
    const w = new MemoryRateWindows();
    let admitted = 0;
    // One attempt every 100 ms for 120 s (1 201 attempts, T0 to T0 + 120 000 inclusive).
    for (let t = 0; t <= 120_000; t += 100) if (w.admit([{ key: 'alice', limits: { requestsPerMinute: 7 } }], 0, T0 + t).refusedBy === null) admitted++;
    // A burst of 7 at T0, then one each 60 000 / 7 = 8 571.43 ms: at 8 600, 17 200, … 120 000 (120 000 / 8 571.43 = 14).
    expect(admitted).toBe(21);
  });
});

describe('tokens per minute', () => {
  it('reserves at admission, settles to the real count, and refuses once the window is spent', () => {
    const w = new MemoryRateWindows();
    const limits = { tokensPerMinute: 1000 };
    // 60 ms per token: 400 reserved puts the window 24 s ahead, 600 left.
    expect(w.admit([{ key: 'alice', limits }], 400, T0).tokens).toEqual({ limit: 1000, remaining: 600, resetMs: 24_000 });
    // The call used 100: 300 given back (18 s), the window 6 s ahead, 900 left.
    w.settle([{ key: 'alice', limits }], 400, 100, T0);
    expect(w.admit([{ key: 'alice', limits }], 0, T0).tokens).toEqual({ limit: 1000, remaining: 900, resetMs: 6_000 });
    // 950 would put it 6 + 57 = 63 s ahead: refused, 3 s to wait.
    expect(w.admit([{ key: 'alice', limits }], 950, T0)).toMatchObject({ refusedBy: 'tokens', retryAfterMs: 3_000 });
    // 900 fits exactly: 6 + 54 = 60 s ahead, nothing left.
    expect(w.admit([{ key: 'alice', limits }], 900, T0).tokens).toEqual({ limit: 1000, remaining: 0, resetMs: 60_000 });
    // An unknown real count keeps the reservation.
    w.settle([{ key: 'alice', limits }], 900, null, T0);
    expect(w.admit([{ key: 'alice', limits }], 1, T0).refusedBy).toBe('tokens');
  });

  it('gives back no more than a full window, and a call larger than the limit never fits', () => {
    const w = new MemoryRateWindows();
    const limits = { tokensPerMinute: 1000 };
    w.admit([{ key: 'alice', limits }], 500, T0);
    // At 40 s the 30 s of the reservation have passed; the call used 0: the window is full, not fuller.
    w.settle([{ key: 'alice', limits }], 500, 0, T0 + 40_000);
    expect(w.admit([{ key: 'alice', limits }], 1000, T0 + 40_000).tokens).toEqual({ limit: 1000, remaining: 0, resetMs: 60_000 });
    expect(new MemoryRateWindows().admit([{ key: 'bob', limits }], 1001, T0)).toMatchObject({ refusedBy: 'tokens', retryAfterMs: 60_000 });
  });
});

describe('concurrent calls', () => {
  it('admits 2 in flight and frees a slot when a call settles, once', () => {
    const w = new MemoryRateWindows();
    const limits = { concurrent: 2 };
    expect(w.admit([{ key: 'alice', limits }], 10, T0).refusedBy).toBeNull();
    expect(w.admit([{ key: 'alice', limits }], 10, T0).refusedBy).toBeNull();
    expect(w.admit([{ key: 'alice', limits }], 10, T0)).toEqual({ refusedBy: 'concurrent', refusedAt: 0, retryAfterMs: 1_000, requests: null, tokens: null });
    w.settle([{ key: 'alice', limits }], 10, 5, T0);
    expect(w.admit([{ key: 'alice', limits }], 10, T0).refusedBy).toBeNull();
    expect(w.admit([{ key: 'alice', limits }], 10, T0).refusedBy).toBe('concurrent');
  });

  it('counts nothing in any dimension when one refuses', () => {
    const w = new MemoryRateWindows();
    const limits = { requestsPerMinute: 10, tokensPerMinute: 100, concurrent: 1 };
    // 6 s per request, 600 ms per token: 50 tokens put the tokens window 30 s ahead.
    w.admit([{ key: 'alice', limits }], 50, T0);
    // 40 more tokens would fit (30 + 24 = 54 s ahead) but the slot is taken: refused, and neither its 6 s
    // nor its 24 s are counted.
    expect(w.admit([{ key: 'alice', limits }], 40, T0)).toMatchObject({ refusedBy: 'concurrent', requests: { remaining: 9 }, tokens: { remaining: 50 } });
    w.settle([{ key: 'alice', limits }], 50, 50, T0);
    expect(w.admit([{ key: 'alice', limits }], 50, T0)).toMatchObject({ refusedBy: null, requests: { remaining: 8 }, tokens: { remaining: 0, resetMs: 60_000 } });
  });
});

describe('memory', () => {
  it('drops subjects whose windows are full again and that have nothing in flight', () => {
    const w = new MemoryRateWindows({ maxSubjects: 2 });
    w.admit([{ key: 'a', limits: { requestsPerMinute: 60 } }], 0, T0); // 1 s ahead
    w.admit([{ key: 'b', limits: { concurrent: 1 } }], 0, T0); // in flight
    // At T0 + 2 s a's window is full again; b still has a call in flight and stays.
    w.admit([{ key: 'c', limits: { requestsPerMinute: 60 } }], 0, T0 + 2_000);
    expect(w.size).toBe(2);
    expect(w.admit([{ key: 'b', limits: { concurrent: 1 } }], 0, T0 + 2_000).refusedBy).toBe('concurrent');
  });

  it('never drops a level of the call being admitted to make room for another of its levels', () => {
    const w = new MemoryRateWindows({ maxSubjects: 2 });
    const annOwn = { key: 'ann', limits: { requestsPerMinute: 60, concurrent: 1 } };
    w.admit([annOwn], 0, T0); // 1 s ahead, then settled: nothing in flight
    w.settle([annOwn], 0, 0, T0);
    w.admit([{ key: 'x', limits: { requestsPerMinute: 60 } }], 0, T0);
    // At T0 + 2 s ann and x are idle and the map is full: making room for the team's window drops x, not ann,
    // whose window this call has already fetched, so her one slot is taken where the next call sees it.
    const levels = [annOwn, { key: '@team:eng', limits: { requestsPerMinute: 60 } }];
    expect(w.admit(levels, 0, T0 + 2_000).refusedBy).toBeNull();
    expect(w.size).toBe(2);
    expect(w.admit(levels, 0, T0 + 2_000)).toMatchObject({ refusedBy: 'concurrent', refusedAt: 0 });
  });
});

describe('levels above the user (ADR 1313)', () => {
  // Team eng (ann and ben) may make 3 requests a minute in all: 20 000 ms of its TAT per request. Ann also has
  // her own 2 a minute (30 000 ms each); ben has no limit of his own.
  const team = { key: '@team:eng', limits: { requestsPerMinute: 3 } };
  const ann = [{ key: 'ann', limits: { requestsPerMinute: 2 } }, team];
  const ben = [team];

  it('count every member’s calls in the team’s window: the 4th call of the minute is refused, whoever makes it', () => {
    const w = new MemoryRateWindows();
    // Headers show the level with the fewest left: ann's own (1 of 2) over the team's (2 of 3).
    expect(w.admit(ann, 0, T0)).toEqual({ refusedBy: null, retryAfterMs: 0, requests: { limit: 2, remaining: 1, resetMs: 30_000 }, tokens: null });
    expect(w.admit(ben, 0, T0).requests).toEqual({ limit: 3, remaining: 1, resetMs: 40_000 });
    // Ann's own and the team's are both at 0 left: on a tie the inner level (ann's) is shown.
    expect(w.admit(ann, 0, T0).requests).toEqual({ limit: 2, remaining: 0, resetMs: 60_000 });
    // The team's TAT is 60 s ahead: a 4th would be 80 s, 20 s too far.
    expect(w.admit(ben, 0, T0)).toEqual({ refusedBy: 'requests', refusedAt: 0, retryAfterMs: 20_000, requests: { limit: 3, remaining: 0, resetMs: 60_000 }, tokens: null });
    expect(w.admit(ben, 0, T0 + 20_000).refusedBy).toBeNull();
  });

  it('a refusal by the team counts nothing in the user’s own window: ann still makes her 2 calls once the team has room', () => {
    const w = new MemoryRateWindows();
    for (let i = 0; i < 3; i++) expect(w.admit(ben, 0, T0).refusedBy).toBeNull();
    // Refused at index 1 (the team); ann's own window is untouched.
    expect(w.admit(ann, 0, T0)).toMatchObject({ refusedBy: 'requests', refusedAt: 1, retryAfterMs: 20_000 });
    // At 20 s the team has one request back. Ann's own window is whole (had the refusal counted there, it would
    // be 30 s ahead): her first call puts it 30 s ahead (1 of 2 left), the team's 60 s (0 left, shown).
    expect(w.admit(ann, 0, T0 + 20_000).requests).toEqual({ limit: 3, remaining: 0, resetMs: 60_000 });
    // At 40 s: the team's TAT (T0 + 80 s) has room for one more, and ann's (T0 + 50 s) for her second: hers is
    // then T0 + 80 s (40 s ahead, 0 left), the team's T0 + 100 s (60 s ahead, 0 left); on the tie hers is shown.
    expect(w.admit(ann, 0, T0 + 40_000)).toMatchObject({ refusedBy: null, requests: { limit: 2, remaining: 0, resetMs: 40_000 } });
  });

  it('a refusal by the user’s own limit counts nothing in the team’s window', () => {
    const w = new MemoryRateWindows();
    expect(w.admit(ann, 0, T0).refusedBy).toBeNull();
    expect(w.admit(ann, 0, T0).refusedBy).toBeNull();
    // Ann's own window is 60 s ahead: a 3rd is refused by her own limit (index 0), 30 s to wait.
    expect(w.admit(ann, 0, T0)).toMatchObject({ refusedBy: 'requests', refusedAt: 0, retryAfterMs: 30_000 });
    // The team counted 2 of 3 (40 s ahead): ben has the third.
    expect(w.admit(ben, 0, T0)).toMatchObject({ refusedBy: null, requests: { limit: 3, remaining: 0, resetMs: 60_000 } });
  });

  it('settles tokens and frees the slot at every level the call was admitted at', () => {
    const w = new MemoryRateWindows();
    // Ann: 600 tokens a minute (100 ms a token); the team: 1 000 (60 ms a token) and one call in flight.
    const teamLimits = { key: '@team:eng', limits: { tokensPerMinute: 1000, concurrent: 1 } };
    const annLevels = [{ key: 'ann', limits: { tokensPerMinute: 600 } }, teamLimits];
    // 400 tokens: ann's window 40 s ahead (200 left, shown), the team's 24 s (600 left).
    expect(w.admit(annLevels, 400, T0).tokens).toEqual({ limit: 600, remaining: 200, resetMs: 40_000 });
    expect(w.admit([teamLimits], 100, T0)).toMatchObject({ refusedBy: 'concurrent', refusedAt: 0, retryAfterMs: 1_000 });
    // Ann's call used 100: 300 tokens back at each level: hers 10 s ahead, the team's 6 s; the slot is free.
    w.settle(annLevels, 400, 100, T0);
    // Ben's 100: the team's window 12 s ahead, 800 left.
    expect(w.admit([teamLimits], 100, T0)).toMatchObject({ refusedBy: null, tokens: { limit: 1000, remaining: 800, resetMs: 12_000 } });
    // Ben holds the team's slot now. Ann's refusal shows her own window (500 left, 10 s) as the tighter one.
    expect(w.admit(annLevels, 0, T0)).toEqual({
      refusedBy: 'concurrent',
      refusedAt: 1,
      retryAfterMs: 1_000,
      requests: null,
      tokens: { limit: 600, remaining: 500, resetMs: 10_000 },
    });
  });
});
