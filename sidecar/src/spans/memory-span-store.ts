// Spans kept only in memory, in a bounded ring: for tests and ephemeral pods (storage.kind `memory`).

import type { Span } from './span.ts';
import type { LocalSpanStore } from './span-store.ts';
import { SPEND_GROUPS, SpendAccumulator } from './spend.ts';
import { spanToRecord } from './span-columns.ts';

export const DEFAULT_MEMORY_SPAN_CAPACITY = 10_000;

export function openMemorySpanStore(capacity: number = DEFAULT_MEMORY_SPAN_CAPACITY): LocalSpanStore {
  if (!Number.isInteger(capacity) || capacity < 1) {
    throw new RangeError(`memory span store capacity must be a positive integer, got ${capacity}`);
  }
  const ring = new Array<Span | undefined>(capacity);
  let next = 0; // slot the next span goes to
  let size = 0;

  return {
    insertBatch(spans) {
      for (const span of spans) {
        ring[next] = span;
        next = (next + 1) % capacity;
        if (size < capacity) size++;
      }
    },
    recent(limit) {
      const out: Span[] = [];
      for (let i = 1; i <= size; i++) {
        out.push(ring[(next - i + capacity) % capacity] as Span);
      }
      // Spans arrive when they end; order by start like the SQLite store does (stable: ties stay newest-in first).
      out.sort((a, b) => (a.startTime < b.startTime ? 1 : a.startTime > b.startTime ? -1 : 0));
      return out.slice(0, Math.max(0, limit));
    },
    count() {
      return size;
    },
    spend(query) {
      const column = SPEND_GROUPS[query.groupBy];
      const totals = new SpendAccumulator(query);
      for (let i = 0; i < size; i++) {
        const span = ring[i] as Span;
        const start = new Date(span.startTime);
        if (span.attempt === null && totals.inWindow(start)) totals.add(start, spanToRecord(span)[column], span.costUsd, span.totalTokens);
      }
      return totals.report();
    },
    close() {
      ring.fill(undefined);
      size = 0;
    },
  };
}
