import Fastify from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { sampleSpan } from '../spans/sample-span.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { spendFallbackRoutes } from './spend-fallback.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function app() {
  const spans = openMemorySpanStore(1000);
  const writer = new SpanWriter(spans, { bufferSize: 1000, batchSize: 100, flushIntervalMs: 10 }, pino({ level: 'silent' }));
  const server = Fastify();
  await server.register(spendFallbackRoutes, { spans, writer });
  closers.push(async () => {
    await server.close();
    await writer.close();
  });
  return { server, writer };
}

describe('GET /_local/api/spend (until the span stores’ report lands)', () => {
  it('sums cost exactly, calls and tokens per key over the window, per bucket when asked', async () => {
    const { server, writer } = await app();
    // Two costs whose float sum is not exact: 0.1 + 0.2 is 0.30000000000000004 in doubles.
    writer.record(sampleSpan({ userId: 'alice', costUsd: 0.1, totalTokens: 10, startTime: '2026-11-20T10:10:00.000Z' }));
    writer.record(sampleSpan({ userId: 'alice', costUsd: 0.2, totalTokens: 20, startTime: '2026-11-20T10:55:00.000Z' }));
    writer.record(sampleSpan({ userId: 'bob', model: 'llama3.2', provider: 'local', costUsd: 0, totalTokens: 35, startTime: '2026-11-20T11:05:00.000Z' }));
    writer.record(sampleSpan({ userId: null, costUsd: 0.0000075, totalTokens: 1, startTime: '2026-11-20T11:30:00.000Z' }));
    writer.record(sampleSpan({ userId: 'carol', costUsd: 5, totalTokens: 1, startTime: '2026-11-19T23:59:59.000Z' })); // before the window

    const byUser = (await server.inject({ url: '/_local/api/spend?since=2026-11-20' })).json();
    expect(byUser).toMatchObject({ since: '2026-11-20T00:00:00.000Z', groupBy: 'user', bucket: null, until: null, truncated: false, pending: 0 });
    expect(byUser.rows).toEqual([
      { key: 'alice', cost_usd: 0.3, calls: 2, total_tokens: 30 },
      { key: null, cost_usd: 0.0000075, calls: 1, total_tokens: 1 },
      { key: 'bob', cost_usd: 0, calls: 1, total_tokens: 35 },
    ]);

    const byProvider = (await server.inject({ url: '/_local/api/spend?since=2026-11-20&groupBy=provider&bucket=hour' })).json();
    expect(byProvider.rows).toEqual([
      { bucket: '2026-11-20T10:00:00.000Z', key: 'openai', cost_usd: 0.3, calls: 2, total_tokens: 30 },
      { bucket: '2026-11-20T11:00:00.000Z', key: 'openai', cost_usd: 0.0000075, calls: 1, total_tokens: 1 },
      { bucket: '2026-11-20T11:00:00.000Z', key: 'local', cost_usd: 0, calls: 1, total_tokens: 35 },
    ]);
    const byDay = (await server.inject({ url: '/_local/api/spend?since=2026-11-19&groupBy=model&bucket=day' })).json();
    expect(byDay.rows.map((row: { bucket: string; key: string; calls: number }) => [row.bucket, row.key, row.calls])).toEqual([
      ['2026-11-19T00:00:00.000Z', 'gpt-4o-mini', 1],
      ['2026-11-20T00:00:00.000Z', 'gpt-4o-mini', 3],
      ['2026-11-20T00:00:00.000Z', 'llama3.2', 1],
    ]);
  });

  it('names a bad parameter in a 400', async () => {
    const { server } = await app();
    for (const [query, message] of [
      ['groupBy=team', 'groupBy must be one of user, model, project, provider (got "team")'],
      ['bucket=week', 'bucket must be one of hour, day (got "week")'],
      ['since=yesterday', 'since must be a duration like 7d, 24h or 30m, or an ISO 8601 time (got "yesterday")'],
      ['group_by=user', 'group_by is not a known parameter (expected since, groupBy, bucket)'],
    ]) {
      const res = await server.inject({ url: `/_local/api/spend?${query}` });
      expect(res.statusCode, query).toBe(400);
      expect(res.json()).toEqual({ error: { code: 'invalid_request', message } });
    }
  });

  it('steps aside when a spend report is already registered', async () => {
    const server = Fastify();
    server.get('/_local/api/spend', async () => ({ from: 'the span stores' }));
    await server.register(spendFallbackRoutes, { spans: openMemorySpanStore(10), writer: undefined as never });
    expect((await server.inject({ url: '/_local/api/spend' })).json()).toEqual({ from: 'the span stores' });
    await server.close();
  });
});
