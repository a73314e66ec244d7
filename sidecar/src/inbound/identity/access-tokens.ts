// Opaque OAuth 2.0 access tokens, checked at Google's tokeninfo endpoint (or one that answers in its shape)
// with google-auth-library's OAuth2Client.getTokenInfo. A good answer is kept for accessTokens.cacheSeconds
// but never past the token's own expiry, keyed by the token's SHA-256 (the token itself is not kept), and
// one lookup serves every request that arrives with the same token while it is in flight. The cache is
// bounded: past MAX_ENTRIES the oldest entry goes.

import { createHash } from 'node:crypto';
import { OAuth2Client } from 'google-auth-library';
import type { AccessTokenConfig } from '../../config/server-auth-config.ts';
import { TokenRejected, type Claims } from './identity.ts';

const MAX_ENTRIES = 10_000;

interface CachedAnswer {
  claims: Claims;
  /** ms since the epoch */
  expiresAt: number;
}

function tokenKey(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown; response?: { status?: unknown } } | null)?.status ?? (error as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : undefined;
}

export class AccessTokens {
  readonly issuer: string;
  readonly #client: OAuth2Client;
  readonly #config: AccessTokenConfig;
  readonly #now: () => number;
  readonly #cache = new Map<string, CachedAnswer>();
  readonly #inFlight = new Map<string, Promise<CachedAnswer>>();
  #lookups = 0;

  constructor(config: AccessTokenConfig, now: () => number = () => Date.now()) {
    this.#config = config;
    this.issuer = config.tokeninfoUrl;
    this.#now = now;
    this.#client = new OAuth2Client({ endpoints: { tokenInfoUrl: config.tokeninfoUrl } });
  }

  /** Lookups sent to the tokeninfo endpoint so far (the cache's effect, for the runtime health view). */
  get lookups(): number {
    return this.#lookups;
  }

  async verify(token: string): Promise<Claims> {
    const key = tokenKey(token);
    const cached = this.#cache.get(key);
    if (cached) {
      if (this.#now() < cached.expiresAt) return cached.claims;
      this.#cache.delete(key);
    }
    let pending = this.#inFlight.get(key);
    if (!pending) {
      pending = this.#lookup(token).finally(() => this.#inFlight.delete(key));
      this.#inFlight.set(key, pending);
    }
    const answer = await pending;
    return answer.claims;
  }

  async #lookup(token: string): Promise<CachedAnswer> {
    this.#lookups++;
    let info;
    try {
      info = await this.#client.getTokenInfo(token);
    } catch (error) {
      const status = statusOf(error);
      if (status !== undefined && status >= 400 && status < 500) {
        throw new TokenRejected('inactive_token', 'the access token is invalid, expired or revoked (tokeninfo refused it)');
      }
      throw new TokenRejected('identity_provider_unavailable', `the tokeninfo endpoint could not be asked${status !== undefined ? ` (HTTP ${status})` : ''}`);
    }
    const now = this.#now();
    if (!Number.isFinite(info.expiry_date) || info.expiry_date <= now) throw new TokenRejected('expired', 'the access token has expired; get a new one');
    const audiences = this.#config.audiences;
    if (audiences.length > 0 && !audiences.includes(info.aud) && !(info.azp !== undefined && audiences.includes(info.azp))) {
      throw new TokenRejected('wrong_audience', 'the access token was issued to an OAuth client this server does not accept (server.auth.accessTokens.audiences)');
    }
    const answer: CachedAnswer = { claims: info as unknown as Claims, expiresAt: Math.min(now + this.#config.cacheSeconds * 1000, info.expiry_date) };
    if (this.#config.cacheSeconds > 0) {
      if (this.#cache.size >= MAX_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
      this.#cache.set(tokenKey(token), answer);
    }
    return answer;
  }
}
