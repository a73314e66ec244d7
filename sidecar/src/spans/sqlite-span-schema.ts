// The spans table in SQLite: columns, migrations, and the row <-> Span mapping. The columns are the store-neutral
// ones of span-columns.ts, so the file can be queried with the same names as every other span store.
//
// Schema evolution is additive only: every column a version adds carries a default, so a newer binary
// opens a file written by an older one and adds the missing columns (old rows read back with the
// defaults), and an older binary can still write to a newer file (it names its columns explicitly).

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Span } from './span.ts';
import { type ColumnType, recordToSpan, SPAN_COLUMNS, SPAN_SCHEMA_VERSION, spanToRecord } from './span-columns.ts';
import { SpanStoreOpenError } from './span-store.ts';

/** Stored in PRAGMA user_version. */
export { SPAN_SCHEMA_VERSION };

interface Column {
  name: string;
  /** Type and constraint as written in CREATE TABLE / ALTER TABLE ADD COLUMN. */
  sql: string;
}

const SQLITE_TYPES: Record<ColumnType, string> = { string: 'TEXT', int: 'INTEGER', float: 'REAL', bool: 'INTEGER', timestamp: 'TEXT' };

function sqlLiteral(value: string | number | boolean): string {
  if (typeof value === 'string') return `'${value.replaceAll("'", "''")}'`;
  return typeof value === 'boolean' ? (value ? '1' : '0') : String(value);
}

// From the store-neutral column list (span-columns.ts). ALTER TABLE ADD COLUMN fills old rows with the default,
// which is why every NOT NULL column added after version 1 has one. start_time is ISO 8601 UTC text, which
// sorts and compares in time order.
const COLUMNS: readonly Column[] = SPAN_COLUMNS.map((c) => ({
  name: c.name,
  sql: `${SQLITE_TYPES[c.type]}${c.nullable ? '' : ' NOT NULL'}${c.missing === undefined || c.missing === null ? '' : ` DEFAULT ${sqlLiteral(c.missing)}`}`,
}));

const INDEXES: readonly string[] = [
  'CREATE INDEX IF NOT EXISTS spans_start_time ON spans (start_time)',
  'CREATE INDEX IF NOT EXISTS spans_user_start_time ON spans (user_id, start_time)',
  'CREATE INDEX IF NOT EXISTS spans_trace_id ON spans (trace_id)',
];

export interface SpanRow {
  span_id: string;
  trace_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: string;
  duration_ms: number;
  status: string;
  status_code: number | null;
  error: string | null;
  user_id: string | null;
  project_id: string | null;
  request_id: string | null;
  route: string;
  gen_ai_operation_name: string;
  gen_ai_provider_name: string;
  gen_ai_request_model: string;
  gen_ai_response_model: string | null;
  gen_ai_usage_input_tokens: number;
  gen_ai_usage_output_tokens: number;
  gen_ai_total_tokens: number;
  gen_ai_usage_cache_read_input_tokens: number;
  gen_ai_usage_cache_creation_input_tokens: number;
  gen_ai_usage_reasoning_tokens: number;
  gen_ai_cost_usd: number;
  priced: number;
  usage_estimated: number;
  unmetered: number;
  gen_ai_usage_images: number;
  gen_ai_usage_audio_seconds: number;
  gen_ai_usage_characters: number;
  process_attribution: string | null;
  process_pid: number | null;
  process_executable_path: string | null;
  process_command_args: string | null;
  process_parent_executables: string | null;
  container_name: string | null;
  tool_calls: string | null;
  process_exec_id: string | null;
}

/**
 * Opens the file with the pragmas every connection needs; with `migrate`, creates or upgrades the schema.
 * Errors name the file.
 */
export function openSpanDatabase(path: string, migrate: boolean, logger?: Logger): Database.Database {
  let db: Database.Database | undefined;
  try {
    if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true });
    db = new Database(path);
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode stays consistent after a crash; only the last commits before a power loss can go.
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 1000');
    if (migrate) migrateSchema(db, path, logger);
    return db;
  } catch (err) {
    db?.close();
    throw new SpanStoreOpenError(path, err);
  }
}

export const COLUMN_NAMES: readonly string[] = COLUMNS.map((c) => c.name);

/** Positional insert: takes the values of spanToValues(). */
export const INSERT_SQL = `INSERT INTO spans (${COLUMN_NAMES.join(', ')}) VALUES (${COLUMN_NAMES.map(() => '?').join(', ')})`;

/** Inserts rows of spanToValues() in one transaction (all or none). */
/**
 * Keeps the newest `maxSpans` rows: rowids grow with every insert, so everything more than maxSpans below the
 * highest is older. A range delete on the rowid index, cheap when there is nothing to delete.
 */
export const PRUNE_SQL = 'DELETE FROM spans WHERE rowid <= (SELECT max(rowid) FROM spans) - ?';

export function prepareBatchInsert(db: Database.Database, maxSpans = 0): (rows: readonly unknown[][]) => void {
  const insert = db.prepare(INSERT_SQL);
  const prune = maxSpans > 0 ? db.prepare(PRUNE_SQL) : null;
  return db.transaction((rows: readonly unknown[][]) => {
    for (const row of rows) insert.run(row);
    prune?.run(maxSpans);
  });
}

/** The span's column values in COLUMN_NAMES order. */
export function spanToValues(span: Span): unknown[] {
  const row = spanToRow(span) as unknown as Record<string, unknown>;
  return COLUMN_NAMES.map((name) => row[name]);
}

function migrateSchema(db: Database.Database, path: string, logger: Logger | undefined): void {
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SPAN_SCHEMA_VERSION) {
      logger?.warn(
        { path, fileVersion: version, codeVersion: SPAN_SCHEMA_VERSION },
        'span store was written by a newer version; continuing, its extra columns keep their defaults',
      );
    }
    db.exec(`CREATE TABLE IF NOT EXISTS spans (${COLUMNS.map((c) => `${c.name} ${c.sql}`).join(', ')})`);
    // Driven by the columns actually present rather than by the version number, so a file whose version
    // is wrong or that an interrupted upgrade left half-done still ends up complete.
    const present = new Set((db.pragma('table_info(spans)') as { name: string }[]).map((c) => c.name));
    for (const column of COLUMNS) {
      if (!present.has(column.name)) db.exec(`ALTER TABLE spans ADD COLUMN ${column.name} ${column.sql}`);
    }
    for (const index of INDEXES) db.exec(index);
    if (version < SPAN_SCHEMA_VERSION) {
      db.pragma(`user_version = ${SPAN_SCHEMA_VERSION}`);
      if (version > 0) logger?.info({ path, from: version, to: SPAN_SCHEMA_VERSION }, 'span store schema upgraded');
    }
  }).immediate();
}

export function spanToRow(s: Span): SpanRow {
  const record = spanToRecord(s);
  return { ...record, priced: record.priced ? 1 : 0, usage_estimated: record.usage_estimated ? 1 : 0, unmetered: record.unmetered ? 1 : 0 };
}

export function rowToSpan(r: SpanRow): Span {
  return recordToSpan(r as unknown as Record<string, unknown>);
}
