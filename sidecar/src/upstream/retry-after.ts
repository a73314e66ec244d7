// How long a provider asks a rate-limited caller to wait: `retry-after-ms` (OpenAI), else `Retry-After` in
// seconds or as an HTTP date (RFC 9110). Undefined when the answer names no wait, or one that is not a wait.
// A route's endpoint (upstream-client.ts) and an alias's target (fallback/alias-call.ts) that answered 429 are
// both cooled down until coolDownUntil.

import { headerValue } from '../../../contracts/header-value.ts';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** A wait past this is taken as this: a provider's cool-down is never a reason to shelve a target for hours. */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

function retryAfterMs(headers: Headers, now: number): number | undefined {
  const ms = headerValue(headers, 'retry-after-ms');
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.min(Number(ms), MAX_RETRY_AFTER_MS);
  const value = headerValue(headers, 'retry-after')?.trim();
  if (value === undefined || value === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

/** A 429 without a wait it names cools its endpoint or target down this long. */
const DEFAULT_COOL_DOWN_MS = 5_000;

/** When an endpoint or alias target that answered 429 with these headers may be tried again (epoch ms). */
export function coolDownUntil(headers: Headers, now: number): number {
  return now + (retryAfterMs(headers, now) ?? DEFAULT_COOL_DOWN_MS);
}
