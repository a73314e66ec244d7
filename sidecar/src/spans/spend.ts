// The spend report: cost, calls and tokens per user (or model, project, provider) over a time window,
// optionally per hour or day. Each store computes the groups itself (SQL on SQLite, DuckDB and BigQuery; a
// projected query on Firestore); this module owns what they share: the query, how costs are summed exactly,
// and the order of the rows, so every store answers the same question with the same rows.
//
// Costs are stored as USD doubles rounded to 10^-10 (ADR 0203). Summing doubles depends on the order of the
// additions, so every store sums round(cost × 10^10) as integers instead and the total is divided once at
// the end: the same calls give the same total, to the last digit, on every store (ADR 0403).

/** `groupBy` value → the column it groups on. */
export const SPEND_GROUPS = {
  user: 'user_id',
  model: 'gen_ai_request_model',
  project: 'project_id',
  provider: 'gen_ai_provider_name',
} as const;
export type SpendGroup = keyof typeof SPEND_GROUPS;
export const SPEND_GROUP_NAMES = Object.keys(SPEND_GROUPS) as SpendGroup[];

export const SPEND_BUCKETS = ['hour', 'day'] as const;
export type SpendBucket = (typeof SPEND_BUCKETS)[number];

/** Integer cost units per USD: costs are rounded to 10^-10 USD when a call is priced. */
export const COST_UNITS_PER_USD = 10_000_000_000;

export const DEFAULT_SPEND_SINCE = '7d';
export const DEFAULT_SPEND_LIMIT = 1000;
export const MAX_SPEND_LIMIT = 10_000;

export interface SpendQuery {
  /** Spans that started at or after this instant… */
  since: Date;
  /** …and before this one (null: up to now, spans still being written included). */
  until: Date | null;
  groupBy: SpendGroup;
  /** Rows per UTC hour or day as well as per key; null: one row per key over the whole window. */
  bucket: SpendBucket | null;
  /** Most rows returned; the store is asked for one more to tell whether the report was cut. */
  limit: number;
}

export interface SpendRow {
  /** Start of the bucket, ISO 8601 UTC; only when the query has a bucket. */
  bucket?: string;
  /** The user, model, project or provider; null for spans without one (no user header, no project). */
  key: string | null;
  cost_usd: number;
  calls: number;
  total_tokens: number;
}

export interface SpendReport {
  since: string;
  until: string | null;
  groupBy: SpendGroup;
  bucket: SpendBucket | null;
  rows: SpendRow[];
  /** True when more rows matched than `limit`. */
  truncated: boolean;
}

/** One group as a store computed it; the cost in integer units (COST_UNITS_PER_USD). */
export interface SpendGroupTotal {
  bucket?: string;
  key: string | null;
  costUnits: bigint | number;
  calls: bigint | number;
  totalTokens: bigint | number;
}

/** A bad report parameter; the message names it. */
export class SpendQueryError extends Error {
  readonly parameter: string;
  constructor(parameter: string, problem: string) {
    super(`${parameter} ${problem}`);
    this.name = 'SpendQueryError';
    this.parameter = parameter;
  }
}

const DURATION = /^(\d{1,6})(m|h|d|w)$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 } as const;
// A date alone (midnight UTC), or a date and time with an optional offset.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
const MAX_WINDOW_MS = 3660 * 86_400_000;

/** `7d`, `24h`, `30m`, `2w` (that long before `now`) or an ISO 8601 date or time. */
export function parseSpendTime(parameter: string, raw: string, now: Date): Date {
  const duration = DURATION.exec(raw);
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS];
    if (ms === 0 || ms > MAX_WINDOW_MS) throw new SpendQueryError(parameter, `must be a duration from 1m to 3660d (got ${JSON.stringify(raw)})`);
    return new Date(now.getTime() - ms);
  }
  if (ISO_TIME.test(raw)) {
    // A time without an offset is UTC, like every time Tollgate writes.
    const withZone = /T\d{2}:\d{2}/.test(raw) && !/(Z|[+-]\d{2}:\d{2})$/.test(raw) ? `${raw}Z` : raw;
    const time = new Date(withZone);
    if (!Number.isNaN(time.getTime())) return time;
  }
  throw new SpendQueryError(parameter, `must be a duration like 7d, 24h or 30m, or an ISO 8601 time like 2026-01-31T00:00:00Z (got ${JSON.stringify(raw)})`);
}

export interface SpendParameters {
  since?: string | undefined;
  until?: string | undefined;
  groupBy?: string | undefined;
  bucket?: string | undefined;
  limit?: string | undefined;
}

export const SPEND_PARAMETERS = ['since', 'until', 'groupBy', 'bucket', 'limit'] as const;

/** Checks the parameters of a report (HTTP query or CLI flags); throws SpendQueryError naming the bad one. */
export function parseSpendQuery(params: SpendParameters, now: Date = new Date()): SpendQuery {
  const since = parseSpendTime('since', params.since ?? DEFAULT_SPEND_SINCE, now);
  const until = params.until === undefined ? null : parseSpendTime('until', params.until, now);
  if (until !== null && until.getTime() <= since.getTime()) {
    throw new SpendQueryError('until', `must be later than since (${since.toISOString()}; got ${JSON.stringify(params.until)})`);
  }
  const groupBy = params.groupBy ?? 'user';
  if (!(SPEND_GROUP_NAMES as string[]).includes(groupBy)) {
    throw new SpendQueryError('groupBy', `must be one of ${SPEND_GROUP_NAMES.join(', ')} (got ${JSON.stringify(groupBy)})`);
  }
  const bucket = params.bucket ?? null;
  if (bucket !== null && !(SPEND_BUCKETS as readonly string[]).includes(bucket)) {
    throw new SpendQueryError('bucket', `must be one of ${SPEND_BUCKETS.join(', ')} (got ${JSON.stringify(bucket)})`);
  }
  let limit = DEFAULT_SPEND_LIMIT;
  if (params.limit !== undefined) {
    if (!/^\d{1,6}$/.test(params.limit) || Number(params.limit) < 1 || Number(params.limit) > MAX_SPEND_LIMIT) {
      throw new SpendQueryError('limit', `must be an integer from 1 to ${MAX_SPEND_LIMIT} (got ${JSON.stringify(params.limit)})`);
    }
    limit = Number(params.limit);
  }
  return { since, until, groupBy: groupBy as SpendGroup, bucket: bucket as SpendBucket | null, limit };
}

/** round(cost × 10^10) of one stored cost: exact, since a cost has at most 10 decimals and is far below 2^53 units. */
export function costUnits(costUsd: number): number {
  return Math.round(costUsd * COST_UNITS_PER_USD);
}

/** Start of the UTC hour or day of an instant, ISO 8601. */
export function bucketStart(time: Date, bucket: SpendBucket): string {
  const iso = time.toISOString();
  return bucket === 'hour' ? `${iso.slice(0, 13)}:00:00.000Z` : `${iso.slice(0, 10)}T00:00:00.000Z`;
}

function compareKeys(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1; // no key last
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

/**
 * Report order: by bucket (oldest first) when bucketed, then by cost (highest first), calls (most first) and
 * key (null last). Stores sort the same way in their queries so that `limit` cuts at the same row; the rows are
 * sorted again here so that every store's tie-breaks agree to the character.
 */
export function compareSpendRows(a: SpendRow, b: SpendRow): number {
  if (a.bucket !== undefined && b.bucket !== undefined && a.bucket !== b.bucket) return a.bucket < b.bucket ? -1 : 1;
  if (a.cost_usd !== b.cost_usd) return b.cost_usd - a.cost_usd;
  if (a.calls !== b.calls) return b.calls - a.calls;
  return compareKeys(a.key, b.key);
}

/** The store's groups as report rows: costs from integer units, in report order, cut to the limit. */
export function spendReport(query: SpendQuery, groups: readonly SpendGroupTotal[]): SpendReport {
  const rows = groups.map((g): SpendRow => {
    const row: SpendRow = {
      key: g.key,
      // One division of an exact integer: the double nearest to the exact decimal total.
      cost_usd: Number(g.costUnits) / COST_UNITS_PER_USD,
      calls: Number(g.calls),
      total_tokens: Number(g.totalTokens),
    };
    return g.bucket === undefined ? row : { bucket: g.bucket, ...row };
  });
  rows.sort(compareSpendRows);
  return {
    since: query.since.toISOString(),
    until: query.until?.toISOString() ?? null,
    groupBy: query.groupBy,
    bucket: query.bucket,
    rows: rows.slice(0, query.limit),
    truncated: rows.length > query.limit,
  };
}

/**
 * Groups records in memory, for stores that cannot group themselves (the memory store; Firestore, whose
 * aggregation queries have no GROUP BY). Integer arithmetic throughout, like the SQL stores.
 */
export class SpendAccumulator {
  readonly #query: SpendQuery;
  readonly #groups = new Map<string, { bucket?: string; key: string | null; costUnits: bigint; calls: number; totalTokens: number }>();

  constructor(query: SpendQuery) {
    this.#query = query;
  }

  /** Adds one span; `start` is its start time, `key` the value of the grouped column. */
  add(start: Date, key: string | null, costUsd: number, totalTokens: number): void {
    const bucket = this.#query.bucket === null ? undefined : bucketStart(start, this.#query.bucket);
    const id = `${bucket ?? ''}\u0000${key === null ? '\u0001' : `=${key}`}`;
    let group = this.#groups.get(id);
    if (group === undefined) {
      group = { key, costUnits: 0n, calls: 0, totalTokens: 0, ...(bucket === undefined ? {} : { bucket }) };
      this.#groups.set(id, group);
    }
    group.costUnits += BigInt(costUnits(costUsd));
    group.calls += 1;
    group.totalTokens += totalTokens;
  }

  /** True when a span that started at `start` is inside the window. */
  inWindow(start: Date): boolean {
    const t = start.getTime();
    return t >= this.#query.since.getTime() && (this.#query.until === null || t < this.#query.until.getTime());
  }

  report(): SpendReport {
    return spendReport(this.#query, [...this.#groups.values()]);
  }
}
