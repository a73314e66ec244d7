// `tollgate proxy` processes sharing one budget ledger on a real redis-server (ADR 1310): a user's limit holds
// across two of them, a Redis killed with SIGKILL mid-run and started again loses no charge and counts none twice,
// and with budgets.unreachable closed a proxy answers budgeted calls 503 while Redis stays down.

import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../support/redis-server.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let redis: RedisServer;
const proxies: ProxyProcess[] = [];

beforeAll(async () => {
  [bed, redis] = await Promise.all([startUpstreamBed(), startRedisServer()]);
  // Each call reports 1000 input tokens; at 1 USD per million input tokens that is exactly 0.001 USD.
  bed.openai.behave({ usage: { input: 1000, output: 0 } });
}, 120_000);

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.stop()));
  for (const p of proxies) rmSync(p.dir, { recursive: true, force: true });
  await Promise.all([bed?.close(), redis?.stop()]);
});

async function proxy(keyPrefix: string, unreachable = 'open'): Promise<ProxyProcess> {
  const configYaml = bed.configYaml(`
pricing:
  models:
    - { provider: openai, model: gpt-4o-mini, input_per_million: 1, output_per_million: 0 }
budgets:
  ledger: { kind: redis, url: "${redis.url}", keyPrefix: ${keyPrefix} }
  unreachable: ${unreachable}
  policies:
    - { name: team, users: ["*"], limitUsd: 0.01 }
`);
  const p = await startProxyProcess({ configYaml, env: bed.env });
  proxies.push(p);
  return p;
}

/** One chat call as `user` through the official SDK: 'ok', or the refusal's status and code. */
async function call(p: ProxyProcess, user: string): Promise<string> {
  const client = new OpenAI({ baseURL: `${p.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': user } });
  try {
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 });
    return 'ok';
  } catch (error) {
    const e = error as { status?: number; code?: string };
    return `${e.status} ${e.code}`;
  }
}

async function calls(p: ProxyProcess, user: string, n: number): Promise<string[]> {
  const answers: string[] = [];
  for (let i = 0; i < n; i++) answers.push(await call(p, user));
  return answers;
}

async function spentUsd(p: ProxyProcess, user: string): Promise<number | undefined> {
  const budget = (await (await fetch(`${p.url}/_local/api/budgets/${user}`)).json()) as { spent_usd?: number };
  return budget.spent_usd;
}

async function pendingDeductions(p: ProxyProcess): Promise<number> {
  const health = (await (await fetch(`${p.url}/_local/api/health`)).json()) as { budgets: { pendingDeductions: number } };
  return health.budgets.pendingDeductions;
}

async function storedSpent(keyPrefix: string, user: string): Promise<Record<string, string>> {
  const client = new Redis(redis.url);
  const hash = await client.hgetall(`{${keyPrefix}}:u:${user}`);
  client.disconnect();
  return Object.fromEntries(Object.entries(hash).filter(([field]) => field.startsWith('spent:')));
}

describe('tollgate proxy processes on one Redis ledger', () => {
  it('hold one user to one limit: what one spent is refused on the other', async () => {
    const [a, b] = await Promise.all([proxy('shared'), proxy('shared')]);
    expect(await calls(a, 'alice', 6)).toEqual(Array(6).fill('ok'));
    // b reads alice back from Redis within its 3 s read-back.
    await waitFor('b to see what alice spent on a', async () => (await spentUsd(b, 'alice')) === 0.006, 20_000);
    expect(await calls(b, 'alice', 5)).toEqual([...Array(4).fill('ok'), '429 budget_exceeded']);
    await waitFor('a to see what alice spent on b', async () => (await spentUsd(a, 'alice')) === 0.01, 20_000);
    expect(await call(a, 'alice')).toBe('429 budget_exceeded');
    // 10 calls of 0.001 USD, in units of 10⁻¹⁰ USD, in the field of the current month.
    expect(Object.values(await storedSpent('shared', 'alice'))).toEqual(['100000000']);
  }, 90_000);

  it('lose no charge and count none twice when Redis is killed mid-run and started again', async () => {
    const [a, b] = await Promise.all([proxy('outage'), proxy('outage')]);
    expect(await calls(a, 'bob', 2)).toEqual(['ok', 'ok']);
    await waitFor('a’s spend written', async () => (await pendingDeductions(a)) === 0);
    await redis.kill();
    // budgets.unreachable is open (the default): both go on admitting on what memory knows.
    expect([...(await calls(a, 'bob', 2)), ...(await calls(b, 'bob', 3))]).toEqual(Array(5).fill('ok'));
    await waitFor('the failed deductions', () => [a, b].every((p) => p.logs.some((l) => l.msg === 'failed to deduct spend' && l.user_id === 'bob')), 20_000);
    await redis.start();
    await waitFor('both queues written', async () => (await pendingDeductions(a)) === 0 && (await pendingDeductions(b)) === 0, 60_000);
    // 7 calls of 0.001 USD: 70,000,000 units.
    expect(Object.values(await storedSpent('outage', 'bob'))).toEqual(['70000000']);
  }, 120_000);

  it('with budgets.unreachable closed, answer budgeted calls 503 once Redis has been down for 30 s, and serve them again when it is back', async () => {
    const p = await proxy('closed', 'closed');
    expect(await call(p, 'carol')).toBe('ok');
    await redis.kill();
    expect(await call(p, 'carol')).toBe('ok'); // within the grace: memory decides; its spend cannot be written
    await waitFor('the failed deduction', () => p.logs.some((l) => l.msg === 'failed to deduct spend' && l.user_id === 'carol'), 20_000);
    const refused = await waitFor(
      'a 503 after the 30 s grace',
      async () => {
        const res = await fetch(`${p.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-tollgate-user': 'carol' },
          body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
        });
        const body = (await res.json()) as { error?: { code?: string; message?: string } };
        return res.status === 503 ? { retryAfter: res.headers.get('retry-after'), error: body.error } : false;
      },
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
    expect(refused.retryAfter).toBe('5');
    expect(refused.error).toMatchObject({
      code: 'budget_ledger_unavailable',
      message: expect.stringMatching(
        /^the budget ledger \(redis\) has not been reachable since .* and budgets.unreachable is closed: calls of user "carol" under policy "team" are refused until it is back$/,
      ),
    });
    await redis.start();
    await waitFor('the queue written', async () => (await pendingDeductions(p)) === 0, 60_000);
    // The outage's refusal is lifted: a new user is served, and carol, whose calls during the grace (one a second,
    // 0.001 USD each) spent her 0.01 USD, meets her budget again.
    expect(await call(p, 'dan')).toBe('ok');
    expect(await call(p, 'carol')).toBe('429 budget_exceeded');
  }, 150_000);
});
