// A call's reservation (ADR 1308) from the request it sends, and its release when the call finishes, whatever
// its end: the real CallMeter, BudgetBook and price table. Amounts worked out by hand beside each.

import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseBudgetPolicies } from '../../../contracts/budget-config.ts';
import { PolicySet } from '../../../contracts/budget-policies.ts';
import { parseUsd, unitsFromCostUsd } from '../../../contracts/money.ts';
import { BudgetBook } from '../budgets/budget-book.ts';
import { CallMeter } from '../metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { maxOutputTokens, RESERVED_OUTPUT_TOKENS, reservationUsd, reserveForCall } from './reservation.ts';
import { type CallRefusal, refusalError } from './refusals.ts';
import { MemoryRateWindows } from '../budgets/memory-rate-windows.ts';
import { RedisRateWindows } from '../budgets/redis-rate-windows.ts';
import { freePort } from '../../../test/control-plane/free-port.ts';

// 100 USD per million input tokens, 2,000 per million output tokens: 0.0001 and 0.002 USD a token.
const prices = new PriceTable([{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 100, output_per_million: 2000 }], { ...DEFAULT_CACHE_SETTINGS });
const logger = pino({ level: 'silent' });
const writers: SpanWriter[] = [];
afterEach(async () => {
  for (const writer of writers.splice(0)) await writer.close();
});

/** A policy `p` of every user, and `above` it the policies of groups (ADR 1312). */
function setUp(limitUsd: string, rateLimits?: object, above: object[] = []) {
  const book = new BudgetBook(new PolicySet(parseBudgetPolicies([{ name: 'p', limitUsd, ...(rateLimits ? { rateLimits } : {}) }, ...above], 'policies')));
  const budgets = {
    reserve: (userId: string, at: number, estimateUsd: () => number) => book.reserve(userId, at, () => unitsFromCostUsd(estimateUsd())),
    rateLevels: (userId: string) => book.policies.rateLevels(userId),
    rateWindows: new MemoryRateWindows(),
  };
  const charged: number[] = [];
  const writer = new SpanWriter(openMemorySpanStore(100), { bufferSize: 100, batchSize: 10, flushIntervalMs: 1000 }, logger);
  writers.push(writer);
  const meter = new CallMeter(
    writer,
    logger,
    { cutting: false },
    { defaultUser: null, charge: (userId, costUsd, at) => (charged.push(costUsd), book.charge(userId, unitsFromCostUsd(costUsd), at)) },
  );
  const start = (userId: string | null, provider = 'openai') =>
    meter.start({ route: 'beta', provider, model: 'gpt-4o-mini', operation: 'chat', userId, projectId: null, requestId: 'r', trace: startSpanContext(undefined, undefined) });
  return { book, budgets, start, charged };
}

// 100 bytes: ceil(100 / 4) = 25 input tokens.
const body = (max: string) => `{"model":"gpt-4o-mini",${max}"messages":[{"role":"user","content":"hi"}]}`.padEnd(100, ' ');

describe('what a call reserves', () => {
  it('its input estimated from the body and the max output it names, priced', () => {
    expect(Buffer.byteLength(body('"max_tokens":100,'))).toBe(100);
    // 25 × 0.0001 + 100 × 0.002 = 0.0025 + 0.2 = 0.2025
    expect(reservationUsd(prices, 'openai', 'gpt-4o-mini', { bytes: body('"max_tokens":100,'), size: 100 })).toBeCloseTo(0.2025, 12);
    // No maximum named: RESERVED_OUTPUT_TOKENS (4,096) × 0.002 = 8.192, plus 0.0025.
    expect(RESERVED_OUTPUT_TOKENS).toBe(4096);
    expect(reservationUsd(prices, 'openai', 'gpt-4o-mini', { bytes: body(''), size: 100 })).toBeCloseTo(8.1945, 12);
    // A body streamed through unread: only its size (here 400 bytes, 100 tokens = 0.01) and the default output.
    expect(reservationUsd(prices, 'openai', 'gpt-4o-mini', { bytes: null, size: 400 })).toBeCloseTo(8.202, 12);
    // A model the table does not price costs nothing, so holds nothing.
    expect(reservationUsd(prices, 'openai', 'unpriced-model', { bytes: body('"max_tokens":100,'), size: 100 })).toBe(0);
  });

  it.each([
    [{ max_tokens: 7 }, 7],
    [{ max_completion_tokens: 8, max_tokens: 99 }, 8],
    [{ max_output_tokens: 9 }, 9],
    [{ generationConfig: { maxOutputTokens: 10 } }, 10],
    [{ inferenceConfig: { maxTokens: 11 } }, 11],
    [{ max_tokens: '12' }, null],
    [{ max_tokens: -1 }, null],
    [[], null],
    [null, null],
  ])('the max output of %j is %s', (request, expected) => {
    expect(maxOutputTokens(request)).toBe(expected);
  });
});

describe('a reservation is released exactly once, when the call finishes', () => {
  it('held while the call runs, released and replaced by the real cost at finish, whatever the status', () => {
    const { book, budgets, start, charged } = setUp('1');
    for (const status of ['ok', 'client_aborted', 'error', 'upstream_error'] as const) {
      const call = start('alice');
      expect(reserveForCall(budgets, call, prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toBeNull();
      expect(book.reserved('alice')).toBe(parseUsd('0.2025')); // 25 × 0.0001 + 100 × 0.002
      call.finish({ prices, usage: status === 'ok' || status === 'client_aborted' ? usageOf(10, 5) : null, status, statusCode: null });
      call.finish({ prices, usage: null, status: 'error', statusCode: null }); // a second finish changes nothing
      expect(book.reserved('alice')).toBe(0n);
    }
    // Two calls with usage: 10 × 0.0001 + 5 × 0.002 = 0.011 each.
    expect(charged).toEqual([expect.closeTo(0.011, 12), expect.closeTo(0.011, 12)]);
    expect(book.reservingUsers).toBe(0);
  });

  it('a refused call holds nothing; a call with no user or to a local model is not budgeted at all', () => {
    const { book, budgets, start } = setUp('0.2');
    // 0.2025 > 0.2: refused, nothing held.
    expect(reserveForCall(budgets, start('alice'), prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toMatchObject({
      short: { leftUsd: 0.2, reserveUsd: 0.2025 },
    });
    expect(book.reservingUsers).toBe(0);
    expect(reserveForCall(budgets, start(null), prices, { bytes: body(''), size: 100 }, { now: Date.now() })).toBeNull();
    expect(reserveForCall(budgets, start('alice', 'local'), prices, { bytes: body(''), size: 100 }, { now: Date.now() })).toBeNull();
    expect(book.reservingUsers).toBe(0);
  });
});

describe('rate limits (ADR 1309) through the same hold', () => {
  it('counts the estimate in tokens at admission and settles to the real tokens when the call finishes', () => {
    // 1,000 tokens a minute and a budget large enough never to refuse.
    const { budgets, start } = setUp('100', { tokensPerMinute: 1000 });
    const call = start('alice');
    // 25 input + 100 max output = 125 tokens held: 875 left.
    expect(reserveForCall(budgets, call, prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toBeNull();
    expect(budgets.rateWindows.admit([{ key: 'probe', limits: { tokensPerMinute: 1000 } }], 0, Date.now()).tokens?.remaining).toBe(1000);
    const now = Date.now();
    expect(budgets.rateWindows.admit([{ key: 'alice', limits: { tokensPerMinute: 1000 } }], 0, now).tokens?.remaining).toBe(875);
    // The call used 10 + 5 = 15: 985 left (a second finish changes nothing).
    call.finish({ prices, usage: usageOf(10, 5), status: 'ok', statusCode: 200 });
    call.finish({ prices, usage: null, status: 'error', statusCode: null });
    expect(budgets.rateWindows.admit([{ key: 'alice', limits: { tokensPerMinute: 1000 } }], 0, now).tokens?.remaining).toBe(985);
  });

  it('frees a concurrent slot once when the call ends; a refusal names the limit and releases the budget hold', () => {
    const { book, budgets, start } = setUp('1', { concurrent: 1 });
    const first = start('alice');
    expect(reserveForCall(budgets, first, prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toBeNull();
    const refusal = reserveForCall(budgets, start('alice'), prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() });
    expect(refusal).toMatchObject({ userId: 'alice', policy: 'p', retryAfterSeconds: 1, admission: { refusedBy: 'concurrent' } });
    // The windows in memory answer synchronously: no promise to await.
    expect(refusalError(refusal as CallRefusal)).toBe('rate_limit_exceeded: user "alice" has 1 calls in flight, the concurrent limit of policy "p"; try again in 1s');
    // Only the first call's 0.2025 is held: the refused one gave its hold back.
    expect(book.reserved('alice')).toBe(parseUsd('0.2025'));
    first.finish({ prices, usage: null, status: 'client_aborted', statusCode: null });
    expect(book.reserved('alice')).toBe(0n);
    expect(reserveForCall(budgets, start('alice'), prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toBeNull();
  });

  it('shared windows on a Redis nobody answers, budgets.unreachable closed: counted here for the 30 s grace, then refused naming the store, the budget hold given back', async () => {
    const port = await freePort();
    const windows = new RedisRateWindows({ url: `redis://127.0.0.1:${port}`, keyPrefix: 't', commandTimeoutMs: 500, unreachable: 'closed' });
    try {
      const { book, budgets, start } = setUp('1', { requestsPerMinute: 60 });
      const shared = { ...budgets, rateWindows: windows };
      const T = Date.parse('2026-11-10T12:00:00Z');
      const first = start('alice');
      // The store's first failure starts the outage at T: within the grace, this process's windows admit.
      expect(await reserveForCall(shared, first, prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: T })).toBeNull();
      first.finish({ prices, usage: null, status: 'ok', statusCode: 200 });
      const refusal = await reserveForCall(shared, start('alice'), prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: T + 30_000 });
      expect(refusal).toMatchObject({ userId: 'alice', policy: 'p', unreachable: { ledger: `redis at 127.0.0.1:${port}`, since: T } });
      expect(refusalError(refusal!)).toContain(
        `the budget ledger (redis at 127.0.0.1:${port}) has not been reachable since 2026-11-10T12:00:00.000Z and budgets.unreachable is closed: calls of user "alice" under policy "p" are refused until it is back`,
      );
      expect(book.reserved('alice')).toBe(0n);
    } finally {
      await windows.close();
    }
  });

  it('a call the budget refuses is not counted by the rate windows', () => {
    const { budgets, start } = setUp('0.2', { requestsPerMinute: 1 });
    // 0.2025 > 0.2: refused by the budget; the one request a minute is still there.
    expect(reserveForCall(budgets, start('alice'), prices, { bytes: body('"max_tokens":100,'), size: 100 }, { now: Date.now() })).toMatchObject({ short: { reserveUsd: 0.2025 } });
    expect(budgets.rateWindows.admit([{ key: 'alice', limits: { requestsPerMinute: 1 } }], 0, Date.now()).refusedBy).toBeNull();
  });
});

describe('rate limits of a team (ADR 1313)', () => {
  const team = { name: 'eng', limitUsd: '100', team: { name: 'eng', users: ['ann', 'ben'] }, rateLimits: { requestsPerMinute: 3 } };

  it('refuses the 4th call of the minute by either member naming the team, and gives the budget hold back', () => {
    const { book, budgets, start } = setUp('100', undefined, [team]);
    const T = Date.parse('2026-11-29T12:00:00Z');
    const request = { bytes: body('"max_tokens":100,'), size: 100 };
    for (const user of ['ann', 'ben', 'ann']) expect(reserveForCall(budgets, start(user), prices, request, { now: T })).toBeNull();
    const refusal = reserveForCall(budgets, start('ben'), prices, request, { now: T });
    expect(refusal).toMatchObject({ userId: 'ben', policy: 'eng', level: 'team', subject: '@team:eng', retryAfterSeconds: 20, admission: { refusedBy: 'requests' } });
    expect(refusalError(refusal as CallRefusal)).toBe(
      'rate_limit_exceeded: rate limit of team "eng" (user "ben"): the team has made the 3 requests per minute of policy "eng"; try again in 20s',
    );
    // Ben's refused call holds nothing against his budget or the team's; his first call still holds its 0.2025.
    expect(book.reserved('ben')).toBe(parseUsd('0.2025'));
    // A user outside the team is not counted in its window.
    expect(reserveForCall(budgets, start('cy'), prices, request, { now: T })).toBeNull();
  });
});

function usageOf(inputTokens: number, outputTokens: number) {
  return { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: inputTokens + outputTokens };
}

describe('a user id of a group key’s form (ADR 1312)', () => {
  it('is refused before anything is held or counted, so team eng’s budget and window stay whole for ann', () => {
    const eng = { name: 'eng', team: { name: 'eng', users: ['ann'] }, limitUsd: '1', rateLimits: { requestsPerMinute: 1 } };
    const { book, budgets, start } = setUp('10', undefined, [eng]);
    const sent = { bytes: body('"max_tokens":100,'), size: 100 };
    const refusal = reserveForCall(budgets, start('@team:eng'), prices, sent, { now: Date.now() });
    expect(refusalError(refusal as CallRefusal)).toBe(
      'reserved_user_id: user id "@team:eng" is reserved: ids starting with @team:, @workload: or @namespace: name the budgets above the user; the credential, x-tollgate-user or the request\'s user must name a user',
    );
    expect(book.reserved('@team:eng')).toBe(0n);
    // The team's one request of the minute is still there for ann.
    expect(reserveForCall(budgets, start('ann'), prices, sent, { now: Date.now() })).toBeNull();
  });
});
