// The budget endpoints of the management API on a whole engine (fastify inject, memory span store and ledger).

import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildEngine, type Engine } from '../app.ts';
import { ConfigStore } from '../config/config-store.ts';
import { parseRuntimeConfigPatch } from '../../../contracts/config-schema.ts';

let engine: Engine;

beforeEach(async () => {
  const store = new ConfigStore(
    parseRuntimeConfigPatch({
      storage: { kind: 'memory' },
      budgets: {
        policies: [
          { name: 'default', limitUsd: '0.01' },
          { name: 'vip', users: ['vip'], limitUsd: 100, enforcement: 'alert' },
        ],
      },
    }),
  );
  engine = await buildEngine({ store, logger: pino({ level: 'silent' }) });
  await engine.budgets.ready;
});

afterEach(() => engine.shutdown(0));

const post = (url: string, body: unknown) =>
  engine.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: typeof body === 'string' ? body : JSON.stringify(body) });

describe('/_local/api/budgets', () => {
  it('lists the users charged this period, and shows one user with the issue’s fields', async () => {
    engine.budgets.charge('alice', 0.004, Date.now());
    const list = await engine.app.inject('/_local/api/budgets');
    expect(list.json()).toMatchObject({
      count: 1,
      budgets: [{ user_id: 'alice', policy: 'default', limit_usd: 0.01, granted_usd: 0, spent_usd: 0.004, remaining_usd: 0.006, state: 'ok', grants: [] }],
    });
    const one = (await engine.app.inject('/_local/api/budgets/alice')).json();
    expect(Object.keys(one)).toEqual(
      expect.arrayContaining(['user_id', 'policy', 'period_start', 'period_end', 'limit_usd', 'granted_usd', 'spent_usd', 'remaining_usd', 'state', 'grants']),
    );
    // A user with a policy and no spend yet has a fresh record; a user no policy limits does not.
    expect((await engine.app.inject('/_local/api/budgets/bob')).json()).toMatchObject({ user_id: 'bob', spent_usd: 0, state: 'ok' });
  });

  it('serves and grants to a user whose id is long (256 characters, percent-encoded), not only short ones', async () => {
    const user = `${'é'.repeat(100)}@${'x'.repeat(150)}.example`.slice(0, 256);
    engine.budgets.charge(user, 0.004, Date.now());
    const path = `/_local/api/budgets/${encodeURIComponent(user)}`;
    expect((await engine.app.inject(path)).json()).toMatchObject({ user_id: user, spent_usd: 0.004 });
    expect((await post(`${path}/grants`, { amount_usd: 1 })).statusCode).toBe(201);
    // A grant beyond 100,000,000 USD is refused where it enters, naming the bound.
    const huge = await post(`${path}/grants`, { amount_usd: 922_337_204 });
    expect(huge.statusCode).toBe(400);
    expect(huge.json()).toMatchObject({ error: { message: expect.stringContaining('at most 100000000 USD') } });
  });

  it('POST …/grants adds a grant (201) that the next call may spend', async () => {
    engine.budgets.charge('alice', 0.01, Date.now());
    expect(engine.budgets.refusal('alice', Date.now())).not.toBeNull();
    const created = await post('/_local/api/budgets/alice/grants', { amount_usd: 0.05, reason: 'launch week', expires_at: '2099-01-01T00:00:00Z' });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ id: expect.any(String), amount_usd: 0.05, remaining_usd: 0.05, reason: 'launch week', expires_at: '2099-01-01T00:00:00.000Z' });
    expect(engine.budgets.refusal('alice', Date.now())).toBeNull();
    expect((await engine.app.inject('/_local/api/budgets/alice')).json()).toMatchObject({ granted_usd: 0.05, remaining_usd: 0.05, state: 'warning' });
  });

  it.each([
    [{}, 400, "body must have required property 'amount_usd'"],
    [{ amount_usd: -1 }, 400, 'amount_usd must be a non-negative amount of USD'],
    [{ amount_usd: '0' }, 400, 'amount_usd must be more than 0 USD'],
    [{ amount_usd: 1, expires_at: 'tomorrow' }, 400, 'expires_at must be an RFC 3339 timestamp'],
    [{ amount_usd: 1, expires_at: '2001-01-01T00:00:00Z' }, 400, 'expires_at must be in the future'],
    [{ amount_usd: 1, note: 'x' }, 400, 'note is not a known field (expected one of: amount_usd, reason, expires_at)'],
    ['{"amount_usd": 1, "amount_usd": 2}', 400, 'amount_usd'],
  ])('refuses grant %j with a clear error and stores nothing', async (body, status, message) => {
    const res = await post('/_local/api/budgets/alice/grants', body);
    expect(res.statusCode).toBe(status);
    expect(res.json().error.message).toContain(message);
    expect((await engine.app.inject('/_local/api/budgets/alice')).json().grants).toEqual([]);
  });

  it('a grant for a user no policy limits is a 404', async () => {
    const store = new ConfigStore(parseRuntimeConfigPatch({ storage: { kind: 'memory' }, budgets: { policies: [{ name: 'p', users: ['alice'], limitUsd: 1 }] } }));
    const other = await buildEngine({ store, logger: pino({ level: 'silent' }) });
    const res = await other.app.inject({ method: 'POST', url: '/_local/api/budgets/carol/grants', headers: { 'content-type': 'application/json' }, payload: '{"amount_usd":1}' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('budget_not_found');
    await other.shutdown(0);
  });

  it('POST /_local/api/config with budgets takes effect at once; the ledger and the unreachable rule are refused', async () => {
    engine.budgets.charge('alice', 0.004, Date.now());
    const res = await post('/_local/api/config', { budgets: { policies: [{ name: 'default', limitUsd: '0.004' }] } });
    expect(res.statusCode).toBe(200);
    expect(engine.budgets.refusal('alice', Date.now())).toMatchObject({ limitUsd: 0.004 });
    const bad = await post('/_local/api/config', { budgets: { ledger: { kind: 'memory' } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toBe('budgets.ledger is read when the proxy starts: set it in the config file');
    const rule = await post('/_local/api/config', { budgets: { unreachable: 'closed' } });
    expect(rule.statusCode).toBe(400);
    expect(rule.json().error.message).toBe('budgets.unreachable is read when the proxy starts: set it in the config file');
    const invalid = await post('/_local/api/config', { budgets: { policies: [{ name: 'x', limitUsd: 1, period: 'fortnight' }] } });
    expect(invalid.json().error.message).toContain('budgets.policies[0].period must be one of day, week, month');
    expect(engine.budgets.refusal('alice', Date.now())).toMatchObject({ limitUsd: 0.004 }); // unchanged
  });
});
