// What the Redis counter store costs per round trip (ADR 1310): a ledger deduction (one batch of one user, and of
// 100 users), a rate-limit admission, the request path's reserveForCall with Redis windows (ADR 1311), and a PING
// beside them, sequential on one connection to a redis-server on
// loopback (Debian's package, started as the tests start it), with appendfsync always and everysec. Usage:
//   node bench/redis-ledger.ts [round trips=2000]

import { Redis } from 'ioredis';
import { RedisLedger } from '../sidecar/src/budgets/redis-ledger.ts';
import { RedisRateWindows } from '../sidecar/src/budgets/redis-rate-windows.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { parseBudgetPolicies } from '../contracts/budget-config.ts';
import { PolicySet } from '../contracts/budget-policies.ts';
import { unitsFromCostUsd } from '../contracts/money.ts';
import { BudgetBook } from '../sidecar/src/budgets/budget-book.ts';
import type { RateLimits } from '../sidecar/src/budgets/rate-windows.ts';
import { reserveForCall } from '../sidecar/src/pipeline/reservation.ts';
import type { MeteredCall } from '../sidecar/src/metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from '../sidecar/src/pricing/default-cache.ts';
import { PriceTable } from '../sidecar/src/pricing/price-table.ts';
import type { TokenUsage } from '../sidecar/src/usage/usage.ts';

const rounds = Number(process.argv[2] ?? 2_000);
const PERIOD = Date.UTC(2026, 10, 1);
const delta = (userId: string) => ({ userId, policy: 'p', periodStart: PERIOD, split: { amount: 12_345n, limitPart: 12_345n, grantParts: [] }, alerted: 0 });

async function measure(name: string, op: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 200; i++) await op(-1 - i); // warm-up: connection, script cache
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = process.hrtime.bigint();
    await op(i);
    times.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  times.sort((x, y) => x - y);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(0);
  console.log(`${name.padEnd(44)} p50 ${at(0.5).padStart(6)} µs   p99 ${at(0.99).padStart(6)} µs`);
}

const prices = new PriceTable([{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 0.15, output_per_million: 0.6 }], { ...DEFAULT_CACHE_SETTINGS });
const body = { bytes: Buffer.from('{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}'), size: 84 };
const usage: TokenUsage = { inputTokens: 21, outputTokens: 80, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 101 };
// A stand-in for the metered call: the bench measures the admission, not the span; its end comes at once.
const calls = Array.from(
  { length: 1000 },
  (_, u) =>
    ({ call: { userId: `user-${u}`, provider: 'openai', model: 'gpt-4o-mini' }, hold: (release: (used: TokenUsage | null) => void) => release(usage) }) as unknown as MeteredCall,
);

function redisBudgets(rateWindows: RedisRateWindows, rateLimits: RateLimits) {
  const book = new BudgetBook(new PolicySet(parseBudgetPolicies([{ name: 'p', users: ['*'], limitUsd: '1000000', rateLimits }], 'policies')));
  return {
    reserve: (userId: string, at: number, estimateUsd: () => number) => book.reserve(userId, at, () => unitsFromCostUsd(estimateUsd())),
    rateLevels: (userId: string) => book.policies.rateLevels(userId),
    rateWindows,
  };
}

for (const fsync of ['always', 'everysec'] as const) {
  const server = await startRedisServer({ fsync });
  console.log(`appendonly yes, appendfsync ${fsync}, ${rounds} sequential round trips`);
  const client = new Redis(server.url);
  const ledger = new RedisLedger({ url: server.url, keyPrefix: 'bench' });
  const windows = new RedisRateWindows({ url: server.url, keyPrefix: 'bench' });
  const limits = { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000, concurrent: 10_000 };
  const hundred = Array.from({ length: 100 }, (_, u) => delta(`user-${u}`));
  await measure('PING', () => client.ping());
  await measure('ledger deduct, 1 user', (i) => ledger.deduct({ id: `one-${fsync}-${i}`, deltas: [delta(`user-${i % 1000}`)] }));
  await measure('ledger deduct, 100 users', (i) => ledger.deduct({ id: `hundred-${fsync}-${i}`, deltas: hundred }));
  await measure('rate windows admit (3 dimensions)', (i) => windows.admit([{ key: `user-${i % 1000}`, limits }], 500, Date.now()));
  // The request path's whole admission (ADR 1311): budget hold, one admit round trip, and the call's end at once
  // (its settle goes out in the background, on the same connection, ahead of the next call's admit).
  const budgets = redisBudgets(new RedisRateWindows({ url: server.url, keyPrefix: 'bench-path' }), limits);
  await measure('reserveForCall() + its end, Redis windows', (i) => Promise.resolve(reserveForCall(budgets, calls[Math.abs(i) % 1000]!, prices, body, { now: Date.now() })));
  await budgets.rateWindows.close();
  client.disconnect();
  await Promise.all([ledger.close(), windows.close()]);
  await server.stop();
}
