import { describe, expect, it } from 'vitest';
import { LookupBounds, type LookupSlot } from './lookup-bounds.ts';

function granted(slot: LookupSlot): () => void {
  if (slot.retryAfterSeconds !== undefined) throw new Error(`refused, retry after ${slot.retryAfterSeconds} s`);
  return slot.release;
}

describe('LookupBounds', () => {
  it('lets a burst through, then one lookup per 1/perSecond, and says when to come back', () => {
    let now = 1_000_000;
    const bounds = new LookupBounds({ perSecond: 2, burst: 3, concurrent: 10 }, () => now);
    for (let i = 0; i < 3; i++) granted(bounds.take())();
    expect(bounds.take()).toEqual({ retryAfterSeconds: 1 });
    now += 499; // 0.998 of a lookup refilled
    expect(bounds.take().retryAfterSeconds).toBe(1);
    now += 1;
    granted(bounds.take())();
    expect(bounds.refused).toBe(2);
    // A long quiet spell refills the burst, no more.
    now += 3_600_000;
    for (let i = 0; i < 3; i++) granted(bounds.take())();
    expect(bounds.take().retryAfterSeconds).toBe(1);
  });

  it('a slow rate names a longer wait', () => {
    const bounds = new LookupBounds({ perSecond: 1, burst: 1, concurrent: 10 }, () => 0);
    granted(bounds.take())();
    expect(bounds.take()).toEqual({ retryAfterSeconds: 1 });
    const slow = new LookupBounds({ perSecond: 0.25, burst: 1, concurrent: 10 }, () => 0);
    granted(slow.take())();
    expect(slow.take()).toEqual({ retryAfterSeconds: 4 });
  });

  it('refuses past the lookups in flight until one is answered; a release counts once', () => {
    const bounds = new LookupBounds({ perSecond: 100, burst: 100, concurrent: 2 }, () => 0);
    const first = granted(bounds.take());
    granted(bounds.take());
    expect(bounds.take()).toEqual({ retryAfterSeconds: 1 });
    first();
    first();
    granted(bounds.take());
    expect(bounds.take()).toEqual({ retryAfterSeconds: 1 });
  });

  it('a clock set back refills nothing', () => {
    let now = 10_000;
    const bounds = new LookupBounds({ perSecond: 1, burst: 1, concurrent: 10 }, () => now);
    granted(bounds.take())();
    now = 0;
    expect(bounds.take().retryAfterSeconds).toBe(1);
    now = 999;
    expect(bounds.take().retryAfterSeconds).toBe(1);
  });
});
