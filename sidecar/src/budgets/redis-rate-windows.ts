// Rate-limit windows shared by every engine on one Redis-compatible store (ADR 1309's GCRA, ADR 1310's store):
// one round trip per admission, a script that checks every dimension and counts the call in all or none.
//
//   {<prefix>:rate:<subject>}   hash: rt (requests TAT), tt (tokens TAT), n (calls in flight); one key per
//                               subject, so subjects spread over a Redis Cluster's slots
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
import { openRedisClient } from './redis-client.ts';
import {
  CONCURRENT_RETRY_MS,
  RATE_WINDOW_MS,
  type RateAdmission,
  type RateDimension,
  type RateLimits,
  type RateWindows,
  RATE_EPSILON_MS,
  type RateStoreHealth,
  RateStoreUnreachable,
  rateWindowState,
} from './rate-windows.ts';

/** A subject's key outlives its fullest window by this much, so a call in flight keeps its slot counted. */
const IDLE_TTL_MS = 15 * 60_000;

// ARGV: now, requests per minute, tokens per minute, concurrent (0: not limited), reserved tokens.
// Returns the state before the call ({rt, tt, n} as %.17g strings) and whether it was counted.
const ADMIT = `
local now, rpm, tpm, conc, tokens = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local w, eps = ${RATE_WINDOW_MS}, ${RATE_EPSILON_MS}
local s = redis.call('HMGET', KEYS[1], 'rt', 'tt', 'n')
local rt, tt, n = tonumber(s[1]) or now, tonumber(s[2]) or now, tonumber(s[3]) or 0
local nrt, ntt = rt, tt
if rpm > 0 then nrt = math.max(rt, now) + w / rpm end
if tpm > 0 then ntt = math.max(tt, now) + tokens * w / tpm end
local fits = (rpm == 0 or nrt - now - w <= eps) and (tpm == 0 or ntt - now - w <= eps) and (conc == 0 or n < conc)
local f = function(x) return string.format('%.17g', x) end
if fits then
  if rpm > 0 then redis.call('HSET', KEYS[1], 'rt', f(nrt)) end
  if tpm > 0 then redis.call('HSET', KEYS[1], 'tt', f(ntt)) end
  if conc > 0 then redis.call('HINCRBY', KEYS[1], 'n', 1) end
  redis.call('PEXPIRE', KEYS[1], math.ceil(math.max(nrt, ntt, now) - now) + ${IDLE_TTL_MS})
end
return {fits and 1 or 0, f(rt), f(tt), n}
`;

// ARGV: now, tokens per minute (0: not limited), concurrent (0: not limited), used − reserved tokens (or '' unknown).
const SETTLE = `
local now, tpm, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if conc > 0 and (tonumber(redis.call('HGET', KEYS[1], 'n')) or 0) > 0 then redis.call('HINCRBY', KEYS[1], 'n', -1) end
if tpm > 0 and ARGV[4] ~= '' then
  local tt = (tonumber(redis.call('HGET', KEYS[1], 'tt')) or now) + tonumber(ARGV[4]) * ${RATE_WINDOW_MS} / tpm
  redis.call('HSET', KEYS[1], 'tt', string.format('%.17g', math.max(tt, now)))
end
return 1
`;

interface RateCommands {
  tollgateRateAdmit(key: string, ...args: (string | number)[]): Promise<[number, string, string, number]>;
  tollgateRateSettle(key: string, ...args: (string | number)[]): Promise<number>;
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
  /** Admits while the store cannot be reached; the calls it admitted are settled there too. */
  readonly #fallback = new MemoryRateWindows();
  readonly #admittedHere = new Map<string, number>();
  /** When the store stopped answering (the caller's clock); null while it answers. */
  #downSince: number | null = null;
  #downCause = '';

  constructor(config: RedisRateWindowsOptions) {
    this.#prefix = config.keyPrefix;
    this.#store = `redis at ${new URL(config.url).host}`;
    this.#rule = config.unreachable ?? 'open';
    this.#logger = config.logger;
    this.#redis = openRedisClient(config, config.commandTimeoutMs) as Redis & RateCommands;
    this.#redis.defineCommand('tollgateRateAdmit', { numberOfKeys: 1, lua: ADMIT });
    this.#redis.defineCommand('tollgateRateSettle', { numberOfKeys: 1, lua: SETTLE });
  }

  #key(subject: string): string {
    return `{${this.#prefix}:rate:${subject}}`;
  }

  get store(): RateStoreHealth {
    return { store: this.#store, unreachableSince: this.#downSince === null ? null : new Date(this.#downSince).toISOString() };
  }

  async admit(subject: string, limits: RateLimits, reservedTokens: number, now: number): Promise<RateAdmission> {
    const tokens = reservedTokens > 0 ? reservedTokens : 0;
    // During an outage the store is asked again only once its client is connected again.
    if (this.#downSince !== null && this.#redis.status !== 'ready') return this.#admitHere(subject, limits, tokens, now);
    let reply: [number, string, string, number];
    try {
      reply = await this.#redis.tollgateRateAdmit(this.#key(subject), now, limits.requestsPerMinute ?? 0, limits.tokensPerMinute ?? 0, limits.concurrent ?? 0, tokens);
    } catch (error) {
      this.#failed(error, now);
      return this.#admitHere(subject, limits, tokens, now);
    }
    if (this.#downSince !== null) {
      this.#logger?.info({ store: this.#store, down_since: new Date(this.#downSince).toISOString() }, 'rate limits shared through Redis again');
      this.#downSince = null;
    }
    const [counted, rt, tt, inFlight] = reply;
    return admissionOf(counted === 1, { rt: Number(rt), tt: Number(tt), n: Number(inFlight) }, limits, tokens, now);
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

  /** The store is down: this process's windows admit, or (closed, past the grace) nothing does. */
  #admitHere(subject: string, limits: RateLimits, tokens: number, now: number): RateAdmission {
    const since = this.#downSince ?? now;
    if (this.#rule === 'closed' && now - since >= UNREACHABLE_GRACE_MS) throw new RateStoreUnreachable(this.#store, since, this.#downCause);
    const admission = this.#fallback.admit(subject, limits, tokens, now);
    if (admission.refusedBy === null) this.#admittedHere.set(subject, (this.#admittedHere.get(subject) ?? 0) + 1);
    return admission;
  }

  async settle(subject: string, limits: RateLimits, reservedTokens: number, usedTokens: number | null, now: number): Promise<void> {
    const here = this.#admittedHere.get(subject) ?? 0;
    if (here > 0) {
      if (here === 1) this.#admittedHere.delete(subject);
      else this.#admittedHere.set(subject, here - 1);
      this.#fallback.settle(subject, limits, reservedTokens, usedTokens, now);
      return;
    }
    const delta = usedTokens === null ? '' : usedTokens - (reservedTokens > 0 ? reservedTokens : 0);
    // Never throws: a settle lost to an outage leaves the reservation standing, and the slot until the key expires.
    await this.#redis.tollgateRateSettle(this.#key(subject), now, limits.tokensPerMinute ?? 0, limits.concurrent ?? 0, delta).catch(() => undefined);
  }

  async close(): Promise<void> {
    try {
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect();
    }
  }
}

/** The admission as the memory windows report it, from the state the script saw before the call. */
function admissionOf(counted: boolean, before: { rt: number; tt: number; n: number }, limits: RateLimits, tokens: number, now: number): RateAdmission {
  const rpm = limits.requestsPerMinute;
  const tpm = limits.tokensPerMinute;
  const requestsTat = rpm === undefined ? now : Math.max(before.rt, now) + RATE_WINDOW_MS / rpm;
  const tokensTat = tpm === undefined ? now : Math.max(before.tt, now) + (tokens * RATE_WINDOW_MS) / tpm;
  if (counted) {
    return {
      refusedBy: null,
      retryAfterMs: 0,
      requests: rpm === undefined ? null : rateWindowState(rpm, requestsTat, now),
      tokens: tpm === undefined ? null : rateWindowState(tpm, tokensTat, now),
    };
  }
  const requestsWait = requestsTat - now - RATE_WINDOW_MS;
  const tokensWait = tokensTat - now - RATE_WINDOW_MS;
  const concurrentFull = limits.concurrent !== undefined && before.n >= limits.concurrent;
  let wait = Math.max(requestsWait, tokensWait, concurrentFull ? CONCURRENT_RETRY_MS : 0);
  if (tpm !== undefined && tokens > tpm) wait = Math.max(wait, RATE_WINDOW_MS);
  const refusedBy: RateDimension = requestsWait > RATE_EPSILON_MS ? 'requests' : tokensWait > RATE_EPSILON_MS ? 'tokens' : 'concurrent';
  return {
    refusedBy,
    retryAfterMs: Math.ceil(wait - RATE_EPSILON_MS),
    requests: rpm === undefined ? null : rateWindowState(rpm, before.rt, now),
    tokens: tpm === undefined ? null : rateWindowState(tpm, before.tt, now),
  };
}
