import { afterEach, describe, expect, it, vi } from 'vitest';
import { RefreshingCache, type Expiring } from './refreshing-cache.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A fetch whose results the test releases by hand, so concurrency is explicit. */
function controlledFetch() {
  const waiting: { resolve: (value: Expiring<string>) => void; reject: (error: Error) => void }[] = [];
  const fetch = () => new Promise<Expiring<string>>((resolve, reject) => waiting.push({ resolve, reject }));
  return { fetch, waiting };
}

describe('RefreshingCache', () => {
  it('shares one fetch among concurrent callers and serves the value from memory afterwards', async () => {
    const { fetch, waiting } = controlledFetch();
    const cache = new RefreshingCache({ fetch, refreshMarginMs: 1000 });
    const callers = [cache.get(), cache.get(), cache.get()];
    expect(waiting).toHaveLength(1);
    waiting[0]?.resolve({ value: 'v1', expiresAt: Date.now() + 60_000 });
    expect(await Promise.all(callers)).toEqual(['v1', 'v1', 'v1']);
    expect(await cache.get()).toBe('v1');
    expect(waiting).toHaveLength(1);
  });

  it('refreshes within the margin before expiry and never for values without expiry', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const { fetch, waiting } = controlledFetch();
    const cache = new RefreshingCache({ fetch, refreshMarginMs: 1000 });
    const first = cache.get();
    waiting[0]?.resolve({ value: 'v1', expiresAt: start + 10_000 });
    expect(await first).toBe('v1');

    vi.setSystemTime(start + 8_999);
    expect(await cache.get()).toBe('v1');
    vi.setSystemTime(start + 9_000);
    const second = cache.get();
    expect(waiting).toHaveLength(2);
    waiting[1]?.resolve({ value: 'static', expiresAt: undefined });
    expect(await second).toBe('static');

    vi.setSystemTime(start + 10 * 365 * 86_400_000);
    expect(await cache.get()).toBe('static');
    expect(waiting).toHaveLength(2);
  });

  it('keeps a still-valid value when the early refresh fails, then fails once it has expired', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const stale: unknown[] = [];
    const { fetch, waiting } = controlledFetch();
    const cache = new RefreshingCache({ fetch, refreshMarginMs: 1000, onStaleServed: (error) => stale.push(error) });
    const first = cache.get();
    waiting[0]?.resolve({ value: 'v1', expiresAt: start + 10_000 });
    await first;

    vi.setSystemTime(start + 9_500);
    const during = cache.get();
    waiting[1]?.reject(new Error('token endpoint down'));
    expect(await during).toBe('v1');
    expect(stale).toHaveLength(1);
    expect(cache.lastError).toBeUndefined();

    vi.setSystemTime(start + 10_000);
    const after = cache.get();
    waiting[2]?.reject(new Error('still down'));
    await expect(after).rejects.toThrow('still down');
    expect((cache.lastError as Error).message).toBe('still down');

    const recovered = cache.get();
    waiting[3]?.resolve({ value: 'v2', expiresAt: start + 20_000 });
    expect(await recovered).toBe('v2');
    expect(cache.lastError).toBeUndefined();
  });
});
