// What the Redis counter store costs per round trip (ADR 1310): a ledger deduction (one batch of one user, and of
// 100 users), a rate-limit admission, and a PING beside them, sequential on one connection to a redis-server on
// loopback (Debian's package, started as the tests start it), with appendfsync always and everysec. Usage:
//   node bench/redis-ledger.ts [round trips=2000]

import { Redis } from 'ioredis';
import { RedisLedger } from '../sidecar/src/budgets/redis-ledger.ts';
import { RedisRateWindows } from '../sidecar/src/budgets/redis-rate-windows.ts';
import { startRedisServer } from '../test/support/redis-server.ts';

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
  await measure('rate windows admit (3 dimensions)', (i) => windows.admit(`user-${i % 1000}`, limits, 500, Date.now()));
  client.disconnect();
  await Promise.all([ledger.close(), windows.close()]);
  await server.stop();
}
