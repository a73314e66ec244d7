// One table of recorded calls for the spend tests of every store, and the report they must give, worked out
// here with exact decimal arithmetic rather than by any store. Costs are chosen so that adding them as
// doubles goes wrong (0.1 + 0.2, a thousand 10^-10 USD calls next to a large one): a store that summed
// doubles instead of integer units would miss the exact total.

import type { Provider, RouteName } from '../../contracts/routes.ts';
import { sampleSpan } from './sample-span.ts';
import type { Span } from '../../sidecar/src/spans/span.ts';
import { bucketStart, COST_UNITS_PER_USD, SPEND_GROUPS, type SpendQuery, type SpendRow } from '../../sidecar/src/spans/spend.ts';

interface Call {
  user: string | null;
  model: string;
  provider: Provider;
  route: RouteName;
  project: string | null;
  /** USD with at most 10 decimals, as the meter rounds it. */
  cost: string;
  tokens: number;
  start: string;
}

const BASE: Omit<Call, 'user' | 'cost' | 'tokens' | 'start'>[] = [
  { model: 'gpt-4o-mini', provider: 'openai', route: 'beta', project: 'shop' },
  { model: 'claude-sonnet-4-5', provider: 'anthropic', route: 'gamma-direct', project: 'shop' },
  { model: 'gemini-2.5-flash', provider: 'google', route: 'alpha', project: 'search' },
  { model: 'claude-haiku-4-5', provider: 'anthropic', route: 'gamma', project: null },
];

function calls(): Call[] {
  const out: Call[] = [];
  const at = (day: number, hour: number, minute: number) => new Date(Date.UTC(2026, 2, day, hour, minute, 7, 123)).toISOString();
  // 0.1 + 0.2 + 0.3 as doubles is 0.6000000000000001
  ['0.1', '0.2', '0.3'].forEach((cost, i) => out.push({ ...BASE[0]!, user: 'alice', cost, tokens: 1000 + i, start: at(10, 9, i) }));
  // many tiny costs beside one large one: a double sum loses the tiny ones' last digits
  for (let i = 0; i < 120; i++) out.push({ ...BASE[1]!, user: 'bob', cost: '0.0000000001', tokens: 3, start: at(10, 10 + (i % 3), i % 60) });
  out.push({ ...BASE[1]!, user: 'bob', cost: '1234.5678901234', tokens: 900_000, start: at(11, 14, 5) });
  out.push({ ...BASE[2]!, user: 'carol', cost: '0.0000085500', tokens: 30, start: at(11, 0, 0) });
  out.push({ ...BASE[2]!, user: 'carol', cost: '0.0003450000', tokens: 1500, start: at(11, 23, 59) });
  // no user header, no project: grouped under null
  out.push({ ...BASE[3]!, user: null, cost: '0.0123456789', tokens: 4321, start: at(12, 6, 30) });
  out.push({ ...BASE[3]!, user: null, cost: '0', tokens: 0, start: at(12, 6, 31) });
  // ties on cost: broken by calls, then by key
  out.push({ ...BASE[0]!, user: 'dave', cost: '0.5', tokens: 10, start: at(12, 8, 0) });
  out.push({ ...BASE[0]!, user: 'erin', cost: '0.25', tokens: 10, start: at(12, 8, 1) });
  out.push({ ...BASE[0]!, user: 'erin', cost: '0.25', tokens: 10, start: at(12, 8, 2) });
  out.push({ ...BASE[0]!, user: 'frank', cost: '0.5', tokens: 10, start: at(12, 8, 3) });
  // outside the window of the tests (before SAMPLE_SINCE, at or after SAMPLE_UNTIL)
  out.push({ ...BASE[0]!, user: 'alice', cost: '99', tokens: 99, start: at(9, 23, 59) });
  out.push({ ...BASE[0]!, user: 'alice', cost: '77', tokens: 77, start: new Date(Date.UTC(2026, 2, 13)).toISOString() });
  return out;
}

export const SAMPLE_CALLS: readonly Call[] = calls();
export const SAMPLE_SINCE = new Date(Date.UTC(2026, 2, 10));
export const SAMPLE_UNTIL = new Date(Date.UTC(2026, 2, 13));

/** The calls as the spans the proxy would have recorded. */
export function sampleCallSpans(): Span[] {
  return SAMPLE_CALLS.map((c, i) =>
    sampleSpan({
      requestId: `call-${i}`,
      userId: c.user,
      projectId: c.project,
      model: c.model,
      name: `chat ${c.model}`,
      responseModel: c.model,
      provider: c.provider,
      route: c.route,
      costUsd: Number(c.cost),
      totalTokens: c.tokens,
      inputTokens: c.tokens,
      outputTokens: 0,
      startTime: c.start,
    }),
  );
}

function units(cost: string): bigint {
  const [whole, fraction = ''] = cost.split('.');
  return BigInt(whole!) * BigInt(COST_UNITS_PER_USD) + BigInt(fraction.padEnd(10, '0'));
}

function decimal(u: bigint): string {
  const digits = u.toString().padStart(11, '0');
  return `${digits.slice(0, -10)}.${digits.slice(-10)}`;
}

/** The report a correct store gives for these calls, worked out with BigInt decimals and sorted by the report's rules. */
export function expectedSampleReport(query: SpendQuery): SpendRow[] {
  const groups = new Map<string, { bucket?: string; key: string | null; units: bigint; calls: number; tokens: number }>();
  const keyOf: Record<keyof typeof SPEND_GROUPS, (c: Call) => string | null> = {
    user: (c) => c.user,
    model: (c) => c.model,
    project: (c) => c.project,
    provider: (c) => c.provider,
  };
  for (const c of SAMPLE_CALLS) {
    const t = new Date(c.start).getTime();
    if (t < query.since.getTime() || (query.until !== null && t >= query.until.getTime())) continue;
    const key = keyOf[query.groupBy](c);
    const bucket = query.bucket === null ? undefined : bucketStart(new Date(c.start), query.bucket);
    const id = JSON.stringify([bucket ?? null, key]);
    const g = groups.get(id) ?? { key, units: 0n, calls: 0, tokens: 0, ...(bucket === undefined ? {} : { bucket }) };
    g.units += units(c.cost);
    g.calls += 1;
    g.tokens += c.tokens;
    groups.set(id, g);
  }
  const rows = [...groups.values()].map((g) => {
    const row: SpendRow = { key: g.key, cost_usd: Number(decimal(g.units)), calls: g.calls, total_tokens: g.tokens };
    return g.bucket === undefined ? row : { bucket: g.bucket, ...row };
  });
  return rows.sort((a, b) => {
    if (a.bucket !== undefined && b.bucket !== undefined && a.bucket !== b.bucket) return a.bucket < b.bucket ? -1 : 1;
    if (a.cost_usd !== b.cost_usd) return b.cost_usd - a.cost_usd;
    if (a.calls !== b.calls) return b.calls - a.calls;
    if (a.key === b.key) return 0;
    if (a.key === null) return 1;
    if (b.key === null) return -1;
    return a.key < b.key ? -1 : 1;
  });
}

/** The queries every store is checked with: each grouping, the whole window and per hour and day. */
export function sampleQueries(): SpendQuery[] {
  const out: SpendQuery[] = [];
  for (const groupBy of Object.keys(SPEND_GROUPS) as (keyof typeof SPEND_GROUPS)[]) {
    for (const bucket of [null, 'hour', 'day'] as const) out.push({ since: SAMPLE_SINCE, until: SAMPLE_UNTIL, groupBy, bucket, limit: 1000 });
  }
  // open-ended window (until now): the late call is in, the early one still out
  out.push({ since: SAMPLE_SINCE, until: null, groupBy: 'user', bucket: null, limit: 1000 });
  return out;
}
