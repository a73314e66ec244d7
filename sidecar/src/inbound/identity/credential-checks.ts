// The checks a strategy runs on one credential, shared by the strategies of one request: an ID token goes to
// the verifier of its `iss`, an opaque token to tokeninfo, and each result is kept for the rest of the request
// so that a token two strategies look at (Authorization, under IAP and then on its own) is verified once.

import { bearerToken, peekJwt } from './bearer-token.ts';
import type { AccessTokens } from './access-tokens.ts';
import { identityFromClaims, TokenRejected, type ClaimRules, type Claims, type Identity, type StrategyName } from './identity.ts';
import type { IdTokenVerifier } from './jwks-issuer.ts';
import { tokenKey, type VerifiedTokenCache } from './verified-token-cache.ts';

export interface Verifiers {
  idTokens: readonly IdTokenVerifier[];
  accessTokens: AccessTokens | null;
  rules: ClaimRules;
  /** ID tokens verified before, until their exp (at most ID_TOKEN_CACHE_MS). */
  verifiedIdTokens: VerifiedTokenCache;
}

/**
 * How long a verified ID token is taken on trust before its signature is checked again: no longer than a key
 * set is cached, so a key the issuer withdraws stops working about as soon as it would without this cache.
 */
export const ID_TOKEN_CACHE_MS = 5 * 60_000;

/** What a verifier vouched for: the claims, and who issued them. */
export interface VerifiedClaims {
  claims: Claims;
  issuer: string;
}

export class CredentialChecks {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly rules: ClaimRules;
  readonly #verifiers: Verifiers;
  #memo: Map<string, Promise<VerifiedClaims>> | null = null;

  constructor(verifiers: Verifiers, headers: Readonly<Record<string, string | string[] | undefined>>) {
    this.#verifiers = verifiers;
    this.rules = verifiers.rules;
    this.headers = headers;
  }

  /** `Bearer <token>` of a header; null when absent (a malformed header throws). */
  bearer(header: string, name: string): string | null {
    return bearerToken(this.headers[header], name);
  }

  get acceptsIdTokens(): boolean {
    return this.#verifiers.idTokens.length > 0;
  }

  get acceptsAccessTokens(): boolean {
    return this.#verifiers.accessTokens !== null;
  }

  /** A JWT is checked as an ID token; anything else as an access token. */
  anyToken(token: string, strategy: StrategyName): Promise<Identity> {
    return peekJwt(token) ? this.idToken(token, strategy) : this.accessToken(token, strategy);
  }

  async idToken(token: string, strategy: StrategyName): Promise<Identity> {
    const { claims, issuer } = await this.idTokenClaims(token);
    return identityFromClaims(claims, this.rules, strategy, issuer);
  }

  async accessToken(token: string, strategy: StrategyName): Promise<Identity> {
    const { claims, issuer } = await this.accessTokenClaims(token);
    return identityFromClaims(claims, this.rules, strategy, issuer);
  }

  idTokenClaims(token: string): Promise<VerifiedClaims> {
    return this.#once(`id:${token}`, async () => {
      const key = tokenKey(token);
      const cache = this.#verifiers.verifiedIdTokens;
      const cached = cache.get(key);
      if (cached) return cached;
      const peeked = peekJwt(token);
      if (!peeked) throw new TokenRejected('malformed_token', 'the token is not a JWT');
      const iss = peeked.payload.iss;
      const verifier = typeof iss === 'string' ? this.#verifiers.idTokens.find((v) => v.issuers.includes(iss)) : undefined;
      if (!verifier) throw new TokenRejected('unknown_issuer', 'the token comes from an issuer this server does not trust (server.auth.oidc)');
      const verified = { claims: await verifier.verify(token, peeked), issuer: iss as string };
      cache.set(key, verified, Math.min((verified.claims.exp as number) * 1000, Date.now() + ID_TOKEN_CACHE_MS));
      return verified;
    });
  }

  accessTokenClaims(token: string): Promise<VerifiedClaims> {
    return this.#once(`at:${token}`, async () => {
      const tokens = this.#verifiers.accessTokens;
      if (!tokens) throw new TokenRejected('malformed_token', 'the token is not a JWT ID token, and this server does not check access tokens (server.auth.accessTokens)');
      return { claims: await tokens.verify(token), issuer: tokens.issuer };
    });
  }

  #once(key: string, check: () => Promise<VerifiedClaims>): Promise<VerifiedClaims> {
    const memo = (this.#memo ??= new Map<string, Promise<VerifiedClaims>>());
    let result = memo.get(key);
    if (!result) {
      result = check();
      memo.set(key, result);
    }
    return result;
  }
}
