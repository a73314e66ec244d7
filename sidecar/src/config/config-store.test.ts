import { describe, expect, it } from 'vitest';
import { ConfigStore } from './config-store.ts';

describe('ConfigStore revisions', () => {
  it('counts changes of the effective config only: an empty or repeated change keeps the revision', () => {
    const store = new ConfigStore();
    const seen: number[] = [];
    store.subscribe((snapshot) => seen.push(snapshot.revision));
    const price = { provider: 'openai', model: 'gpt-4o-mini', input_per_million: 10, output_per_million: 20 } as const;
    expect(store.mergeIntoLayer('api', {}).revision).toBe(0);
    expect(store.mergeIntoLayer('api', { pricing: { models: [price] } }).revision).toBe(1);
    expect(store.mergeIntoLayer('api', { pricing: { models: [price] } }).revision).toBe(1);
    expect(store.mergeIntoLayer('api', { breaker: { openMs: 10_000 } }).revision).toBe(1); // the default already
    expect(store.setLayer('operator', {}).revision).toBe(1);
    expect(seen).toEqual([1]);
  });

  it('keeps a layer that changes nothing yet, so it wins once the layer under it changes', () => {
    const store = new ConfigStore();
    store.mergeIntoLayer('api', { breaker: { openMs: 10_000 } });
    store.setLayer('operator', { breaker: { openMs: 500 } });
    expect(store.get().breaker.openMs).toBe(10_000);
  });
});
