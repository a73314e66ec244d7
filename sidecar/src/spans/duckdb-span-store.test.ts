import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeSpanStoreConformance } from '../../../test/support/span-store-conformance.ts';
import { openDuckDbSpanStore } from './duckdb-span-store.ts';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import { SPAN_COLUMN_NAMES } from './span-columns.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-duckdb-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describeSpanStoreConformance('DuckDB', () => openDuckDbSpanStore(join(mkdtempSync(join(tmpdir(), 'tollgate-duckdb-')), 'spans.duckdb')));

/** Runs statements on a file directly, as an analyst's DuckDB (or an older Tollgate) would. */
async function withFile<T>(path: string, use: (run: (sql: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<T> {
  const instance = await DuckDBInstance.create(path);
  const connection = await instance.connect();
  await connection.run("LOAD icu; SET TimeZone = 'UTC'");
  try {
    return await use(async (sql) => (await connection.runAndReadAll(sql)).getRowObjectsJS());
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

describe('DuckDB span store', () => {
  it('creates the table with the same column names as SQLite, typed for analysis, and keeps spans across reopening', async () => {
    const path = join(dir, 'nested', 'spans.duckdb');
    const store = await openDuckDbSpanStore(path);
    const span = sampleSpan({
      images: 2,
      audioSeconds: 61.5,
      characters: 1234,
      process: { attribution: 'unattributed', pid: null, executablePath: null, commandArgs: null, parentExecutables: [], containerName: null },
    });
    await store.insertBatch([span]);
    await store.close();
    const columns = await withFile(path, (run) => run("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'spans' ORDER BY ordinal_position"));
    expect(columns.map((c) => c.column_name)).toEqual(SPAN_COLUMN_NAMES);
    expect(Object.fromEntries(columns.map((c) => [c.column_name, c.data_type]))).toMatchObject({
      start_time: 'TIMESTAMP WITH TIME ZONE',
      gen_ai_cost_usd: 'DOUBLE',
      gen_ai_total_tokens: 'BIGINT',
      priced: 'BOOLEAN',
      user_id: 'VARCHAR',
      gen_ai_usage_images: 'BIGINT',
      gen_ai_usage_audio_seconds: 'DOUBLE',
      gen_ai_usage_characters: 'BIGINT',
      process_attribution: 'VARCHAR',
      process_pid: 'BIGINT',
    });
    // an analyst's query on the file sees the call as it was recorded
    const [row] = await withFile(path, (run) => run("SELECT user_id, gen_ai_cost_usd, strftime(start_time, '%Y-%m-%dT%H:%M:%S.%g') AS t FROM spans"));
    expect(row).toEqual({ user_id: 'alice', gen_ai_cost_usd: span.costUsd, t: '2026-01-15T10:00:00.000' });
    const again = await openDuckDbSpanStore(path);
    expect(await again.recent(5)).toEqual([span]);
    await again.close();
  });

  it('upgrades a file an older version wrote (version 1 columns only): adds the columns, old rows read with defaults', async () => {
    const path = join(dir, 'v1.duckdb');
    const v1 = SPAN_COLUMN_NAMES.slice(0, 18);
    await withFile(path, async (run) => {
      await run(`CREATE TABLE spans (span_id VARCHAR NOT NULL, trace_id VARCHAR NOT NULL, parent_span_id VARCHAR, name VARCHAR NOT NULL DEFAULT '',
        start_time TIMESTAMPTZ NOT NULL, duration_ms DOUBLE NOT NULL DEFAULT 0, status VARCHAR NOT NULL DEFAULT 'ok', status_code BIGINT,
        error VARCHAR, user_id VARCHAR, route VARCHAR NOT NULL DEFAULT '', gen_ai_operation_name VARCHAR NOT NULL DEFAULT '',
        gen_ai_provider_name VARCHAR NOT NULL DEFAULT '', gen_ai_request_model VARCHAR NOT NULL DEFAULT '',
        gen_ai_usage_input_tokens BIGINT NOT NULL DEFAULT 0, gen_ai_usage_output_tokens BIGINT NOT NULL DEFAULT 0,
        gen_ai_total_tokens BIGINT NOT NULL DEFAULT 0, gen_ai_cost_usd DOUBLE NOT NULL DEFAULT 0)`);
      await run(`INSERT INTO spans VALUES ('00f067aa0ba902b7', '4bf92f3577b34da6a3ce929d0e0e4736', NULL, 'chat claude-sonnet-4-5',
        '2025-06-01T08:00:00Z', 812.5, 'ok', 200, NULL, 'bob', 'gamma', 'chat', 'anthropic', 'claude-sonnet-4-5', 1000, 200, 1200, 0.006)`);
      expect((await run("SELECT column_name FROM information_schema.columns WHERE table_name = 'spans'")).map((c) => c.column_name)).toEqual(v1);
    });
    const store = await openDuckDbSpanStore(path);
    const [old] = await store.recent(5);
    expect(old).toMatchObject({ spanId: '00f067aa0ba902b7', userId: 'bob', projectId: null, requestId: '', cachedTokens: 0, reasoningTokens: 0, priced: true, costUsd: 0.006 });
    const fresh = sampleSpan({ projectId: 'p2', cachedTokens: 300, startTime: '2026-01-01T00:00:00.000Z' });
    await store.insertBatch([fresh]);
    expect(await store.recent(5)).toEqual([fresh, old]);
    expect((await store.spend({ since: new Date('2025-01-01'), until: null, groupBy: 'project', bucket: null, limit: 10 })).rows).toEqual([
      { key: null, cost_usd: 0.006, calls: 1, total_tokens: 1200 },
      { key: 'p2', cost_usd: fresh.costUsd, calls: 1, total_tokens: 1500 },
    ]);
    await store.close();
  });

  it('keeps working on a file a newer version wrote (an extra column it does not know)', async () => {
    const path = join(dir, 'newer.duckdb');
    await (await openDuckDbSpanStore(path)).close();
    await withFile(path, (run) => run('ALTER TABLE spans ADD COLUMN gen_ai_future_tokens BIGINT DEFAULT 7'));
    const store = await openDuckDbSpanStore(path);
    const span = sampleSpan();
    await store.insertBatch([span]);
    expect(await store.recent(1)).toEqual([span]);
    await store.close();
    expect(await withFile(path, (run) => run('SELECT gen_ai_future_tokens FROM spans'))).toEqual([{ gen_ai_future_tokens: 7n }]);
  });

  it('keeps about maxSpans spans, the newest', async () => {
    const store = await openDuckDbSpanStore(join(dir, 'capped.duckdb'), { maxSpans: 10 });
    for (let i = 0; i < 5; i++) {
      await store.insertBatch(
        Array.from({ length: 5 }, (_, j) => sampleSpan({ requestId: `r${i * 5 + j}`, startTime: new Date(Date.UTC(2026, 0, 1, 0, i * 5 + j)).toISOString() })),
      );
    }
    expect(await store.count()).toBeLessThanOrEqual(11);
    expect((await store.recent(100)).map((s) => s.requestId).slice(0, 10)).toEqual(['r24', 'r23', 'r22', 'r21', 'r20', 'r19', 'r18', 'r17', 'r16', 'r15']);
    await store.close();
  });

  it('names the file when it cannot be opened, and refuses to create one for a report', async () => {
    await expect(openDuckDbSpanStore(join(dir, 'absent.duckdb'), { mustExist: true })).rejects.toThrow(/absent\.duckdb: no such file/);
    const notDuck = join(dir, 'not-a-duckdb-file');
    (await import('node:fs')).writeFileSync(notDuck, 'SQLite format 3\u0000 and then some');
    await expect(openDuckDbSpanStore(notDuck)).rejects.toThrow(/cannot open span store .*not-a-duckdb-file/);
  });
});
