// What budgets cost per call (ADR 1300): the refusal check on the request path and the charge when a call
// finishes, with 10,000 users under a `*` policy, in memory (BudgetBook), in the SQLite-backed engine (the
// charge's ledger write happens after it, batched) and in a sidecar's cluster budgets (a synchronous outbox
// insert per charge). Then rate limits (ADR 1309): MemoryRateWindows' admission and settlement for 10,000 users
// with all three limits, a refused admission, the x-ratelimit-* headers, and the whole reserveForCall (budget
// reservation, rate admission, both released as a call's end does) with and without rate limits. Reports
// nanoseconds per operation and heap growth. Usage:
//   node --expose-gc bench/budget-check.ts [iterations=200000]

import { mkdtempSync, rmSync } from 'node:fs';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseBudgetPolicies } from '../contracts/budget-config.ts';
import { BudgetBook } from '../sidecar/src/budgets/budget-book.ts';
import { PolicySet } from '../contracts/budget-policies.ts';
import { ClusterBudgets } from '../sidecar/src/budgets/cluster-budgets.ts';
import { LedgerBudgets } from '../sidecar/src/budgets/ledger-budgets.ts';
import { SqliteLedger } from '../sidecar/src/budgets/sqlite-ledger.ts';
import { unitsFromCostUsd } from '../contracts/money.ts';
import { MemoryRateWindows } from '../sidecar/src/budgets/memory-rate-windows.ts';
import { reserveForCall } from '../sidecar/src/pipeline/reservation.ts';
import { setRateLimitHeaders } from '../sidecar/src/pipeline/rate-limit-answer.ts';
import type { MeteredCall } from '../sidecar/src/metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from '../sidecar/src/pricing/default-cache.ts';
import { PriceTable } from '../sidecar/src/pricing/price-table.ts';
import type { TokenUsage } from '../sidecar/src/usage/usage.ts';

const iterations = Number(process.argv[2] ?? 200_000);
const USERS = 10_000;
const users = Array.from({ length: USERS }, (_, i) => `user-${i}`);
const policies = parseBudgetPolicies([{ name: 'default', users: ['*'], limitUsd: '1000000', period: 'month' }], 'policies');
const logger = pino({ level: 'silent' });

function measure(name: string, op: (i: number) => void): void {
  for (let i = 0; i < 10_000; i++) op(i); // warm-up
  globalThis.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) op(i);
  const ns = Number(process.hrtime.bigint() - started) / iterations;
  const heapAfter = process.memoryUsage().heapUsed;
  console.log(`${name.padEnd(52)} ${ns.toFixed(0).padStart(7)} ns/op   heap ${((heapAfter - heapBefore) / 1024 / 1024).toFixed(1)} MiB`);
}

const now = Date.now();
const noPolicies = new BudgetBook(new PolicySet([]));
measure('refusal(), no policies', (i) => void noPolicies.refusal(users[i % USERS]!, now));
const book = new BudgetBook(new PolicySet(policies));
for (const u of users) book.charge(u, 1n, now);
measure('refusal(), 10k users with records', (i) => void book.refusal(users[i % USERS]!, now));
measure('charge() in memory (split, thresholds)', (i) => void book.charge(users[i % USERS]!, 12_345n, now));

const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-budgets-'));
try {
  const local = new LedgerBudgets({ ledger: new SqliteLedger(join(dir, 'tollgate-budgets.db')), config: { policies }, logger });
  await local.ready;
  measure('LedgerBudgets.charge() (SQLite write batched after)', (i) => local.charge(users[i % USERS]!, 0.0012345, now));
  const flushStart = process.hrtime.bigint();
  await local.flushed();
  console.log(`${'  then one flush of the queued deltas'.padEnd(52)} ${(Number(process.hrtime.bigint() - flushStart) / 1e6).toFixed(1).padStart(7)} ms`);
  await local.close();

  const cluster = new ClusterBudgets({ stateDir: join(dir, 'sidecar'), logger, reportIntervalMs: 3_600_000 });
  cluster.budgetState({
    replace: true,
    policiesJson: JSON.stringify(policies),
    policiesChanged: true,
    usage: [],
    includesSequence: '0',
    defaultUser: 'system:serviceaccount:bench:app',
  });
  measure('ClusterBudgets.charge() (outbox insert on disk)', (i) => cluster.charge(users[i % USERS]!, 0.0012345, now));
  await cluster.close(0);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const limits = { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000, concurrent: 10_000 };

const windows = new MemoryRateWindows();
measure('admit() + settle(), 10k users, all three limits', (i) => {
  const user = users[i % USERS]!;
  windows.admit([{ key: user, limits }], 1_000, now);
  windows.settle([{ key: user, limits }], 1_000, 800, now);
});
// ADR 1313: the user's own limits and a team's, checked at both before either is counted.
const teamLevel = { key: '@team:eng', limits };
measure('admit() + settle(), 10k users, user and team levels', (i) => {
  const levels = [{ key: users[i % USERS]!, limits }, teamLevel];
  windows.admit(levels, 1_000, now);
  windows.settle(levels, 1_000, 800, now);
});
const spent = new MemoryRateWindows();
spent.admit([{ key: 'spent', limits: { requestsPerMinute: 1 } }], 0, now);
measure('admit() refused (requests spent)', () => void spent.admit([{ key: 'spent', limits: { requestsPerMinute: 1 } }], 0, now));

const res = new ServerResponse(new IncomingMessage(new Socket()));
const admission = windows.admit([{ key: 'headers', limits }], 1_000, now);
measure('setRateLimitHeaders() (six headers)', () => setRateLimitHeaders(res, admission));

const prices = new PriceTable([{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 0.15, output_per_million: 0.6 }], { ...DEFAULT_CACHE_SETTINGS });
const body = { bytes: Buffer.from('{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}'), size: 84 };
const usage: TokenUsage = { inputTokens: 21, outputTokens: 80, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 101 };
for (const [name, rateLimits] of [
  ['reserveForCall() + its end, budget only', undefined],
  ['reserveForCall() + its end, budget and all three rate limits', limits],
] as const) {
  const book = new BudgetBook(new PolicySet(parseBudgetPolicies([{ name: 'p', users: ['*'], limitUsd: '1000000', ...(rateLimits ? { rateLimits } : {}) }], 'policies')));
  const budgets = {
    reserve: (userId: string, at: number, estimateUsd: () => number) => book.reserve(userId, at, () => unitsFromCostUsd(estimateUsd())),
    rateLevels: (userId: string) => book.policies.rateLevels(userId),
    rateWindows: new MemoryRateWindows(),
  };
  // A stand-in for the metered call: the bench measures the check, not the span; its end comes at once.
  const calls = users.map((userId) => ({ call: { userId, provider: 'openai', model: 'gpt-4o-mini' }, hold: (release: (u: TokenUsage | null) => void) => release(usage) }));
  measure(name, (i) => void reserveForCall(budgets, calls[i % USERS] as unknown as MeteredCall, prices, body, { now, res }));
}
