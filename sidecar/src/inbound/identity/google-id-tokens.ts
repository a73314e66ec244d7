// Google ID tokens (iss accounts.google.com), verified by google-auth-library's OAuth2Client.verifyIdToken
// against Google's PEM certificates, which the library caches for as long as Google's Cache-Control allows.
// `certsUrl` moves those certificates (tests point it at a local issuer; it is the library's own endpoint
// option). For a `kid` the cached certificates lack, a fresh client (with an empty cache) is made at most once
// per cooldown: Google publishes new keys before it signs with them, so this is a rare path, and a flood of
// made-up kids cannot turn into a flood of fetches.

import { OAuth2Client } from 'google-auth-library';
import type { JWTPayload } from 'jose';
import { GOOGLE_ISSUERS, type OidcIssuerConfig } from '../../../../contracts/server-auth-config.ts';
import { requireAlgorithm, type PeekedJwt } from './bearer-token.ts';
import { TokenRejected } from './identity.ts';
import type { IdTokenVerifier } from './jwks-issuer.ts';
import { checkClaims } from './jwt-claims.ts';

export const KEY_REFETCH_COOLDOWN_MS = 30_000;

export class GoogleIdTokens implements IdTokenVerifier {
  readonly issuers = GOOGLE_ISSUERS;
  readonly #audiences: string[];
  readonly #certsUrl: string;
  readonly #now: () => number;
  #client: OAuth2Client;
  #clientCreatedAt: number;

  constructor(config: OidcIssuerConfig, now: () => number = () => Date.now()) {
    this.#audiences = config.audiences;
    this.#certsUrl = config.certsUrl!;
    this.#now = now;
    this.#client = this.#newClient();
    this.#clientCreatedAt = now();
  }

  #newClient(): OAuth2Client {
    return new OAuth2Client({ endpoints: { oauth2FederatedSignonPemCertsUrl: this.#certsUrl }, issuers: [...GOOGLE_ISSUERS] });
  }

  async verify(token: string, peeked: PeekedJwt): Promise<JWTPayload> {
    // The library picks the key by kid and checks RS256 signatures; anything else is refused before it.
    requireAlgorithm(peeked, ['RS256']);
    // The signature first (the library checks it before any claim), then the claims again with this server's
    // 30 s of clock skew rather than the library's five minutes.
    let verified: JWTPayload;
    try {
      verified = await this.#verifyOnce(token);
    } catch (error) {
      if (!(error instanceof TokenRejected) || error.reason !== 'unknown_key') throw error;
      if (this.#now() - this.#clientCreatedAt < KEY_REFETCH_COOLDOWN_MS) throw error;
      this.#client = this.#newClient();
      this.#clientCreatedAt = this.#now();
      verified = await this.#verifyOnce(token);
    }
    checkClaims(verified, { issuers: this.issuers, audiences: this.#audiences });
    return verified;
  }

  async #verifyOnce(token: string): Promise<JWTPayload> {
    let ticket;
    try {
      ticket = await this.#client.verifyIdToken({ idToken: token, audience: this.#audiences });
    } catch (error) {
      throw googleRejection(error);
    }
    const payload = ticket.getPayload();
    if (!payload) throw new TokenRejected('malformed_token', 'the token has no claims');
    return payload as JWTPayload;
  }
}

/**
 * The library's errors are plain Errors whose messages quote the whole token, so they are classified by their
 * opening words and never passed on. The claim checks above already named every claim failure; what is left
 * is about keys and signatures.
 */
export function googleRejection(error: unknown): TokenRejected {
  const message = error instanceof Error ? error.message : '';
  if (message.startsWith('No pem found for envelope')) return new TokenRejected('unknown_key', 'the token is signed with a key Google does not publish (or no longer publishes)');
  if (message.startsWith('Invalid token signature')) return new TokenRejected('bad_signature', "the token's signature does not verify with Google's keys");
  if (message.startsWith('Failed to retrieve verification certificates')) {
    return new TokenRejected('identity_provider_unavailable', "Google's token certificates could not be fetched");
  }
  if (message.startsWith('Wrong recipient')) return new TokenRejected('wrong_audience', "the token was issued for another audience than this server's");
  if (message.startsWith('Token used too late')) return new TokenRejected('expired', 'the token has expired; get a new one');
  if (message.startsWith('Token used too early')) return new TokenRejected('not_yet_valid', 'the token is not valid yet');
  if (message.startsWith('Invalid issuer')) return new TokenRejected('unknown_issuer', 'the token comes from an issuer this server does not trust');
  return new TokenRejected('malformed_token', 'google-auth-library refused the token as malformed');
}
