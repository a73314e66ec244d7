// What every span store must do the same way, as one suite each store's tests run against the real thing
// (a SQLite or DuckDB file, the BigQuery and Firestore emulators): spans round-trip whole, the newest come first
// within the limit, and the spend report of the shared table of calls (test/support/sample-calls.ts)
// matches the report worked out with exact decimals, for every grouping and bucket.

import { describe, expect, it } from 'vitest';
import { expectedSampleReport, SAMPLE_SINCE, SAMPLE_UNTIL, sampleCallSpans, sampleQueries } from './sample-calls.ts';
import { sampleSpan } from './sample-span.ts';
import type { SpanStore } from '../../sidecar/src/spans/span-store.ts';

/** Opens an empty store (a fresh file, table or collection) for one test; the suite closes it. */
export type OpenEmptyStore = () => Promise<SpanStore> | SpanStore;

export function describeSpanStoreConformance(name: string, openEmpty: OpenEmptyStore): void {
  describe(`${name}: the span store contract`, () => {
    it('round-trips every field, newest first within the limit', async () => {
      const store = await openEmpty();
      try {
        // Billed units other than tokens (schema v5, ADR 0910) round-trip too, a fractional second included.
        const full = sampleSpan({
          parentSpanId: 'b7ad6b7169203331',
          startTime: '2026-01-15T10:00:02.000Z',
          costUsd: 0.0001234567,
          images: 2,
          audioSeconds: 61.5,
          characters: 1234,
          // The calling process with its exec_id and the answer's tool calls (schema v7, ADR 1603).
          process: {
            attribution: 'tetragon',
            pid: 4242,
            executablePath: '/usr/bin/python3',
            commandArgs: null,
            parentExecutables: ['/bin/sh'],
            containerName: 'app',
            execId: 'OjEyMzQ1Njc4OTo0MjQy',
          },
          toolCalls: [
            { id: 'call_mszuSIzqtI65i1wAUOE8w5H4', name: 'get_weather', argumentsSha256: '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d' },
            { id: null, name: 'probe', argumentsSha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' },
          ],
        });
        const failed = sampleSpan({
          status: 'error',
          statusCode: null,
          error: "upstream unreachable: connect ECONNREFUSED 'quoted'",
          responseModel: null,
          userId: null,
          projectId: null,
          priced: false,
          costUsd: 0,
          route: 'gamma-cloudb',
          provider: 'anthropic',
          startTime: '2026-01-15T10:00:03.000Z',
        });
        const oldest = sampleSpan({ startTime: '2026-01-15T10:00:00.000Z', userId: 'zoë ☃', durationMs: 0.125 });
        await store.insertBatch([full, oldest]);
        await store.insertBatch([failed]);
        expect(await store.recent(10)).toEqual([failed, full, oldest]);
        expect(await store.recent(2)).toEqual([failed, full]);
        expect(await store.count()).toBe(3);
      } finally {
        await store.close();
      }
    });

    it('reports spend per user, model, project and provider, per hour and day, exactly as the calls add up', async () => {
      const store = await openEmpty();
      try {
        const spans = sampleCallSpans();
        // in several batches, out of time order, as a writer would hand them over
        for (let i = 0; i < spans.length; i += 50) await store.insertBatch(spans.slice(i, i + 50).reverse());
        for (const query of sampleQueries()) {
          const report = await store.spend(query);
          expect({ query, rows: report.rows }).toEqual({ query, rows: expectedSampleReport(query) });
          expect(report.truncated).toBe(false);
        }
        const cut = await store.spend({ since: SAMPLE_SINCE, until: SAMPLE_UNTIL, groupBy: 'user', bucket: null, limit: 2 });
        expect(cut.rows).toEqual(expectedSampleReport({ since: SAMPLE_SINCE, until: SAMPLE_UNTIL, groupBy: 'user', bucket: null, limit: 2 }).slice(0, 2));
        expect(cut.truncated).toBe(true);
        const empty = await store.spend({ since: new Date('2030-01-01T00:00:00Z'), until: null, groupBy: 'model', bucket: 'day', limit: 10 });
        expect(empty).toMatchObject({ rows: [], truncated: false, groupBy: 'model', bucket: 'day', since: '2030-01-01T00:00:00.000Z' });
      } finally {
        await store.close();
      }
    });
  });
}
