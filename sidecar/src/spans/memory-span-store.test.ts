import { describeSpanStoreConformance } from '../../../test/support/span-store-conformance.ts';
import { describe, expect, it } from 'vitest';
import { openMemorySpanStore } from './memory-span-store.ts';
import { sampleSpan } from '../../../test/support/sample-span.ts';

describe('memory span store', () => {
  it('keeps only the newest spans up to its capacity, newest first by start time', async () => {
    const store = openMemorySpanStore(3);
    const at = (s: number) => sampleSpan({ requestId: `r${s}`, startTime: `2026-01-15T10:00:0${s}.000Z` });
    await store.insertBatch([at(1), at(3)]);
    await store.insertBatch([at(2), at(5), at(4)]);
    expect(store.count()).toBe(3);
    expect(store.recent(10).map((s) => s.requestId)).toEqual(['r5', 'r4', 'r2']);
    expect(store.recent(1).map((s) => s.requestId)).toEqual(['r5']);
  });

  it('rejects a capacity that is not a positive integer', () => {
    expect(() => openMemorySpanStore(0)).toThrow('memory span store capacity must be a positive integer, got 0');
  });
});

describeSpanStoreConformance('memory', () => openMemorySpanStore(1000));
