// Spans in a BigQuery table (storage.kind: bigquery), through @google-cloud/bigquery and Application Default
// Credentials (or a key file). At start-up the dataset and table are created when missing: partitioned by day
// on start_time (a report over a week reads a week) and clustered by (project_id, trace_id). A table an older
// version created gets the columns it lacks (additive only, ADR 0401); columns it has that this version does
// not know are left alone. Rows go in with tabledata.insertAll, insertId = span_id, so a batch retried after a
// timeout is deduplicated by BigQuery instead of doubled.
//
// Nothing here blocks a request: the writer hands over one batch at a time and backs off when a write fails
// as retryable (unreachable, 5xx, rate limits, a table that vanished), keeping new spans in its bounded ring.

import { BigQuery, type Table, type TableField } from '@google-cloud/bigquery';
import type { Logger } from 'pino';
import { type ColumnType, recordToSpan, SPAN_COLUMNS, spanToRecord } from './span-columns.ts';
import { type SpanStore, SpanStoreWriteError } from './span-store.ts';
import { type SpendGroupTotal, spendReport } from './spend.ts';
import { type SpendSqlDialect, spendStatement } from './spend-sql.ts';

export interface BigQueryStorageSettings {
  /** Else the project of the credentials (ADC). */
  projectId?: string;
  dataset: string;
  table: string;
  /** Dataset location when it is created (US, EU, europe-west1, …) and where queries run. */
  location?: string;
  /** Partitions older than this are deleted by BigQuery; absent: kept. */
  partitionExpirationDays?: number;
  /** Another endpoint (an emulator, a private endpoint); default BigQuery's. */
  apiEndpoint?: string;
  /** A service account key file (JSON); else Application Default Credentials. */
  credentialsFile?: string;
}

export interface BigQuerySpanStoreOptions {
  logger: Logger;
  /** Create the dataset and table, and add missing columns (the proxy); a report only reads. */
  prepare: boolean;
  /** Per HTTP request, milliseconds. */
  timeoutMs?: number;
}

const BIGQUERY_TYPES: Record<ColumnType, string> = { string: 'STRING', int: 'INT64', float: 'FLOAT64', bool: 'BOOL', timestamp: 'TIMESTAMP' };
/** Present in every row since version 1; the only columns BigQuery may require (REQUIRED columns cannot be added later). */
const REQUIRED = new Set(['span_id', 'trace_id', 'start_time']);

export const SPAN_TABLE_SCHEMA: TableField[] = SPAN_COLUMNS.map((c) => ({
  name: c.name,
  type: BIGQUERY_TYPES[c.type],
  mode: REQUIRED.has(c.name) ? 'REQUIRED' : 'NULLABLE',
}));
export const SPAN_TABLE_CLUSTERING = ['project_id', 'trace_id'];

const RETRYABLE_HTTP = new Set([401, 403, 404, 408, 429, 500, 502, 503, 504]);
/** Windows recent() tries in turn, newest first, so a look at the last spans reads a day's partition, not the table. */
const RECENT_WINDOWS_DAYS = [1, 31, null] as const;

function httpCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

function ignoreAlreadyExists(error: unknown): void {
  if (httpCode(error) !== 409) throw error;
}

/** tabledata.insertAll's answer: rows it refused, each with its reasons. */
interface InsertAllResponse {
  insertErrors?: { index?: number; errors?: { reason?: string; message?: string }[] }[];
}

function bigQueryClient(settings: BigQueryStorageSettings, options: BigQuerySpanStoreOptions): BigQuery {
  // `timeout` (per HTTP request) is a ServiceOptions field of @google-cloud/common that BigQueryOptions does not
  // re-declare; without it a black-holed endpoint holds a batch for the library's 60 s.
  const requestTimeout = { timeout: options.timeoutMs ?? 30_000 } as object;
  return new BigQuery({
    ...(settings.projectId ? { projectId: settings.projectId } : {}),
    ...(settings.location ? { location: settings.location } : {}),
    ...(settings.apiEndpoint ? { apiEndpoint: settings.apiEndpoint } : {}),
    ...(settings.credentialsFile ? { keyFilename: settings.credentialsFile } : {}),
    // The span writer retries with its own backoff while spans wait in its ring; the client's would multiply it.
    autoRetry: false,
    ...requestTimeout,
  });
}

/** Rows insertAll refused: `invalid` rows will be refused again (not retryable); `stopped` rows only waited on those. */
function refusedRows(response: InsertAllResponse, name: string): SpanStoreWriteError | undefined {
  const reasons = (response.insertErrors ?? []).flatMap((row) => row.errors ?? []);
  if (reasons.length === 0) return undefined;
  const invalid = reasons.find((r) => r.reason === 'invalid');
  const first = invalid ?? reasons.find((r) => r.reason !== 'stopped') ?? reasons[0];
  return new SpanStoreWriteError(`BigQuery refused rows of ${name}: ${first?.reason ?? 'unknown'}: ${first?.message ?? ''}`, invalid === undefined);
}

export function openBigQuerySpanStore(settings: BigQueryStorageSettings, options: BigQuerySpanStoreOptions): SpanStore {
  const { logger } = options;
  const client = bigQueryClient(settings, options);
  const name = `${settings.dataset}.${settings.table}`;
  const table = client.dataset(settings.dataset).table(settings.table);
  let prepared: Promise<Table> | undefined;

  /** Creates or upgrades the table once; a failure is forgotten so that the next write tries again. */
  const ready = (): Promise<Table> => {
    if (!options.prepare) return Promise.resolve(table);
    prepared ??= prepareTable(client, table, settings, logger);
    prepared.catch(() => (prepared = undefined));
    return prepared;
  };
  // At start-up, not at the first call: a missing permission or dataset shows in the log at once.
  if (options.prepare) {
    ready().catch((error: unknown) => logger.warn({ table: name, err: (error as Error).message }, 'cannot prepare the BigQuery span table yet; retrying with the first batch'));
  }

  const query = async (sql: string, params: Record<string, unknown>): Promise<Record<string, unknown>[]> => {
    const [rows] = await client.query({
      query: sql,
      params,
      ...(settings.location ? { location: settings.location } : {}),
      // Counts and cost units as BigInt: INT64 sums may pass 2^53.
      wrapIntegers: { integerTypeCastFunction: (value: string) => BigInt(value) },
    });
    return rows as Record<string, unknown>[];
  };
  // The query job runs in the client's project (given, or the credentials'), so dataset.table names the table.
  const qualified = () => `\`${settings.dataset}.${settings.table}\``;
  const selectList = SPAN_COLUMNS.map((c) => (c.name === 'start_time' ? 'UNIX_MILLIS(start_time) AS start_time' : c.name)).join(', ');

  return {
    async insertBatch(spans) {
      if (spans.length === 0) return;
      let target: Table;
      try {
        target = await ready();
      } catch (error) {
        const code = httpCode(error);
        throw new SpanStoreWriteError(`cannot prepare BigQuery table ${name}: ${(error as Error).message}`, code === undefined || RETRYABLE_HTTP.has(code), { cause: error });
      }
      // The span id is the insertId: BigQuery drops a row it has already seen from a retried batch. The request
      // goes out as is: Table.insert() deep-copies every row first, which costs the event loop more than the
      // request itself (bench/span-stores.ts).
      const rows = spans.map((span) => ({ insertId: span.spanId, json: spanToRecord(span) }));
      let response: InsertAllResponse;
      try {
        [response] = (await target.request({ method: 'POST', uri: '/insertAll', json: { rows } })) as [InsertAllResponse, unknown];
      } catch (error) {
        const code = httpCode(error);
        // The table (or the whole dataset) is gone: create it again before the retry.
        if (code === 404) prepared = undefined;
        throw new SpanStoreWriteError(`BigQuery insertAll into ${name} failed: ${(error as Error).message}`, code === undefined || RETRYABLE_HTTP.has(code), { cause: error });
      }
      const refused = refusedRows(response, name);
      if (refused) throw refused;
    },
    async recent(limit) {
      const n = Math.max(0, Math.trunc(limit));
      if (n === 0) return [];
      let rows: Record<string, unknown>[] = [];
      for (const days of RECENT_WINDOWS_DAYS) {
        const window = days === null ? '' : `WHERE start_time >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL ${days} DAY) `;
        rows = await query(`SELECT ${selectList} FROM ${qualified()} ${window}ORDER BY start_time DESC LIMIT @limit`, { limit: n });
        if (rows.length >= n) break;
      }
      return rows.map((row) => recordToSpan({ ...row, start_time: new Date(Number(row.start_time)).toISOString() }));
    },
    async count() {
      const [row] = await query(`SELECT COUNT(*) AS n FROM ${qualified()}`, {});
      return Number(row?.n ?? 0);
    },
    async spend(spendQuery) {
      const dialect: SpendSqlDialect = {
        table: qualified(),
        bucket: (bucket) => `UNIX_MILLIS(TIMESTAMP_TRUNC(start_time, ${bucket.toUpperCase()}))`,
        param: (param) => `@${param}`,
        integer: 'INT64',
      };
      const statement = spendStatement(dialect, spendQuery);
      const params: Record<string, unknown> = { since: BigQuery.timestamp(statement.params.since) };
      if (statement.params.until) params.until = BigQuery.timestamp(statement.params.until);
      const rows = await query(statement.sql, params);
      return spendReport(
        spendQuery,
        rows.map((r): SpendGroupTotal => ({
          ...(r.bucket === undefined ? {} : { bucket: new Date(Number(r.bucket)).toISOString() }),
          key: (r.key ?? null) as string | null,
          costUnits: (r.cost_units ?? 0n) as bigint,
          calls: r.calls as bigint,
          totalTokens: (r.total_tokens ?? 0n) as bigint,
        })),
      );
    },
    async close() {
      // The client keeps no connections of its own beyond the shared keep-alive agent.
    },
  };
}

async function prepareTable(client: BigQuery, table: Table, settings: BigQueryStorageSettings, logger: Logger): Promise<Table> {
  const name = `${settings.dataset}.${settings.table}`;
  const dataset = client.dataset(settings.dataset);
  const [datasetExists] = await dataset.exists();
  if (!datasetExists) await dataset.create(settings.location ? { location: settings.location } : {}).catch(ignoreAlreadyExists);
  const [tableExists] = await table.exists();
  if (!tableExists) {
    await table
      .create({
        schema: { fields: SPAN_TABLE_SCHEMA },
        timePartitioning: {
          type: 'DAY',
          field: 'start_time',
          ...(settings.partitionExpirationDays ? { expirationMs: String(settings.partitionExpirationDays * 86_400_000) } : {}),
        },
        clustering: { fields: SPAN_TABLE_CLUSTERING },
        description: 'LLM calls metered by Tollgate: one row per call (span), columns as in docs/span-stores.md',
      })
      .catch(ignoreAlreadyExists);
    logger.info({ table: name }, 'BigQuery span table created');
    return table;
  }
  const [metadata] = (await table.getMetadata()) as [{ schema?: { fields?: TableField[] }; timePartitioning?: { field?: string } }, unknown];
  const fields = (metadata.schema?.fields ?? []).map((f) => ({ ...f }));
  const present = new Set(fields.map((f) => f.name));
  const missing = SPAN_TABLE_SCHEMA.filter((f) => !present.has(f.name)).map((f) => ({ ...f, mode: 'NULLABLE' }));
  if (missing.length > 0) {
    // tables.patch with the whole schema plus the new NULLABLE columns: BigQuery's additive schema change.
    // Older rows read these columns as NULL, which recordToSpan turns into the column's default.
    await table.setMetadata({ schema: { fields: [...fields, ...missing] } });
    logger.info({ table: name, added: missing.map((f) => f.name) }, 'BigQuery span table schema upgraded');
  }
  const partitioning = metadata.timePartitioning;
  if (partitioning?.field !== 'start_time') {
    logger.warn({ table: name, timePartitioning: partitioning ?? null }, 'BigQuery span table is not partitioned by day on start_time; reports read the whole table');
  }
  return table;
}
