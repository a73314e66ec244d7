// Spans kept only in memory, in a bounded ring: for tests and ephemeral pods (storage.kind `memory`).

import type { Span } from './span.ts';
import type { SpanStore } from './span-store.ts';

export const DEFAULT_MEMORY_SPAN_CAPACITY = 10_000;

export function openMemorySpanStore(capacity: number = DEFAULT_MEMORY_SPAN_CAPACITY): SpanStore {
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
    close() {
      ring.fill(undefined);
      size = 0;
    },
  };
}
