// Rate-limit windows shared by every engine on one Redis-compatible store (ADR 1309's GCRA, ADR 1310's store):
// one round trip per admission, a script that checks every dimension of every level and counts the call in all
// or none.
//
//   {<prefix>:rate}:<subject>   hash: rt (requests TAT), tt (tokens TAT), n (calls in flight); one key per
//                               subject (a user id or a group key: @team:<name>, …), every one under the same
//                               hash tag, so one script can count a call at every level it falls under (ADR 1313)
//
// Times are the callers' epoch ms (engines' clocks agree to NTP's milliseconds, far below a window's minute). A
// TAT is stored with %.17g, every digit of the double: a token under a high tokens-per-minute limit moves it by
// microseconds, which the Lua default (%.14g, 0.1 ms at today's epoch) would round away.
//
// A store that cannot be reached follows budgets.unreachable (ADR 1311): open, the subject is admitted by windows
// in this process meanwhile (each engine then counts its own calls); closed, the same for the ledger's grace,
// then the call is refused (RateStoreUnreachable, answered 503). Once a command failed, calls do not wait on the
// store again until its client has reconnected: an outage costs no call a timeout. Logged once per outage.

import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { type BudgetRedisConfig, type BudgetUnreachableRule, UNREACHABLE_GRACE_MS } from '../../../contracts/budget-config.ts';
import { MemoryRateWindows } from './memory-rate-windows.ts';
import { openRedisClient } from '../../../contracts/redis-connection.ts';
import {
  admissionOf,
  RATE_WINDOW_MS,
  type RateAdmission,
  type RateSubject,
  type RateWindows,
  RATE_EPSILON_MS,
  type RateStoreHealth,
  RateStoreUnreachable,
  type WindowsBefore,
} from './rate-windows.ts';

/** A subject's key outlives its fullest window by this much, so a call in flight keeps its slot counted. */
const IDLE_TTL_MS = 15 * 60_000;

// KEYS: one per level, innermost first. ARGV: now, reserved tokens, then per level its requests per minute,
// tokens per minute and concurrent (0: not limited). Checks every level before it counts the call at any.
// Returns the index of the first level that refused (0: counted at all) and per level the state before the
// call: rt, tt (%.17g strings), n.
const ADMIT = `
local now, tokens = tonumber(ARGV[1]), tonumber(ARGV[2])
local w, eps = ${RATE_WINDOW_MS}, ${RATE_EPSILON_MS}
local f = function(x) return string.format('%.17g', x) end
local out, after, refused = {0}, {}, 0
for i, key in ipairs(KEYS) do
  local rpm, tpm, conc = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local s = redis.call('HMGET', key, 'rt', 'tt', 'n')
  local rt, tt, n = tonumber(s[1]) or now, tonumber(s[2]) or now, tonumber(s[3]) or 0
  local nrt, ntt = rt, tt
  if rpm > 0 then nrt = math.max(rt, now) + w / rpm end
  if tpm > 0 then ntt = math.max(tt, now) + tokens * w / tpm end
  local fits = (rpm == 0 or nrt - now - w <= eps) and (tpm == 0 or ntt - now - w <= eps) and (conc == 0 or n < conc)
  if not fits and refused == 0 then refused = i end
  after[i] = {nrt, ntt}
  out[#out + 1] = f(rt)
  out[#out + 1] = f(tt)
  out[#out + 1] = n
end
if refused == 0 then
  for i, key in ipairs(KEYS) do
    local rpm, tpm, conc = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
    local nrt, ntt = after[i][1], after[i][2]
    if rpm > 0 then redis.call('HSET', key, 'rt', f(nrt)) end
    if tpm > 0 then redis.call('HSET', key, 'tt', f(ntt)) end
    if conc > 0 then redis.call('HINCRBY', key, 'n', 1) end
    redis.call('PEXPIRE', key, math.ceil(math.max(nrt, ntt, now) - now) + ${IDLE_TTL_MS})
  end
end
out[1] = refused
return out
`;

// KEYS: the levels the call was admitted at. ARGV: now, used − reserved tokens (or '' unknown), then per level
// its tokens per minute and concurrent (0: not limited).
const SETTLE = `
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local tpm, conc = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  if redis.call('EXISTS', key) == 1 then
    if conc > 0 and (tonumber(redis.call('HGET', key, 'n')) or 0) > 0 then redis.call('HINCRBY', key, 'n', -1) end
    if tpm > 0 and ARGV[2] ~= '' then
      local tt = (tonumber(redis.call('HGET', key, 'tt')) or now) + tonumber(ARGV[2]) * ${RATE_WINDOW_MS} / tpm
      redis.call('HSET', key, 'tt', string.format('%.17g', math.max(tt, now)))
    end
  end
end
return 1
`;

/** Scripts over a variable number of keys: the first argument is how many keys follow. */
interface RateCommands {
  tollgateRateAdmit(...args: (string | number)[]): Promise<(number | string)[]>;
  tollgateRateSettle(...args: (string | number)[]): Promise<number>;
}

export interface RedisRateWindowsOptions extends BudgetRedisConfig {
  commandTimeoutMs?: number;
  /** budgets.unreachable; absent: open. */
  unreachable?: BudgetUnreachableRule;
  /** Where an outage and the store's return are logged. */
  logger?: Logger;
}

export class RedisRateWindows implements RateWindows {
  readonly #redis: Redis & RateCommands;
  readonly #prefix: string;
  readonly #store: string;
  readonly #rule: BudgetUnreachableRule;
  readonly #logger: Logger | undefined;
  /** Admits while the store cannot be reached; the calls it admitted (`countedHere`) are settled there too. */
  readonly #fallback = new MemoryRateWindows();
  /** When the store stopped answering (the caller's clock); null while it answers. */
  #downSince: number | null = null;
  #downCause = '';

  constructor(config: RedisRateWindowsOptions) {
    this.#prefix = config.keyPrefix;
    this.#store = `redis at ${new URL(config.url).host}`;
    this.#rule = config.unreachable ?? 'open';
    this.#logger = config.logger;
    this.#redis = openRedisClient(config, config.commandTimeoutMs) as Redis & RateCommands;
    this.#redis.defineCommand('tollgateRateAdmit', { lua: ADMIT });
    this.#redis.defineCommand('tollgateRateSettle', { lua: SETTLE });
  }

  /** ADR 1313: one hash tag for every rate key of a prefix, so a call's levels are one slot on Redis Cluster. */
  #key(subject: string): string {
    return `{${this.#prefix}:rate}:${subject}`;
  }

  get store(): RateStoreHealth {
    return { store: this.#store, unreachableSince: this.#downSince === null ? null : new Date(this.#downSince).toISOString() };
  }

  async admit(subjects: readonly RateSubject[], reservedTokens: number, now: number): Promise<RateAdmission> {
    const tokens = reservedTokens > 0 ? reservedTokens : 0;
    // During an outage the store is asked again only once its client is connected again.
    if (this.#downSince !== null && this.#redis.status !== 'ready') return this.#admitHere(subjects, tokens, now);
    const args: (string | number)[] = [subjects.length];
    for (const { key } of subjects) args.push(this.#key(key));
    args.push(now, tokens);
    for (const { limits } of subjects) args.push(limits.requestsPerMinute ?? 0, limits.tokensPerMinute ?? 0, limits.concurrent ?? 0);
    let reply: (number | string)[];
    try {
      reply = await this.#redis.tollgateRateAdmit(...args);
    } catch (error) {
      this.#failed(error, now);
      return this.#admitHere(subjects, tokens, now);
    }
    if (this.#downSince !== null) {
      this.#logger?.info({ store: this.#store, down_since: new Date(this.#downSince).toISOString() }, 'rate limits shared through Redis again');
      this.#downSince = null;
    }
    const befores: WindowsBefore[] = subjects.map((_, i) => ({ rt: Number(reply[1 + 3 * i]), tt: Number(reply[2 + 3 * i]), n: Number(reply[3 + 3 * i]) }));
    return admissionOf(befores, subjects, tokens, now, Number(reply[0]) - 1);
  }

  #failed(error: unknown, now: number): void {
    if (this.#downSince !== null) return;
    this.#downSince = now;
    this.#downCause = error instanceof Error ? error.message : String(error);
    this.#logger?.warn(
      { store: this.#store, err: this.#downCause, unreachable: this.#rule },
      'rate-limit store unreachable: counting rate limits in this process until it is back',
    );
  }

  /**
   * The store is down: this process's windows admit, or (closed, past the grace) nothing does. The admission
   * says so (`countedHere`): the call's hold keeps it, and its settlement comes back here, not to the store,
   * whichever call of whichever subject the store answers meanwhile.
   */
  #admitHere(subjects: readonly RateSubject[], tokens: number, now: number): RateAdmission {
    const since = this.#downSince ?? now;
    if (this.#rule === 'closed' && now - since >= UNREACHABLE_GRACE_MS) throw new RateStoreUnreachable(this.#store, since, this.#downCause);
    const admission = this.#fallback.admit(subjects, tokens, now);
    if (admission.refusedBy === null) admission.countedHere = true;
    return admission;
  }

  async settle(subjects: readonly RateSubject[], reservedTokens: number, usedTokens: number | null, now: number, countedHere = false): Promise<void> {
    if (countedHere) {
      this.#fallback.settle(subjects, reservedTokens, usedTokens, now);
      return;
    }
    const args: (string | number)[] = [subjects.length];
    for (const { key } of subjects) args.push(this.#key(key));
    args.push(now, usedTokens === null ? '' : usedTokens - (reservedTokens > 0 ? reservedTokens : 0));
    for (const { limits } of subjects) args.push(limits.tokensPerMinute ?? 0, limits.concurrent ?? 0);
    // Never throws: a settle lost to an outage leaves the reservation standing, and the slot until the key expires.
    await this.#redis.tollgateRateSettle(...args).catch(() => undefined);
  }

  async close(): Promise<void> {
    try {
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect();
    }
  }
}
