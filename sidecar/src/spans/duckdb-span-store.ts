// Spans in a DuckDB file (storage.kind: duckdb), through @duckdb/node-api: the same columns as SQLite, typed for
// analysis (start_time TIMESTAMPTZ, counts BIGINT, cost DOUBLE), so an analyst opens the file in the duckdb CLI
// and queries it. Every statement runs on libuv's thread pool (the client's calls are asynchronous native
// work), so neither a batch, a checkpoint nor a report holds the event loop. A batch goes over as one JSON
// parameter that DuckDB unpacks itself: one string on the main thread instead of a bind call per value.
//
// DuckDB lets one process open a file for writing: while the proxy runs, `tollgate spend` asks the proxy
// instead (spend-cli.ts). Schema evolution is additive, as in SQLite (ADR 0401): missing columns are added
// at open, with the default an old row reads back as.

import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type { Logger } from 'pino';
import { type ColumnType, recordToSpan, SPAN_COLUMNS, spanToRecord } from './span-columns.ts';
import type { SpanStore } from './span-store.ts';
import { SpanStoreOpenError } from './span-store.ts';
import { type SpendGroupTotal, spendReport } from './spend.ts';
import { type SpendSqlDialect, spendStatement } from './spend-sql.ts';

export interface DuckDbSpanStoreOptions {
  logger?: Logger;
  /** Keep about this many spans (trimmed back to it once 10 % more are stored); 0 keeps all. */
  maxSpans?: number;
  /** Refuse to create the file (a report reads spans; it never starts an empty file). */
  mustExist?: boolean;
}

const DUCKDB_TYPES: Record<ColumnType, string> = { string: 'VARCHAR', int: 'BIGINT', float: 'DOUBLE', bool: 'BOOLEAN', timestamp: 'TIMESTAMPTZ' };

function literal(value: string | number | boolean): string {
  return typeof value === 'string' ? `'${value.replaceAll("'", "''")}'` : String(value);
}

function columnDefinition(c: (typeof SPAN_COLUMNS)[number], added: boolean): string {
  // DuckDB adds a column with a default but without constraints, so a column added later stays nullable.
  const notNull = !c.nullable && !added ? ' NOT NULL' : '';
  const fallback = c.missing === undefined || c.missing === null ? '' : ` DEFAULT ${literal(c.missing)}`;
  return `${c.name} ${DUCKDB_TYPES[c.type]}${notNull}${fallback}`;
}

const NAMES = SPAN_COLUMNS.map((c) => c.name).join(', ');
// The batch arrives as a JSON array of records; from_json gives it the columns' types, unnest makes it rows.
const JSON_SHAPE = JSON.stringify([Object.fromEntries(SPAN_COLUMNS.map((c) => [c.name, DUCKDB_TYPES[c.type]]))]);
const INSERT_SQL = `INSERT INTO spans (${NAMES}) SELECT ${NAMES} FROM (SELECT unnest(from_json($batch::JSON, '${JSON_SHAPE}'), recursive := true))`;
// start_time as epoch milliseconds: turned into the ISO string every store returns.
const SELECT_RECENT = `SELECT ${SPAN_COLUMNS.map((c) => (c.name === 'start_time' ? 'epoch_ms(start_time) AS start_time' : c.name)).join(', ')} FROM spans ORDER BY spans.start_time DESC, rowid DESC LIMIT $limit`;

const DUCKDB_SPEND: SpendSqlDialect = {
  table: 'spans',
  // The instance runs in UTC, so the hour and the day are UTC's.
  bucket: (bucket) => `epoch_ms(date_trunc('${bucket}', start_time))`,
  param: (name) => `CAST($${name} AS TIMESTAMPTZ)`,
  integer: 'BIGINT',
};

/** The file is held by another process (a running proxy): only one may open it for writing. */
export function isDuckDbLockConflict(error: unknown): boolean {
  const cause = error instanceof SpanStoreOpenError ? error.cause : error;
  return /Could not set lock on file|Conflicting lock/i.test(String((cause as Error | undefined)?.message ?? cause));
}

/** Opens (creating or upgrading the table of) the DuckDB file at `path`. Errors name the file. */
export async function openDuckDbSpanStore(path: string, options: DuckDbSpanStoreOptions = {}): Promise<SpanStore> {
  const { logger } = options;
  const maxSpans = options.maxSpans ?? 0;
  let opened: DuckDBInstance | undefined;
  let writer: DuckDBConnection;
  let reader: DuckDBConnection;
  let rows: number;
  try {
    if (options.mustExist && !existsSync(path)) throw new Error('no such file (nothing has been recorded there yet)');
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const { DuckDBInstance } = await import('@duckdb/node-api').catch((error: unknown) => {
      if ((error as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
      throw new Error('the DuckDB client (@duckdb/node-api) is not installed here; the sidecar image leaves it out, use sqlite, bigquery or firestore');
    });
    opened = await DuckDBInstance.create(path);
    writer = await opened.connect();
    // Hours and days of the report are UTC's whatever the machine's zone (icu is built into the client).
    await writer.run("LOAD icu; SET GLOBAL TimeZone = 'UTC'");
    reader = await opened.connect();
    await migrate(writer, path, logger);
    rows = Number((await reader.runAndReadAll('SELECT count(*) AS n FROM spans')).getRowObjects()[0]?.n ?? 0);
  } catch (error) {
    opened?.closeSync();
    throw new SpanStoreOpenError(path, error);
  }
  const instance = opened;

  const trim = maxSpans > 0 ? Math.ceil(maxSpans * 1.1) : Infinity;
  return {
    async insertBatch(spans) {
      if (spans.length === 0) return;
      await writer.run(INSERT_SQL, { batch: JSON.stringify(spans.map(spanToRecord)) });
      rows += spans.length;
      if (rows > trim) {
        // rowid follows insertion order: everything below the newest maxSpans goes.
        await writer.run('DELETE FROM spans WHERE rowid < (SELECT rowid FROM spans ORDER BY rowid DESC LIMIT 1 OFFSET $keep)', { keep: maxSpans - 1 });
        rows = maxSpans;
      }
    },
    async recent(limit) {
      const result = await reader.runAndReadAll(SELECT_RECENT, { limit: Math.max(0, Math.trunc(limit)) });
      return result.getRowObjects().map((row) => recordToSpan({ ...row, start_time: new Date(Number(row.start_time)).toISOString() }));
    },
    async count() {
      return Number((await reader.runAndReadAll('SELECT count(*) AS n FROM spans')).getRowObjects()[0]?.n ?? 0);
    },
    async spend(query) {
      const statement = spendStatement(DUCKDB_SPEND, query);
      const params: Record<string, string> = { since: statement.params.since.toISOString() };
      if (statement.params.until) params.until = statement.params.until.toISOString();
      const result = await reader.runAndReadAll(statement.sql, params);
      return spendReport(
        query,
        result.getRowObjects().map((r): SpendGroupTotal => ({
          ...(r.bucket === undefined ? {} : { bucket: new Date(Number(r.bucket)).toISOString() }),
          key: (r.key ?? null) as string | null,
          costUnits: (r.cost_units ?? 0n) as bigint,
          calls: r.calls as bigint,
          totalTokens: (r.total_tokens ?? 0n) as bigint,
        })),
      );
    },
    close() {
      reader.closeSync();
      writer.closeSync();
      instance.closeSync();
    },
  };
}

async function migrate(connection: DuckDBConnection, path: string, logger: Logger | undefined): Promise<void> {
  await connection.run(`CREATE TABLE IF NOT EXISTS spans (${SPAN_COLUMNS.map((c) => columnDefinition(c, false)).join(', ')})`);
  const present = new Set(
    (await connection.runAndReadAll("SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = 'spans'"))
      .getRowObjects()
      .map((r) => String(r.column_name)),
  );
  const missing = SPAN_COLUMNS.filter((c) => !present.has(c.name));
  for (const column of missing) await connection.run(`ALTER TABLE spans ADD COLUMN ${columnDefinition(column, true)}`);
  if (missing.length > 0) logger?.info({ path, added: missing.map((c) => c.name) }, 'span store schema upgraded');
}
