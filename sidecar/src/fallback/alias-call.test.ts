import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { withAliasDefaults, type AliasTarget } from '../../../contracts/model-aliases.ts';
import { ProxyError } from '../errors.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { answerBodyFrom } from '../../../test/support/answer-bodies.ts';
import { AliasCall, TargetUnfit } from './alias-call.ts';
import { attemptOrder } from './attempt-order.ts';
import { TargetHealth } from './target-health.ts';

/** A small deterministic PRNG (mulberry32), so orders and shares are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function answer(statusCode: number, headers: Record<string, string> = {}): UpstreamResponse & { settled: string[]; destroyed: () => boolean } {
  const body = Readable.from([Buffer.from('{}')]);
  const settled: string[] = [];
  return {
    statusCode,
    headers,
    body: answerBodyFrom(body),
    settle: (outcome) => settled.push(outcome),
    timing: { startedAt: 0, headersAt: 0, endedAt: Number.NaN },
    settled,
    destroyed: () => body.destroyed,
  };
}

const alias = withAliasDefaults({
  targets: [
    { route: 'gamma-direct', model: 'claude-sonnet-4-5' },
    { route: 'gamma', model: 'claude-sonnet-4-5@20250929', priority: 1 },
    { route: 'gamma-cloudb', model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', priority: 1, weight: 3 },
  ],
});

describe('attemptOrder', () => {
  it('puts priorities in order and shares a priority by weight (3:1 over 4000 calls: 2900 to 3100 first)', () => {
    const random = seeded(7);
    let heavyFirst = 0;
    for (let i = 0; i < 4000; i++) {
      const order = attemptOrder(alias, () => true, random);
      expect(order[0]!.route).toBe('gamma-direct');
      if (order[1]!.route === 'gamma-cloudb') heavyFirst++;
    }
    expect(heavyFirst).toBeGreaterThanOrEqual(2900);
    expect(heavyFirst).toBeLessThanOrEqual(3100);
  });

  it('tries a target that cannot be tried now after every one that can, whatever its priority', () => {
    const order = attemptOrder(alias, (target) => target.route !== 'gamma-direct', seeded(1));
    expect(order.map((target) => target.route).at(-1)).toBe('gamma-direct');
  });
});

describe('AliasCall', () => {
  const run = (attempt: (target: AliasTarget) => UpstreamResponse | Error, options: Partial<Parameters<typeof withAliasDefaults>[0]> = {}, health = new TargetHealth()) => {
    let now = 1_000_000;
    const call = new AliasCall<string>({
      alias: 'claude-sonnet',
      definition: withAliasDefaults({ targets: alias.targets.map((t) => ({ ...t })), ...options }),
      health,
      breakerOpen: () => false,
      attempt: async (target) => {
        now += 10;
        const result = attempt(target);
        if (result instanceof Error) throw result;
        return { plan: target.route, upstream: result };
      },
      now: () => now,
      random: seeded(3),
    });
    return { call, health, now: () => now };
  };

  it('goes on after a 429, drops that answer unread and cools the target down for its Retry-After', async () => {
    const limited = answer(429, { 'retry-after': '30' });
    const { call, health, now } = run((target) => (target.route === 'gamma-direct' ? limited : answer(200)));
    const answered = await call.run();
    expect(answered.plan).not.toBe('gamma-direct');
    expect(answered.attempt).toBe(2);
    expect(limited.destroyed()).toBe(true);
    expect(limited.settled).toEqual(['abandoned']);
    expect(call.failed).toEqual([expect.objectContaining({ attempt: 1, statusCode: 429, reason: 'rate_limited' })]);
    expect(health.coolingUntil(alias.targets[0]!, now())).toBe(1_000_010 + 30_000);
  });

  it('returns a 400 as the answer without trying another target', async () => {
    const tried: string[] = [];
    const { call } = run((target) => {
      tried.push(target.route);
      return answer(400);
    });
    expect((await call.run()).upstream.statusCode).toBe(400);
    expect(tried).toEqual(['gamma-direct']);
  });

  it('rethrows an error it does not fall back on, and one the alias excludes', async () => {
    const { call } = run(() => new ProxyError('invalid_request', 'bad path'));
    await expect(call.run()).rejects.toMatchObject({ code: 'invalid_request' });
    const narrowed = run(() => new ProxyError('upstream_timeout', 'slow'), { fallbackOn: ['rate_limited'] });
    await expect(narrowed.call.run()).rejects.toMatchObject({ code: 'upstream_timeout' });
    expect(narrowed.call.failed).toHaveLength(1);
  });

  it('relays the last failing answer once attempts run out', async () => {
    const { call } = run(() => answer(503));
    const answered = await call.run();
    expect(answered.upstream.statusCode).toBe(503);
    expect(call.failed.map((f) => f.attempt)).toEqual([1, 2]);
  });

  it('stops at once when cancelled (the caller left), trying nothing more', async () => {
    let calls = 0;
    const holder: { call?: AliasCall<string> } = {};
    const { call } = run(() => {
      calls++;
      holder.call!.cancel(new ProxyError('client_aborted', 'the caller left'));
      return new ProxyError('upstream_unreachable', 'reset');
    });
    holder.call = call;
    await expect(call.run()).rejects.toMatchObject({ code: 'upstream_unreachable' });
    expect(calls).toBe(1);
  });

  it('when the others are cooling down past the deadline, relays the last 429 as the provider gave it, not a 502', async () => {
    const health = new TargetHealth();
    // Priority 1's targets are cooling down for an hour: no wait fits the 120 s deadline.
    for (const target of alias.targets.slice(1)) health.coolDown(target, 1_000_000 + 3_600_000);
    // Its own Retry-After (10 minutes) passes the deadline too: nothing is left to wait for.
    const limited = answer(429, { 'retry-after': '600' });
    const { call } = run(() => limited, {}, health);
    const answered = await call.run();
    expect(answered.upstream).toBe(limited);
    expect(limited.destroyed()).toBe(false);
    expect(call.failed.map((f) => f.attempt)).toEqual([1]);
  });

  it('passes over a target that cannot take the request and answers from the next', async () => {
    const { call } = run((target) => (target.route === 'gamma-direct' ? new TargetUnfit(new Error('n is not supported')) : answer(200)));
    const answered = await call.run();
    expect(answered.upstream.statusCode).toBe(200);
    expect(call.failed[0]).toMatchObject({ target: { route: 'gamma-direct' }, error: 'n is not supported', reason: null });
  });

  it('a target that cannot take the request anywhere ends the call with that refusal', async () => {
    const refusal = new Error('n is not supported');
    const { call } = run(() => new TargetUnfit(refusal));
    await expect(call.run()).rejects.toBe(refusal);
  });

  it('a cancel wakes a call waiting for a cooling target at once', async () => {
    const health = new TargetHealth();
    for (const target of alias.targets) health.coolDown(target, Date.now() + 60_000);
    const call = new AliasCall<string>({
      alias: 'claude-sonnet',
      definition: withAliasDefaults({ targets: alias.targets.map((t) => ({ ...t })) }),
      health,
      breakerOpen: () => false,
      attempt: () => Promise.reject(new Error('never tried')),
    });
    const running = call.run();
    call.cancel(new ProxyError('client_aborted', 'the caller left'));
    await expect(running).rejects.toMatchObject({ code: 'client_aborted' });
  });

  it('an error that ends the call gives a held failing answer back unread', async () => {
    const limited = answer(429, { 'retry-after': '1' });
    const { call } = run((target) => (target.route === 'gamma-direct' ? limited : new ProxyError('invalid_request', 'refused')));
    await expect(call.run()).rejects.toMatchObject({ code: 'invalid_request' });
    expect(limited.destroyed()).toBe(true);
    expect(limited.settled).toEqual(['abandoned']);
  });
});
