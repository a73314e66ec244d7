// The BigQuery span store against the local BigQuery emulator (test/emulators/bigquery.ts, ADR 1101) through the
// real @google-cloud/bigquery client: the store contract, the table it creates (partitioned by day on start_time,
// clustered by project_id and trace_id), and schema evolution both ways. What the emulator cannot show is said
// where it matters (ADR 0404).

import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBigQuerySpanStore, SPAN_TABLE_SCHEMA } from '../../sidecar/src/spans/bigquery-span-store.ts';
import { sampleSpan } from '../support/sample-span.ts';
import { SPAN_COLUMN_NAMES, SPAN_COLUMNS } from '../../sidecar/src/spans/span-columns.ts';
import type { SpanStore } from '../../sidecar/src/spans/span-store.ts';
import { type BigQueryEmulator, startBigQueryEmulator } from '../emulators/bigquery.ts';
import { describeSpanStoreConformance } from '../support/span-store-conformance.ts';
import { waitFor } from '../support/wait-for.ts';

const logger = pino({ level: 'silent' });
let bq: BigQueryEmulator;
let tables = 0;

beforeAll(async () => {
  bq = await startBigQueryEmulator();
}, 300_000);
afterAll(async () => {
  await bq?.stop();
});

function open(table: string, prepare = true): SpanStore {
  return openBigQuerySpanStore({ projectId: bq.projectId, dataset: 'tollgate', table, apiEndpoint: bq.endpoint }, { logger, prepare });
}

/** Waits until the store's start-up has created (or upgraded) its table. */
async function prepared(table: string, column = 'priced'): Promise<void> {
  await waitFor(
    `table ${table} with ${column}`,
    async () => {
      const t = bq.client().dataset('tollgate').table(table);
      if (!(await t.exists())[0]) return false;
      const [metadata] = await t.getMetadata();
      return (metadata.schema.fields as { name: string }[]).some((f) => f.name === column);
    },
    30_000,
  );
}

describeSpanStoreConformance('BigQuery (emulator)', async () => {
  const table = `contract_${++tables}`;
  const store = open(table);
  await prepared(table);
  return store;
});

describe('BigQuery span store on the emulator', () => {
  it('creates the dataset and a table partitioned by day on start_time, clustered by project_id and trace_id', async () => {
    const store = open('created', true);
    await prepared('created');
    const [metadata] = await bq.client().dataset('tollgate').table('created').getMetadata();
    expect(metadata.timePartitioning).toMatchObject({ type: 'DAY', field: 'start_time' });
    expect(metadata.clustering).toEqual({ fields: ['project_id', 'trace_id'] });
    expect((metadata.schema.fields as { name: string; type: string; mode: string }[]).map((f) => [f.name, f.type, f.mode])).toEqual(
      SPAN_TABLE_SCHEMA.map((f) => [f.name, f.type, f.mode]),
    );
    expect((metadata.schema.fields as { name: string }[]).map((f) => f.name)).toEqual(SPAN_COLUMN_NAMES);
    await store.close();
  });

  it('sets partition expiration when partitionExpirationDays is given', async () => {
    openBigQuerySpanStore({ projectId: bq.projectId, dataset: 'tollgate', table: 'expiring', apiEndpoint: bq.endpoint, partitionExpirationDays: 90 }, { logger, prepare: true });
    await prepared('expiring');
    const [metadata] = await bq.client().dataset('tollgate').table('expiring').getMetadata();
    expect(metadata.timePartitioning).toMatchObject({ type: 'DAY', field: 'start_time', expirationMs: String(90 * 86_400_000) });
  });

  it('upgrades a table an older version created (version 1 columns): adds the missing columns as NULLABLE, old rows read with defaults', async () => {
    const v1 = SPAN_COLUMNS.filter((c) => c.since === 1).map((c) => c.name);
    const t = bq.client().dataset('tollgate').table('older');
    await t.create({
      schema: { fields: SPAN_TABLE_SCHEMA.filter((f) => v1.includes(f.name as string)) },
      timePartitioning: { type: 'DAY', field: 'start_time' },
      clustering: { fields: ['trace_id'] },
    });
    await t.insert(
      [
        {
          insertId: 'old',
          json: {
            span_id: '00f067aa0ba902b7',
            trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
            name: 'chat claude-sonnet-4-5',
            start_time: '2025-06-01T08:00:00.000Z',
            duration_ms: 812.5,
            status: 'ok',
            status_code: 200,
            user_id: 'bob',
            route: 'gamma',
            gen_ai_operation_name: 'chat',
            gen_ai_provider_name: 'anthropic',
            gen_ai_request_model: 'claude-sonnet-4-5',
            gen_ai_usage_input_tokens: 1000,
            gen_ai_usage_output_tokens: 200,
            gen_ai_total_tokens: 1200,
            gen_ai_cost_usd: 0.006,
          },
        },
      ],
      { raw: true },
    );

    const store = open('older');
    // Verified on the emulator: the store patches the table's schema (tables.patch) with every missing column.
    await prepared('older', 'priced');
    const [metadata] = await t.getMetadata();
    const fields = metadata.schema.fields as { name: string; type: string; mode: string }[];
    expect(fields.map((f) => f.name)).toEqual(SPAN_COLUMN_NAMES);
    expect(fields.filter((f) => !v1.includes(f.name)).every((f) => f.mode === 'NULLABLE')).toBe(true);
    expect(fields.find((f) => f.name === 'priced')).toMatchObject({ type: 'BOOL' });

    // bqemulator 1.4 records a patched schema in its catalog but does not add the columns to the DuckDB table
    // behind it (BigQuery itself does both). Bring its storage in line the way the emulator supports, one
    // ALTER per column, so the rest of the upgrade can be checked end to end.
    for (const column of SPAN_TABLE_SCHEMA.filter((f) => !v1.includes(f.name as string))) {
      await bq.client().query(`ALTER TABLE tollgate.older ADD COLUMN IF NOT EXISTS ${column.name} ${column.type}`);
    }
    const [old] = await store.recent(10);
    expect(old).toMatchObject({
      spanId: '00f067aa0ba902b7',
      userId: 'bob',
      projectId: null,
      requestId: '',
      cachedTokens: 0,
      reasoningTokens: 0,
      priced: true,
      costUsd: 0.006,
      startTime: '2025-06-01T08:00:00.000Z',
    });
    const fresh = sampleSpan({ projectId: 'p2', cachedTokens: 300, priced: false, startTime: '2025-06-02T00:00:00.000Z' });
    await store.insertBatch([fresh]);
    expect(await store.recent(10)).toEqual([fresh, old]);
    await store.close();
  });

  it('keeps working on a table with a column it does not know (a newer version, or the team’s own)', async () => {
    const t = bq.client().dataset('tollgate').table('wider');
    await t.create({
      schema: { fields: [...SPAN_TABLE_SCHEMA, { name: 'cost_center', type: 'STRING', mode: 'NULLABLE' }] },
      timePartitioning: { type: 'DAY', field: 'start_time' },
    });
    const store = open('wider');
    const span = sampleSpan();
    await waitFor(
      'a write to the wider table',
      async () => {
        await store.insertBatch([span]);
        return true;
      },
      30_000,
    );
    expect(await store.recent(5)).toEqual([span]);
    const [metadata] = await t.getMetadata();
    expect((metadata.schema.fields as { name: string }[]).map((f) => f.name)).toContain('cost_center');
    await store.close();
  });

  it('reads without creating anything when it serves a report', async () => {
    const store = open('absent', false);
    // BigQuery answers a query on a missing table with 404 (the report's error); the emulator answers with no rows.
    await Promise.resolve(store.spend({ since: new Date('2026-01-01'), until: null, groupBy: 'user', bucket: null, limit: 10 })).catch(() => undefined);
    expect((await bq.client().dataset('tollgate').table('absent').exists())[0]).toBe(false);
  });
});
