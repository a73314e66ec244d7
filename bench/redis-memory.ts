// What the chart's Redis holds at the scale the budgets are sized for (issue 38, the `budgets.redis.resources`
// of the chart): the central server's ledger with 100,000 users in a period (ADR 1310), the rate windows of
// 10,000 users active in the last minutes (ADR 1311/1313), and the operator's cluster ledger of 100,000 users
// as a compacted base plus the most patches a compaction lets pile up, 8 MB (ADR 1307/1314), all written
// through the code that writes them in production, on Debian's redis-server as the chart runs it (append-only
// file, appendfsync always). Prints the server's own memory figures and the append-only file's size.
//
//   ./tollgatew node bench/redis-memory.ts [users=100000]

import { statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LedgerState, type LedgerPatch } from '../operator/src/budgets/ledger-state.ts';
import { RedisLedgerStore } from '../operator/src/budgets/redis-ledger-store.ts';
import { RedisLedger } from '../sidecar/src/budgets/redis-ledger.ts';
import { RedisRateWindows } from '../sidecar/src/budgets/redis-rate-windows.ts';
import { startRedisServer } from '../test/support/redis-server.ts';

const users = Number(process.argv[2] ?? 100_000);
const PERIOD = Date.UTC(2026, 10, 1);
const PERIOD_ISO = new Date(PERIOD).toISOString();
const server = await startRedisServer({ fsync: 'always' });
const client = new Redis(server.url);

async function memory(label: string): Promise<void> {
  const info = await client.info('memory');
  const field = (name: string) => Number(/^(\w+):(.*)$/m.exec(info.split('\n').find((l) => l.startsWith(`${name}:`)) ?? '')?.[2] ?? NaN);
  const aof = readdirSync(server.dir, { recursive: true })
    .map(String)
    .filter((f) => f.includes('.aof'))
    .reduce((n, f) => n + statSync(join(server.dir, f)).size, 0);
  const mib = (n: number) => (n / 2 ** 20).toFixed(1);
  console.log(
    `${label.padEnd(58)} used ${mib(field('used_memory'))} MiB, RSS ${mib(field('used_memory_rss'))} MiB, peak ${mib(field('used_memory_peak'))} MiB, append-only file ${mib(aof)} MiB`,
  );
}

try {
  await memory('empty');
  // The server's ledger: every user charged once this period, in batches as an engine writes them.
  const ledger = new RedisLedger({ url: server.url, keyPrefix: 'tollgate:budgets' });
  for (let from = 0; from < users; from += 500) {
    const deltas = Array.from({ length: Math.min(500, users - from) }, (_, i) => ({
      userId: `user-${from + i}@example.com`,
      policy: 'team-monthly',
      periodStart: PERIOD,
      split: { amount: 123_456_789n, limitPart: 123_456_789n, grantParts: [] },
      alerted: 0,
    }));
    await ledger.deduct({ id: `batch-${from}`, deltas });
  }
  await ledger.close();
  await memory(`+ the engines' ledger, ${users} users`);

  const windows = new RedisRateWindows({ url: server.url, keyPrefix: 'tollgate:budgets' });
  const limits = { requestsPerMinute: 600, tokensPerMinute: 1_000_000, concurrent: 8 };
  for (let u = 0; u < 10_000; u++) {
    const admission = await windows.admit([{ key: `user-${u}@example.com`, limits }], 1_000, Date.now());
    if (admission.refusedBy !== null) throw new Error('the bench expected every admission to fit');
  }
  await windows.close();
  await memory('+ rate windows of 10,000 users');

  const state = new LedgerState();
  const patch = (from: number, count: number, spent: string): LedgerPatch => ({
    v: 2,
    policies: {
      'shop/team-monthly': {
        periods: { [PERIOD_ISO]: Object.fromEntries(Array.from({ length: count }, (_, i) => [`user-${from + i}@example.com`, [spent, spent, 0]])) },
      },
    },
  });
  state.applyPatch(patch(0, users, '123456789'));
  const store = new RedisLedgerStore(client, { keyPrefix: 'tollgate:budgets', url: server.url, before: () => Promise.reject(new Error('no ConfigMaps here')) });
  await store.compact(
    1,
    state.chunks(700 * 1024).map((p) => JSON.stringify(p)),
    { base: 0, manifestVersion: undefined },
  );
  // Patches of 6,000 users each (ADR 1307's most per patch) until 8 MB are on top of the base.
  let seq = 2;
  for (let bytes = 0; bytes < 8 * 2 ** 20; seq++) {
    const json = JSON.stringify(patch(((seq - 2) * 6_000) % users, 6_000, String(123_456_789 + seq)));
    await store.writePatch(seq, 1, json);
    bytes += json.length;
  }
  await memory(`+ the cluster ledger, ${users} users + ${seq - 2} patches`);
} finally {
  client.disconnect();
  await server.stop();
}
