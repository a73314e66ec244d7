// Opaque OAuth 2.0 access tokens, checked at Google's tokeninfo endpoint (or one that answers in its shape)
// with google-auth-library's OAuth2Client.getTokenInfo. A good answer is kept for accessTokens.cacheSeconds
// but never past the token's own expiry, and one lookup serves every request that arrives with the same
// token while it is in flight. A refusal is kept too (REFUSAL_TTL_MS), so a caller repeating a made-up or
// revoked token costs one lookup a minute, not one per request. Only 400 and 401 from tokeninfo mean the
// token is bad; anything else (429 throttling, 5xx) says nothing about it and is a 503 for the caller.
// Lookups themselves are bounded (lookup-bounds.ts): made-up tokens are each new, so the refusal cache alone
// would let a flood of them cost one lookup each. Past the bounds, a token no cache knows is refused with 503
// token_lookups_throttled and Retry-After, and is not remembered as refused.

import { OAuth2Client } from 'google-auth-library';
import type { AccessTokenConfig } from '../../../../contracts/server-auth-config.ts';
import { TokenRejected, type Claims } from './identity.ts';
import { LookupBounds } from './lookup-bounds.ts';
import { tokenKey, VerifiedTokenCache } from './verified-token-cache.ts';

function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown; response?: { status?: unknown } } | null)?.status ?? (error as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : undefined;
}

/** How long a refused token is refused without asking again (a revoked token stays refused anyway). */
const REFUSAL_TTL_MS = 60_000;
const MAX_REFUSALS = 10_000;
const TOKEN_REFUSED_STATUSES = new Set([400, 401]);

export class AccessTokens {
  readonly issuer: string;
  readonly #client: OAuth2Client;
  readonly #config: AccessTokenConfig;
  readonly #now: () => number;
  readonly #cache: VerifiedTokenCache;
  readonly #inFlight = new Map<string, Promise<Claims>>();
  readonly #refused = new Map<string, { rejection: TokenRejected; until: number }>();
  readonly #bounds: LookupBounds;
  #lookups = 0;

  constructor(config: AccessTokenConfig, now: () => number = () => Date.now()) {
    this.#config = config;
    this.issuer = config.tokeninfoUrl;
    this.#now = now;
    this.#cache = new VerifiedTokenCache(now);
    this.#bounds = new LookupBounds({ perSecond: config.lookupsPerSecond, burst: config.lookupBurst, concurrent: config.concurrentLookups }, now);
    this.#client = new OAuth2Client({ endpoints: { tokenInfoUrl: config.tokeninfoUrl } });
  }

  /** Lookups sent to the tokeninfo endpoint so far (the cache's effect, for the runtime health view). */
  get lookups(): number {
    return this.#lookups;
  }

  /** Requests refused because a lookup would have passed the bounds (tollgate_tokeninfo_lookups_throttled_total). */
  get throttled(): number {
    return this.#bounds.refused;
  }

  async verify(token: string): Promise<Claims> {
    const key = tokenKey(token);
    const cached = this.#cache.get(key);
    if (cached) return cached.claims;
    const refused = this.#refused.get(key);
    if (refused !== undefined) {
      if (this.#now() < refused.until) throw refused.rejection;
      this.#refused.delete(key);
    }
    let pending = this.#inFlight.get(key);
    if (!pending) {
      const slot = this.#bounds.take();
      if (slot.retryAfterSeconds !== undefined) {
        throw new TokenRejected(
          'token_lookups_throttled',
          'too many access tokens this server has not seen are being checked at the tokeninfo endpoint right now (server.auth.accessTokens.lookupsPerSecond); try again',
          slot.retryAfterSeconds,
        );
      }
      pending = this.#lookup(token, key).finally(() => {
        slot.release();
        this.#inFlight.delete(key);
      });
      this.#inFlight.set(key, pending);
    }
    return pending;
  }

  async #lookup(token: string, key: string): Promise<Claims> {
    try {
      return await this.#ask(token, key);
    } catch (error) {
      if (error instanceof TokenRejected && error.reason !== 'identity_provider_unavailable') this.#remember(key, error);
      throw error;
    }
  }

  #remember(key: string, rejection: TokenRejected): void {
    if (this.#refused.size >= MAX_REFUSALS) this.#refused.delete(this.#refused.keys().next().value!);
    this.#refused.set(key, { rejection, until: this.#now() + REFUSAL_TTL_MS });
  }

  async #ask(token: string, key: string): Promise<Claims> {
    this.#lookups++;
    let info;
    try {
      info = await this.#client.getTokenInfo(token);
    } catch (error) {
      const status = statusOf(error);
      if (status !== undefined && TOKEN_REFUSED_STATUSES.has(status)) {
        throw new TokenRejected('inactive_token', 'the access token is invalid, expired or revoked (tokeninfo refused it)');
      }
      throw new TokenRejected('identity_provider_unavailable', `the tokeninfo endpoint could not be asked${status !== undefined ? ` (HTTP ${status})` : ''}`);
    }
    const now = this.#now();
    if (!Number.isFinite(info.expiry_date) || info.expiry_date <= now) throw new TokenRejected('expired', 'the access token has expired; get a new one');
    const audiences = this.#config.audiences;
    if (!audiences.includes(info.aud) && !(info.azp !== undefined && audiences.includes(info.azp))) {
      throw new TokenRejected('wrong_audience', 'the access token was issued to an OAuth client this server does not accept (server.auth.accessTokens.audiences)');
    }
    const claims = info as unknown as Claims;
    this.#cache.set(key, { claims, issuer: this.issuer }, Math.min(now + this.#config.cacheSeconds * 1000, info.expiry_date));
    return claims;
  }
}
