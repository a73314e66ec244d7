// The `rateLimits` of a budget policy (config file, config API, BudgetPolicy): requests per minute, tokens per
// minute (input + output) and calls in flight, per user the policy matches or for its team, workload or
// namespace as a whole (ADR 1309, 1313). Every bound is a whole number above 0 and at most its maximum, checked
// by the one parser every source goes through.

import { ConfigError } from './config-error.ts';

export interface RateLimitsConfig {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  concurrent?: number;
}

export const MAX_REQUESTS_PER_MINUTE = 1_000_000;
export const MAX_TOKENS_PER_MINUTE = 1_000_000_000;
export const MAX_CONCURRENT_CALLS = 10_000;

const RATE_LIMIT_MAXIMA: Readonly<Record<keyof RateLimitsConfig, number>> = {
  requestsPerMinute: MAX_REQUESTS_PER_MINUTE,
  tokensPerMinute: MAX_TOKENS_PER_MINUTE,
  concurrent: MAX_CONCURRENT_CALLS,
};

/** A policy's rate limits; at least one must be set (an empty object limits nothing and is a mistake). */
export function parseRateLimits(input: unknown, field: string): RateLimitsConfig {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ConfigError(field, 'must be an object');
  const v = input as Record<string, unknown>;
  const names = Object.keys(RATE_LIMIT_MAXIMA) as (keyof RateLimitsConfig)[];
  const out: RateLimitsConfig = {};
  for (const key of Object.keys(v)) {
    if (!(names as string[]).includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${names.join(', ')})`);
  }
  for (const name of names) {
    const value = v[name];
    if (value === undefined) continue;
    const max = RATE_LIMIT_MAXIMA[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw new ConfigError(`${field}.${name}`, `must be a whole number from 1 to ${max} (got ${JSON.stringify(value)})`);
    }
    out[name] = value;
  }
  if (Object.keys(out).length === 0) throw new ConfigError(field, `must set at least one of ${names.join(', ')}`);
  return out;
}
