import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay } from './backoff.ts';

describe('backoffDelay', () => {
  const policy = { baseMs: 5, maxMs: 1_000_000 };

  it('doubles from the base with each failure and stops at the cap', () => {
    expect([1, 2, 3, 4].map((n) => backoffDelay(policy, n))).toEqual([5, 10, 20, 40]);
    // 5 ms · 2^17 = 655 s, 2^18 would be 1310 s: capped at 1000 s.
    expect(backoffDelay(policy, 18)).toBe(655_360);
    expect(backoffDelay(policy, 19)).toBe(1_000_000);
    expect(backoffDelay(policy, 5000)).toBe(1_000_000);
  });

  it('is zero before any failure', () => {
    expect(backoffDelay(policy, 0)).toBe(0);
  });

  it('jitter shortens the delay by at most the jitter fraction', () => {
    const jittered = { baseMs: 1000, maxMs: 30_000, jitter: 0.5 };
    expect(backoffDelay(jittered, 1, () => 0)).toBe(1000);
    expect(backoffDelay(jittered, 1, () => 0.999999)).toBe(500);
    expect(backoffDelay(jittered, 10, () => 0.5)).toBe(22_500);
  });
});

describe('Backoff', () => {
  it('counts failures and starts over after reset', () => {
    const b = new Backoff({ baseMs: 100, maxMs: 250 });
    expect([b.next(), b.next(), b.next()]).toEqual([100, 200, 250]);
    expect(b.failures).toBe(3);
    b.reset();
    expect(b.next()).toBe(100);
  });
});
