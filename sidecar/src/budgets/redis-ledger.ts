// The ledger on a Redis-compatible store (Redis 7, Valkey), for several engines sharing one ledger (ADR 1310).
//
//   {<prefix>}:users             sorted set of every user with spend or grants (score 0: ordered by id)
//   {<prefix>}:u:<user>          hash: user_id, policy, and per period P (epoch ms) spent:P, limit_used:P, alerted:P
//   {<prefix>}:g:<user>          hash: grant id → JSON {amount, reason, created_at, expires_at}
//   {<prefix>}:gu:<user>         hash: grant id → units used
//   {<prefix>}:b:<batch id>      marker of a written batch (expires after MARKER_TTL_S)
//   {<prefix>}:a:<user>:<P>:<t>  marker of a logged alert
//
// Every key carries the same hash tag, so a batch touching several users is one script on one slot, atomic on
// a single server and on Redis Cluster alike. The script writes the marker and the increments together: a batch
// retried after a timeout whose first attempt had landed finds its marker and adds nothing.
//
// Amounts travel as decimal strings and are added by HINCRBY, never through a Lua number (a double): sums stay
// exact to the unit. They stop at MAX_SPEND_UNITS as every sum of money does; the client passes what room each
// amount has below it, and the script compares decimal strings, so HINCRBY never overflows half-way through.

import type { Redis } from 'ioredis';
import type { BudgetRedisConfig } from '../../../contracts/budget-config.ts';
import { MAX_SPEND_UNITS } from '../../../contracts/money.ts';
import { openRedisClient, storeError } from '../../../contracts/redis-connection.ts';
import type { Grant, PeriodUsage } from './budget-record.ts';
import { type BudgetLedger, type DeductionBatch, type LedgerUser, refuseInvalidSpend } from './ledger.ts';

/** Markers outlive any retry by far (a batch is retried for as long as the store is down, every 30 s at most). */
const MARKER_TTL_S = 7 * 86_400;
/** An alert's marker outlives the longest period (a month). */
const ALERT_TTL_S = 45 * 86_400;

// Whole or not at all: every key is checked before anything is written, so a wrong type written by hand fails
// the batch as a whole instead of half-way through.
const DEDUCT = `
local function above(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local function add(key, field, amount, room)
  local current = redis.call('HGET', key, field) or '0'
  if above(current, room) then redis.call('HSET', key, field, ARGV[2]) else redis.call('HINCRBY', key, field, amount) end
end
for i = 2, #KEYS do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= (i == 2 and 'zset' or 'hash') then return redis.error_reply('key ' .. KEYS[i] .. ' holds a ' .. t) end
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
local a = 3
for k = 3, #KEYS, 3 do
  local user, grants, used = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local id, period = ARGV[a], ARGV[a + 2]
  redis.call('ZADD', KEYS[2], 0, id)
  redis.call('HSET', user, 'user_id', id, 'policy', ARGV[a + 1])
  add(user, 'spent:' .. period, ARGV[a + 3], ARGV[a + 4])
  add(user, 'limit_used:' .. period, ARGV[a + 5], ARGV[a + 6])
  local alerted = tonumber(ARGV[a + 7])
  if alerted > tonumber(redis.call('HGET', user, 'alerted:' .. period) or '0') then redis.call('HSET', user, 'alerted:' .. period, alerted) end
  local parts = tonumber(ARGV[a + 8])
  a = a + 9
  for p = 1, parts do
    if redis.call('HEXISTS', grants, ARGV[a]) == 1 then add(used, ARGV[a], ARGV[a + 1], ARGV[a + 2]) end
    a = a + 3
  end
end
return 1
`;

interface DeductCommand {
  tollgateDeduct(...args: (string | number)[]): Promise<number>;
}

export interface RedisLedgerOptions extends BudgetRedisConfig {
  /** Extra client options (tests: a shorter timeout). */
  commandTimeoutMs?: number;
}

function room(units: bigint): string {
  return (MAX_SPEND_UNITS - units).toString();
}

function int(value: string | undefined): bigint {
  return value !== undefined && /^\d+$/.test(value) ? BigInt(value) : 0n;
}

export class RedisLedger implements BudgetLedger {
  readonly kind = 'redis' as const;
  readonly #redis: Redis & DeductCommand;
  readonly #tag: string;
  readonly #config: RedisLedgerOptions;

  constructor(opts: RedisLedgerOptions) {
    this.#tag = `{${opts.keyPrefix}}`;
    this.#config = opts;
    this.#redis = openRedisClient(opts, opts.commandTimeoutMs) as Redis & DeductCommand;
    // EVALSHA, with the body sent again when the server answers NOSCRIPT (a restart emptied its script cache).
    this.#redis.defineCommand('tollgateDeduct', { lua: DEDUCT });
  }

  #key(kind: string, ...parts: (string | number)[]): string {
    return [this.#tag, kind, ...parts].join(':');
  }

  /** Runs a command, its error naming the store when it cannot be reached. */
  async #command<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw storeError(this.#redis, this.#config.url, error);
    }
  }

  async load(since: number): Promise<LedgerUser[]> {
    const ids = await this.#command(() => this.#redis.zrange(this.#key('users'), '0', '-1'));
    const users: LedgerUser[] = [];
    for (let i = 0; i < ids.length; i += 500) users.push(...(await this.#read(ids.slice(i, i + 500), since)));
    return users;
  }

  async loadUser(userId: string, since: number): Promise<LedgerUser | undefined> {
    const [user] = await this.#read([userId], since);
    return user!.periods.size === 0 && user!.grants.length === 0 ? undefined : user;
  }

  async #read(ids: string[], since: number): Promise<LedgerUser[]> {
    const pipeline = this.#redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.#key('u', id)).hgetall(this.#key('g', id)).hgetall(this.#key('gu', id));
    const replies = (await this.#command(() => pipeline.exec())) ?? [];
    return ids.map((userId, i) => {
      const [usage, grants, used] = [0, 1, 2].map((j) => {
        const [error, value] = replies[i * 3 + j]!;
        if (error) throw error;
        return value as Record<string, string>;
      });
      return { userId, periods: periodsFrom(usage!, since), grants: grantsFrom(grants!, used!) };
    });
  }

  async deduct(batch: DeductionBatch): Promise<void> {
    refuseInvalidSpend(batch);
    const keys = [this.#key('b', batch.id), this.#key('users')];
    const args: (string | number)[] = [MARKER_TTL_S, MAX_SPEND_UNITS.toString()];
    for (const d of batch.deltas) {
      keys.push(this.#key('u', d.userId), this.#key('g', d.userId), this.#key('gu', d.userId));
      args.push(d.userId, d.policy, d.periodStart, d.split.amount.toString(), room(d.split.amount));
      args.push(d.split.limitPart.toString(), room(d.split.limitPart), d.alerted, d.split.grantParts.length);
      for (const p of d.split.grantParts) args.push(p.grantId, p.amount.toString(), room(p.amount));
    }
    await this.#command(() => this.#redis.tollgateDeduct(keys.length, ...keys, ...args));
  }

  async addGrant(userId: string, grant: Grant): Promise<void> {
    const json = JSON.stringify({
      amount: grant.amount.toString(),
      reason: grant.reason,
      created_at: new Date(grant.createdAt).toISOString(),
      expires_at: grant.expiresAt === null ? null : new Date(grant.expiresAt).toISOString(),
    });
    const multi = this.#redis
      .multi()
      .zadd(this.#key('users'), 0, userId)
      .hsetnx(this.#key('g', userId), grant.id, json)
      .hset(this.#key('gu', userId), grant.id, grant.used.toString());
    const replies = await this.#command(() => multi.exec());
    const failed = replies?.find(([error]) => error !== null);
    if (failed) throw failed[0]!;
  }

  async claimAlert(userId: string, periodStart: number, threshold: number): Promise<boolean> {
    const set = await this.#command(() => this.#redis.set(this.#key('a', userId, periodStart, threshold), '1', 'EX', ALERT_TTL_S, 'NX'));
    return set === 'OK';
  }

  async close(): Promise<void> {
    try {
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect();
    }
  }
}

function periodsFrom(hash: Record<string, string>, since: number): Map<number, PeriodUsage> {
  const periods = new Map<number, PeriodUsage>();
  for (const [field, value] of Object.entries(hash)) {
    const m = /^(spent|limit_used|alerted):(\d+)$/.exec(field);
    if (!m) continue;
    const start = Number(m[2]);
    if (!(start >= since)) continue;
    const usage = periods.get(start) ?? { spent: 0n, limitUsed: 0n, alerted: 0 };
    if (m[1] === 'spent') usage.spent = int(value);
    else if (m[1] === 'limit_used') usage.limitUsed = int(value);
    else usage.alerted = Number(int(value));
    periods.set(start, usage);
  }
  return periods;
}

function grantsFrom(grants: Record<string, string>, used: Record<string, string>): Grant[] {
  return Object.entries(grants).map(([id, json]) => {
    const g = JSON.parse(json) as { amount: string; reason: string | null; created_at: string; expires_at: string | null };
    return {
      id,
      amount: int(g.amount),
      used: int(used[id]),
      reason: g.reason,
      createdAt: Date.parse(g.created_at),
      expiresAt: g.expires_at === null ? null : Date.parse(g.expires_at),
    };
  });
}
