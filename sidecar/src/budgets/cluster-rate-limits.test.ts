// Two sidecars given the chart's Redis store (budgets.store redis, ADR 1311): the policy the operator pushes
// limits each call through reserveForCall, and its rate windows are counted once for both pods on a real
// redis-server (their spend still goes to the operator, as cluster-budgets.test.ts shows).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../../../test/support/redis-server.ts';
import { CallMeter } from '../metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { reserveForCall } from '../pipeline/reservation.ts';
import { ClusterBudgets } from './cluster-budgets.ts';
import { RedisRateWindows } from './redis-rate-windows.ts';

const logger = pino({ level: 'silent' });
const prices = new PriceTable([{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 1 }], { ...DEFAULT_CACHE_SETTINGS });
const body = { bytes: '{"model":"gpt-4o-mini","max_tokens":10,"messages":[]}', size: 52 };
const policiesJson = JSON.stringify([
  {
    name: 'shop/two-a-minute',
    users: ['*'],
    limitUsd: '100',
    period: 'month',
    timeZone: 'UTC',
    alertThresholds: [],
    enforcement: 'block',
    grants: [],
    rateLimits: { requestsPerMinute: 2 },
  },
  {
    name: 'shop/one-at-once',
    users: ['lea'],
    limitUsd: '100',
    period: 'month',
    timeZone: 'UTC',
    alertThresholds: [],
    enforcement: 'block',
    grants: [],
    rateLimits: { concurrent: 1 },
  },
  {
    name: 'shop/eng',
    team: { name: 'eng', users: ['ann', 'ben'] },
    limitUsd: '100',
    period: 'month',
    timeZone: 'UTC',
    alertThresholds: [],
    enforcement: 'block',
    grants: [],
    rateLimits: { requestsPerMinute: 3 },
  },
]);

let redis: RedisServer;
let dir: string;
const pods: { budgets: ClusterBudgets; meter: CallMeter; writer: SpanWriter }[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  dir = mkdtempSync(join(tmpdir(), 'tollgate-cluster-rate-'));
  for (const pod of ['a', 'b']) {
    const budgets = new ClusterBudgets({
      stateDir: join(dir, pod),
      logger,
      reportIntervalMs: 60_000,
      rateWindows: new RedisRateWindows({ url: redis.url, keyPrefix: 'tollgate:budgets', commandTimeoutMs: 1_000 }),
    });
    budgets.budgetState({ replace: true, policiesJson, policiesChanged: true, usage: [], includesSequence: '0', defaultUser: 'system:serviceaccount:shop:app' });
    const writer = new SpanWriter(openMemorySpanStore(100), { bufferSize: 100, batchSize: 10, flushIntervalMs: 1000 }, logger);
    pods.push({ budgets, writer, meter: new CallMeter(writer, logger, { cutting: false }, budgets) });
  }
}, 120_000);

afterAll(async () => {
  for (const pod of pods) {
    await pod.budgets.close(0);
    await pod.writer.close();
  }
  rmSync(dir, { recursive: true, force: true });
  await redis?.stop();
});

function start(i: number, userId: string) {
  const { meter, budgets } = pods[i]!;
  const metered = meter.start({
    route: 'beta',
    provider: 'openai',
    model: 'gpt-4o-mini',
    operation: 'chat',
    userId,
    projectId: null,
    requestId: 'r',
    trace: startSpanContext(undefined, undefined),
  });
  const answer = reserveForCall(budgets, metered, prices, body, { now: Date.now() });
  // The Redis windows answer asynchronously: the request path awaits them.
  expect(answer).toBeInstanceOf(Promise);
  return {
    metered,
    answer: Promise.resolve(answer).then((refusal) => (refusal && 'admission' in refusal ? refusal.admission.refusedBy : null)),
    level: Promise.resolve(answer).then((refusal) => (refusal && 'admission' in refusal ? refusal.level : null)),
  };
}

/** One call of `userId` through pod `i`, ended at once when admitted: null, or the refusal's rate limit. */
async function call(i: number, userId: string): Promise<string | null> {
  const { metered, answer } = start(i, userId);
  const refusedBy = await answer;
  metered.finish({ prices, usage: null, status: refusedBy ? 'rejected' : 'ok', statusCode: refusedBy ? null : 200 });
  return refusedBy;
}

/** One call as `call`, answered with the level whose limit refused it, or null. */
async function levelOf(i: number, userId: string): Promise<string | null> {
  const { metered, level } = start(i, userId);
  const refusedAt = await level;
  metered.finish({ prices, usage: null, status: refusedAt ? 'rejected' : 'ok', statusCode: refusedAt ? null : 200 });
  return refusedAt;
}

describe('sidecars on the chart’s Redis store', () => {
  it('count a team’s 3 requests a minute once for both pods and both members (ADR 1313)', async () => {
    // ann and ben also have 2 a minute each of their own (the * policy). Three calls on either pod fill the team.
    expect(await levelOf(0, 'ann')).toBeNull();
    expect(await levelOf(1, 'ben')).toBeNull();
    expect(await levelOf(1, 'ann')).toBeNull();
    // Ben has one of his own left, but the team has none, on either pod.
    expect(await levelOf(0, 'ben')).toBe('team');
    expect(await levelOf(1, 'ben')).toBe('team');
    // Ann's own two are spent: her own limit, the inner level, is the one named.
    expect(await levelOf(0, 'ann')).toBe('user');
  });

  it('count a pushed policy’s requests per minute once for both pods', async () => {
    // Two a minute for alice: one call on each pod, and the third, on either, is refused.
    expect(await call(0, 'alice')).toBeNull();
    expect(await call(1, 'alice')).toBeNull();
    expect(await call(0, 'alice')).toBe('requests');
    expect(await call(1, 'alice')).toBe('requests');
    // Another user has a window of her own.
    expect(await call(1, 'bob')).toBeNull();
  });

  it('a caller who leaves while Redis answers gives the concurrent slot back once, and the next call holds it', async () => {
    const left = start(0, 'lea');
    // The caller leaves before the store has answered: the call ends first, its admission lands after.
    left.metered.finish({ prices, usage: null, status: 'client_aborted', statusCode: null });
    expect(await left.answer).toBeNull();
    // Settled on the way in (same connection, ahead of the next admission): one slot of one is free again.
    const held = start(0, 'lea');
    expect(await held.answer).toBeNull();
    expect(await call(1, 'lea')).toBe('concurrent');
    held.metered.finish({ prices, usage: null, status: 'ok', statusCode: 200 });
  });
});
