// The signed header an identity-aware proxy (Google Cloud IAP) adds to every request it lets through:
// x-goog-iap-jwt-assertion, an ES256 JWT from https://cloud.google.com/iap whose audience names the backend.
// Verified the way Google documents it, with google-auth-library: getIapPublicKeys() for the keys (cached
// here, since the library does not cache them; Cache-Control's max-age, else an hour) and
// verifySignedJwtWithCertsAsync() for the signature, issuer and audience. An unknown kid refetches the keys
// at most once per cooldown.

import { OAuth2Client } from 'google-auth-library';
import type { JWTPayload } from 'jose';
import { requireAlgorithm, peekJwt } from './bearer-token.ts';
import { KEY_REFETCH_COOLDOWN_MS, googleRejection } from './google-id-tokens.ts';
import { TokenRejected } from './identity.ts';
import { checkClaims } from './jwt-claims.ts';

export const IAP_ISSUER = 'https://cloud.google.com/iap';
export const IAP_ASSERTION_HEADER = 'x-goog-iap-jwt-assertion';
const DEFAULT_KEYS_MAX_AGE_MS = 3_600_000;

type PublicKeys = Record<string, string>;

export class IapAssertions {
  readonly #client: OAuth2Client;
  readonly #audiences: string[];
  readonly #now: () => number;
  #keys: PublicKeys | null = null;
  #expiresAt = 0;
  #fetchedAt = 0;
  #fetching: Promise<PublicKeys> | null = null;

  constructor(opts: { publicKeysUrl: string; audiences: string[]; now?: () => number }) {
    this.#client = new OAuth2Client({ endpoints: { oauth2IapPublicKeyUrl: opts.publicKeysUrl } });
    this.#audiences = opts.audiences;
    this.#now = opts.now ?? (() => Date.now());
  }

  async verify(assertion: string): Promise<JWTPayload> {
    const peeked = peekJwt(assertion);
    if (!peeked) throw new TokenRejected('malformed_token', `${IAP_ASSERTION_HEADER} is not a JWT`);
    requireAlgorithm(peeked, ['ES256']);
    const kid = peeked.header.kid;
    let keys = await this.#currentKeys();
    let verified: JWTPayload;
    if (typeof kid === 'string' && !Object.hasOwn(keys, kid) && this.#now() - this.#fetchedAt >= KEY_REFETCH_COOLDOWN_MS) keys = await this.#fetch();
    try {
      const ticket = await this.#client.verifySignedJwtWithCertsAsync(assertion, keys, this.#audiences, [IAP_ISSUER]);
      verified = (ticket.getPayload() ?? {}) as JWTPayload;
    } catch (error) {
      const rejection = googleRejection(error);
      if (rejection.reason === 'unknown_key') throw new TokenRejected('unknown_key', `${IAP_ASSERTION_HEADER} is signed with a key IAP does not publish`);
      if (rejection.reason === 'bad_signature') throw new TokenRejected('bad_signature', `${IAP_ASSERTION_HEADER} does not verify with IAP's keys`);
      throw rejection;
    }
    // After the signature, so that a reason never comes from claims nobody vouched for; with this server's skew.
    checkClaims(verified, { issuers: [IAP_ISSUER], audiences: this.#audiences });
    return verified;
  }

  #currentKeys(): Promise<PublicKeys> {
    if (this.#keys && this.#now() < this.#expiresAt) return Promise.resolve(this.#keys);
    return this.#fetch();
  }

  #fetch(): Promise<PublicKeys> {
    this.#fetching ??= (async () => {
      // An attempt counts for the cooldown whether it works or not.
      this.#fetchedAt = this.#now();
      try {
        const { pubkeys, res } = await this.#client.getIapPublicKeysAsync();
        const maxAge = /max-age=(\d+)/.exec(res?.headers.get('cache-control') ?? '')?.[1];
        this.#keys = pubkeys;
        this.#expiresAt = this.#fetchedAt + (maxAge !== undefined ? Number(maxAge) * 1000 : DEFAULT_KEYS_MAX_AGE_MS);
        return this.#keys;
      } catch {
        // Keys that are still cached keep working through an outage of the key endpoint, which is asked
        // again after the cooldown rather than on every request.
        this.#expiresAt = this.#now() + KEY_REFETCH_COOLDOWN_MS;
        if (this.#keys) return this.#keys;
        throw new TokenRejected('identity_provider_unavailable', "IAP's public keys could not be fetched");
      } finally {
        this.#fetching = null;
      }
    })();
    return this.#fetching;
  }
}
