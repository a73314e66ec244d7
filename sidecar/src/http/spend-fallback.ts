// GET /_local/api/spend, the minimum the management UI's Spend view needs, until the span stores' spend
// report (computed by each store, in SQL where it can) lands: the same parameters and answer shape, computed
// here from the newest spans the store returns. It steps aside when a spend route is already registered, so
// the stores' report wins as soon as both are in the engine. Delete this file when that report has landed.
//
// ?since=7d|24h|30m|<ISO time>&groupBy=user|model|project|provider&bucket=hour|day
// -> {since, until: null, groupBy, bucket, rows: [{bucket?, key, cost_usd, calls, total_tokens}], truncated, pending}

import type { FastifyPluginAsync } from 'fastify';
import type { Span } from '../spans/span.ts';
import type { SpanStore } from '../spans/span-store.ts';
import type { SpanWriter } from '../spans/span-writer.ts';

const GROUPS = { user: (span: Span) => span.userId, model: (span: Span) => span.model, project: (span: Span) => span.projectId, provider: (span: Span) => span.provider };
type Group = keyof typeof GROUPS;
const BUCKETS = ['hour', 'day'] as const;
type Bucket = (typeof BUCKETS)[number];
/** Spans read for one report: a laptop's week of calls; more and the report says it was cut. */
const MAX_SPANS = 50_000;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 } as const;
/** Costs have at most 10 decimals (ADR 0203): summed as integers, so the total does not depend on order. */
const COST_UNITS = 10_000_000_000;

class SpendParameterError extends Error {}

function parseSince(raw: string, now: number): number {
  const duration = /^(\d{1,6})([mhdw])$/.exec(raw);
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS];
    if (ms > 0 && ms <= 3660 * 86_400_000) return now - ms;
  } else if (/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/.test(raw) && !Number.isNaN(Date.parse(raw))) {
    return Date.parse(raw);
  }
  throw new SpendParameterError(`since must be a duration like 7d, 24h or 30m, or an ISO 8601 time (got ${JSON.stringify(raw)})`);
}

function bucketOf(startTime: string, bucket: Bucket): string {
  return bucket === 'hour' ? `${startTime.slice(0, 13)}:00:00.000Z` : `${startTime.slice(0, 10)}T00:00:00.000Z`;
}

export const spendFallbackRoutes: FastifyPluginAsync<{ spans: SpanStore; writer: SpanWriter }> = async (app, opts) => {
  if (app.hasRoute({ method: 'GET', url: '/_local/api/spend' })) return;

  app.get<{ Querystring: Record<string, string | undefined> }>('/_local/api/spend', async (request, reply) => {
    const query = request.query;
    const now = Date.now();
    let since: number;
    let groupBy: Group;
    let bucket: Bucket | null;
    try {
      const unknown = Object.keys(query).find((key) => !['since', 'groupBy', 'bucket'].includes(key));
      if (unknown !== undefined) throw new SpendParameterError(`${unknown} is not a known parameter (expected since, groupBy, bucket)`);
      since = parseSince(query.since ?? '7d', now);
      const group = query.groupBy ?? 'user';
      if (!Object.hasOwn(GROUPS, group)) throw new SpendParameterError(`groupBy must be one of ${Object.keys(GROUPS).join(', ')} (got ${JSON.stringify(group)})`);
      groupBy = group as Group;
      bucket = (query.bucket ?? null) as Bucket | null;
      if (bucket !== null && !BUCKETS.includes(bucket)) throw new SpendParameterError(`bucket must be one of ${BUCKETS.join(', ')} (got ${JSON.stringify(bucket)})`);
    } catch (error) {
      if (error instanceof SpendParameterError) return reply.code(400).send({ error: { code: 'invalid_request', message: error.message } });
      throw error;
    }
    await Promise.race([opts.writer.flush(), new Promise((resolve) => setTimeout(resolve, 500).unref())]);
    let spans: Span[];
    try {
      spans = opts.spans.recent(MAX_SPANS);
    } catch (error) {
      return reply.code(503).send({ error: { code: 'span_store_unavailable', message: `cannot read spans: ${(error as Error).message}` } });
    }
    const groups = new Map<string, { bucket?: string; key: string | null; units: number; calls: number; tokens: number }>();
    let reachedWindowStart = false;
    for (const span of spans) {
      if (Date.parse(span.startTime) < since) {
        reachedWindowStart = true;
        continue;
      }
      const key = GROUPS[groupBy](span);
      const spanBucket = bucket === null ? undefined : bucketOf(span.startTime, bucket);
      const id = `${spanBucket ?? ''}\u0000${key ?? '\u0001'}`;
      let row = groups.get(id);
      if (!row) {
        row = { ...(spanBucket === undefined ? {} : { bucket: spanBucket }), key, units: 0, calls: 0, tokens: 0 };
        groups.set(id, row);
      }
      row.units += Math.round(span.costUsd * COST_UNITS);
      row.calls += 1;
      row.tokens += span.totalTokens;
    }
    const rows = [...groups.values()]
      .sort((a, b) => (a.bucket ?? '').localeCompare(b.bucket ?? '') || b.units - a.units || b.calls - a.calls || String(a.key).localeCompare(String(b.key)))
      .map(({ units, tokens, ...row }) => ({ ...row, cost_usd: units / COST_UNITS, total_tokens: tokens }));
    return {
      since: new Date(since).toISOString(),
      until: null,
      groupBy,
      bucket,
      rows,
      truncated: spans.length === MAX_SPANS && !reachedWindowStart,
      pending: opts.writer.stats().buffered,
    };
  });
};
