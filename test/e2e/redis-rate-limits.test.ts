// Rate limits shared through Redis (ADR 1311): two `tollgate proxy` processes whose budgets.ledger is one real
// redis-server count one user's requests and calls in flight together, refuse past the limit whichever process
// the call reaches, fall back to their own windows while Redis is killed (budgets.unreachable open) and share
// again once it is back. A limit of L requests a minute spends 60 / L s of the window per request (ADR 1309).

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
}, 120_000);

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.stop()));
  for (const p of proxies) rmSync(p.dir, { recursive: true, force: true });
  await Promise.all([bed?.close(), redis?.stop()]);
});

/** Two proxies on one Redis ledger under `keyPrefix`. */
async function pair(keyPrefix: string): Promise<[ProxyProcess, ProxyProcess]> {
  const configYaml = bed.configYaml(`
budgets:
  ledger: { kind: redis, url: "${redis.url}", keyPrefix: ${keyPrefix} }
  policies:
    - { name: four-a-minute, users: [rita], limitUsd: 100, rateLimits: { requestsPerMinute: 4 } }
    - { name: one-at-once, users: [lea], limitUsd: 100, rateLimits: { concurrent: 1 } }
    - { name: two-a-minute, users: [kim, kim-back], limitUsd: 100, rateLimits: { requestsPerMinute: 2 } }
    - { name: everyone, users: ["*"], limitUsd: 100, rateLimits: { requestsPerMinute: 1000 } }
`);
  const started = await Promise.all([startProxyProcess({ configYaml, env: bed.env }), startProxyProcess({ configYaml, env: bed.env })]);
  proxies.push(...started);
  return started;
}

const chat = { model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };

function post(p: ProxyProcess, user: string, body: unknown = chat): Promise<Response> {
  return fetch(`${p.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user, authorization: 'Bearer unused' },
    body: JSON.stringify(body),
  });
}

/** The status and x-ratelimit-remaining-requests of one call, its body read. */
async function remaining(p: ProxyProcess, user: string): Promise<string> {
  const res = await post(p, user);
  await res.text();
  return `${res.status} ${res.headers.get('x-ratelimit-remaining-requests')}`;
}

describe('two proxies on one Redis', () => {
  let a: ProxyProcess;
  let b: ProxyProcess;
  beforeAll(async () => {
    [a, b] = await pair('shared');
  }, 60_000);

  it('requestsPerMinute 4: 4 calls in all across both, the 5th refused with 429 and Retry-After on either, none of them sent', async () => {
    const sentBefore = bed.openai.requests.length;
    // One window for both: each call takes 15 s of it, so what is left goes 3, 2, 1, 0 whichever proxy answers.
    expect([await remaining(a, 'rita'), await remaining(b, 'rita'), await remaining(a, 'rita'), await remaining(b, 'rita')]).toEqual(['200 3', '200 2', '200 1', '200 0']);
    for (const p of [a, b]) {
      const refused = await post(p, 'rita');
      expect(refused.status).toBe(429);
      // The 5th would put the window 75 s ahead: 15 s past the minute, less the time the four calls took.
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(10);
      expect(retryAfter).toBeLessThanOrEqual(15);
      expect(await refused.json()).toMatchObject({
        error: { code: 'rate_limit_exceeded', message: `user "rita" has made the 4 requests per minute of policy "four-a-minute"; try again in ${retryAfter}s` },
      });
    }
    expect(bed.openai.requests.length - sentBefore).toBe(4);
  }, 30_000);

  it('concurrent 1: a call held on one proxy refuses the user’s call on the other, and its end frees the slot for both', async () => {
    let release!: () => void;
    bed.openai.behave({ hold: new Promise<void>((resolve) => (release = resolve)) });
    const sentBefore = bed.openai.requests.length;
    const held = post(a, 'lea', { ...chat, stream: true });
    await waitFor('the first call upstream', () => bed.openai.requests.length - sentBefore === 1);
    const refused = await post(b, 'lea');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({
      error: { code: 'rate_limit_exceeded', message: 'user "lea" has 1 calls in flight, the concurrent limit of policy "one-at-once"; try again in 1s' },
    });
    release();
    const first = await held;
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('data: [DONE]');
    bed.openai.behave({});
    // Settled once, on the store both count in: b's call goes through now, and then a's.
    expect((await post(b, 'lea')).status).toBe(200);
    expect((await post(a, 'lea')).status).toBe(200);
    expect(bed.openai.requests.length - sentBefore).toBe(3);
  }, 30_000);
});

describe('two proxies while Redis is killed (budgets.unreachable open)', () => {
  it('each counts in its own windows while Redis is down, logs it once, and they share again once it is back', async () => {
    const [a, b] = await pair('outage');
    // Shared while Redis runs: kim's two a minute go one on a, one on b.
    expect([await remaining(a, 'kim'), await remaining(b, 'kim')]).toEqual(['200 1', '200 0']);
    await redis.kill();
    // Killed mid-run: each process counts alone, in windows of its own that saw none of those calls, so two more
    // on a, the third refused there, and two more on b.
    expect([await remaining(a, 'kim'), await remaining(a, 'kim'), await remaining(a, 'kim')]).toEqual(['200 1', '200 0', '429 0']);
    expect([await remaining(b, 'kim'), await remaining(b, 'kim')]).toEqual(['200 1', '200 0']);
    // The health answer says where the rate limits are counted, and since when that store has been unreachable.
    const health = (await (await fetch(`${a.url}/_local/api/health`)).json()) as { budgets: { rateLimitStore?: { store: string; unreachableSince: string | null } } };
    expect(health.budgets.rateLimitStore).toEqual({ store: `redis at ${new URL(redis.url).host}`, unreachableSince: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    for (const p of [a, b]) {
      const outage = p.logs.filter((l) => l.msg === 'rate-limit store unreachable: counting rate limits in this process until it is back');
      expect(outage).toHaveLength(1);
      expect(outage[0]).toMatchObject({ level: 40, unreachable: 'open', store: `redis at ${new URL(redis.url).host}` });
    }
    await redis.start();
    // Each proxy asks Redis again once its client is connected: a probe call (a new user each time) tells.
    let probe = 0;
    for (const p of [a, b]) {
      await waitFor(
        'the proxy back on Redis',
        async () => {
          await (await post(p, `kim-probe-${probe++}`)).text();
          return p.logs.some((l) => l.msg === 'rate limits shared through Redis again');
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
    const back = (await (await fetch(`${a.url}/_local/api/health`)).json()) as { budgets: { rateLimitStore?: { unreachableSince: string | null } } };
    expect(back.budgets.rateLimitStore?.unreachableSince).toBeNull();
    // One window again: kim-back's two a minute go one on a, one on b, and the third is refused on a.
    expect([await remaining(a, 'kim-back'), await remaining(b, 'kim-back'), await remaining(a, 'kim-back')]).toEqual(['200 1', '200 0', '429 0']);
  }, 120_000);
});
