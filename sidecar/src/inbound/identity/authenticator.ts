// The strategies of server.auth in their documented order, and the one factory that builds them from the
// config. Order: iap (a request that came through an identity-aware proxy), then oidc (an ID token in
// Authorization), then accessTokens (an opaque access token in Authorization). The first that proves an
// identity wins; when none does, the first one that found a credential and refused it names the reason. A
// decisive strategy's refusal ends the search (iap: what did not pass the identity-aware proxy stays out).

import type { ServerAuthConfig } from '../../../../contracts/server-auth-config.ts';
import { hasAuthStrategy } from '../../../../contracts/server-auth-config.ts';
import { AccessTokens } from './access-tokens.ts';
import { accessTokenStrategy } from './access-token-strategy.ts';
import { CredentialChecks, type Verifiers } from './credential-checks.ts';
import { GoogleIdTokens } from './google-id-tokens.ts';
import { IapAssertions } from './iap-assertion.ts';
import { iapStrategy } from './iap-strategy.ts';
import { TokenRejected, type AuthReason, type Identity, type StrategyName } from './identity.ts';
import { JwksIssuer, type IdTokenVerifier } from './jwks-issuer.ts';
import { oidcStrategy } from './oidc-strategy.ts';
import { VerifiedTokenCache } from './verified-token-cache.ts';
import { isNotApplicable, type Strategy } from './strategy.ts';

export interface AuthFailure {
  reason: AuthReason;
  /** For the caller: says why, never quotes the credential. */
  message: string;
  /** 503 when the identity provider could not be asked, or not now (the caller's token may be fine), else 401. */
  statusCode: 401 | 503;
  /** For a 503: when to try again. */
  retryAfterSeconds?: number;
  /** Each strategy's outcome, for the `all auth strategies failed` log line. */
  attempts: Partial<Record<StrategyName, string>>;
}

/** Refusals that say nothing about the credential: the caller may try again. */
const UNAVAILABLE: ReadonlySet<AuthReason> = new Set(['identity_provider_unavailable', 'token_lookups_throttled']);

export type AuthOutcome = { identity: Identity; failure?: undefined } | { identity?: undefined; failure: AuthFailure };

export class Authenticator {
  readonly strategies: readonly StrategyName[];
  readonly #strategies: readonly Strategy[];
  readonly #verifiers: Verifiers;
  readonly accessTokens: AccessTokens | null;

  constructor(strategies: readonly Strategy[], verifiers: Verifiers) {
    this.#strategies = strategies;
    this.strategies = strategies.map((s) => s.name);
    this.#verifiers = verifiers;
    this.accessTokens = verifiers.accessTokens;
  }

  async authenticate(headers: Readonly<Record<string, string | string[] | undefined>>): Promise<AuthOutcome> {
    const checks = new CredentialChecks(this.#verifiers, headers);
    const attempts: Partial<Record<StrategyName, string>> = {};
    let first: TokenRejected | null = null;
    for (const strategy of this.#strategies) {
      try {
        const result = await strategy.attempt(checks);
        if (!isNotApplicable(result)) return { identity: result };
        attempts[strategy.name] = `not applicable: ${result.notApplicable}`;
      } catch (error) {
        if (!(error instanceof TokenRejected)) throw error;
        attempts[strategy.name] = `${error.reason}: ${error.message}`;
        first ??= error;
        if (strategy.decisive === true) break;
      }
    }
    const failure = first ?? new TokenRejected('missing_token', 'no credential: send Authorization: Bearer <ID token or access token>');
    return {
      failure: {
        reason: failure.reason,
        message: failure.message,
        statusCode: UNAVAILABLE.has(failure.reason) ? 503 : 401,
        ...(failure.retryAfterSeconds !== undefined ? { retryAfterSeconds: failure.retryAfterSeconds } : {}),
        attempts,
      },
    };
  }
}

/** The strategies server.auth configures, in order; null when it configures none (nothing is checked). */
export function createAuthenticator(auth: ServerAuthConfig): Authenticator | null {
  if (!hasAuthStrategy(auth)) return null;
  const idTokens: IdTokenVerifier[] = auth.oidc.map((issuer) => (issuer.certsUrl !== undefined ? new GoogleIdTokens(issuer) : new JwksIssuer(issuer)));
  const verifiers: Verifiers = {
    idTokens,
    accessTokens: auth.accessTokens ? new AccessTokens(auth.accessTokens) : null,
    rules: auth.users,
    verifiedIdTokens: new VerifiedTokenCache(),
  };
  const strategies: Strategy[] = [];
  if (auth.iap?.enabled) strategies.push(iapStrategy(auth.iap, new IapAssertions({ publicKeysUrl: auth.iap.publicKeysUrl, audiences: auth.iap.audiences })));
  if (idTokens.length > 0) strategies.push(oidcStrategy);
  if (verifiers.accessTokens) strategies.push(accessTokenStrategy);
  return new Authenticator(strategies, verifiers);
}
