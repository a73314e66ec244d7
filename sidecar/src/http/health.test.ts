import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Lifecycle } from '../lifecycle.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import { SpanStoreWriteError } from '../spans/span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { healthCheck } from './health.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A writer whose store fails every write, as a store that is down does. */
function failingWriter(retryable: boolean): SpanWriter {
  const store = { ...openMemorySpanStore(10), insertBatch: () => Promise.reject(new SpanStoreWriteError('store down', retryable)) };
  return new SpanWriter(
    store,
    { bufferSize: 10, batchSize: 1, flushIntervalMs: 10, retry: { maxAttempts: 100, initialBackoffMs: 10, maxBackoffMs: 10 } },
    pino({ level: 'silent' }),
  );
}

describe('healthCheck', () => {
  it('turns 503 while writes to a local store keep failing', async () => {
    vi.useFakeTimers();
    const writer = failingWriter(false);
    const check = healthCheck({ lifecycle: new Lifecycle(), writer });
    expect(check().statusCode).toBe(200);
    writer.record(sampleSpan());
    await vi.advanceTimersByTimeAsync(1500);
    expect(check()).toEqual({ statusCode: 503, body: { status: 'error', detail: 'span store writes are failing (2 errors so far)' } });
    void writer.close();
  });

  it('stays 200 while a remote store is down: its outage must not take every pod out of service', async () => {
    vi.useFakeTimers();
    const writer = failingWriter(true);
    const check = healthCheck({ lifecycle: new Lifecycle(), writer, writeFailuresAreUnhealthy: false });
    writer.record(sampleSpan());
    await vi.advanceTimersByTimeAsync(1500);
    expect(writer.stats().writeErrors).toBeGreaterThan(1);
    expect(check().statusCode).toBe(200);
    void writer.close();
  });
});
