// The spend report as one SQL statement, for the stores that speak SQL (SQLite, DuckDB, BigQuery). Only the
// table name, the bucket expression and the parameter sigil differ between them; the grouping, the exact
// integer cost sum and the order are the same text everywhere (and in docs/span-stores.md for BigQuery users).

import { SPEND_GROUPS, type SpendBucket, type SpendQuery } from './spend.ts';

export interface SpendSqlDialect {
  /** The spans table as the statement names it. */
  table: string;
  /** Start of the UTC hour or day of start_time; the store turns the value into ISO text. */
  bucket(bucket: SpendBucket): string;
  /** How a named parameter is written: `@since`, `$since`. */
  param(name: 'since' | 'until'): string;
  /** The integer type of the cost units: INTEGER, BIGINT, INT64. */
  integer: string;
}

export interface SpendStatement {
  sql: string;
  /** Values of the named parameters the statement uses. */
  params: { since: Date; until?: Date };
}

/** One row per group: `bucket` (when bucketed), `key`, `cost_units`, `calls`, `total_tokens`; limit + 1 rows at most. */
export function spendStatement(dialect: SpendSqlDialect, query: SpendQuery): SpendStatement {
  const column = SPEND_GROUPS[query.groupBy];
  const bucketed = query.bucket !== null;
  const select = [
    ...(bucketed ? [`${dialect.bucket(query.bucket as SpendBucket)} AS bucket`] : []),
    `${column} AS key`,
    // Costs carry at most 10 decimals: summing them as integers is exact and independent of row order.
    `SUM(CAST(ROUND(gen_ai_cost_usd * 10000000000) AS ${dialect.integer})) AS cost_units`,
    'COUNT(*) AS calls',
    'SUM(gen_ai_total_tokens) AS total_tokens',
  ];
  // An attempt's span is a child of its call's, with no cost: a call is counted once, by its own span.
  const where = [`start_time >= ${dialect.param('since')}`, ...(query.until ? [`start_time < ${dialect.param('until')}`] : []), 'attempt IS NULL'];
  const groupBy = bucketed ? 'bucket, key' : 'key';
  const orderBy = `${bucketed ? 'bucket ASC, ' : ''}cost_units DESC, calls DESC, key ASC NULLS LAST`;
  return {
    sql: `SELECT ${select.join(', ')} FROM ${dialect.table} WHERE ${where.join(' AND ')} GROUP BY ${groupBy} ORDER BY ${orderBy} LIMIT ${query.limit + 1}`,
    params: query.until ? { since: query.since, until: query.until } : { since: query.since },
  };
}
