// ID tokens of an OIDC issuer other than Google, verified with jose against the issuer's JWKS. The JWKS URL
// comes from the config or from the issuer's discovery document; jose caches the key set (10 minutes) and,
// for a `kid` it does not know, fetches it again at most once per cooldown (30 s), so a key rotation is picked
// up at once and a flood of made-up kids costs one fetch per cooldown.

import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import type { OidcIssuerConfig } from '../../../../contracts/server-auth-config.ts';
import { ASYMMETRIC_ALGORITHMS, requireAlgorithm, type PeekedJwt } from './bearer-token.ts';
import { TokenRejected } from './identity.ts';
import { checkClaims, CLOCK_SKEW_SECONDS } from './jwt-claims.ts';
import { isRecord } from '../../../../contracts/json-record.ts';

export interface IdTokenVerifier {
  readonly issuers: readonly string[];
  verify(token: string, peeked: PeekedJwt): Promise<JWTPayload>;
}

const FETCH_TIMEOUT_MS = 5000;
/** A discovery document that could not be read is tried again after this long, not on every request. */
const DISCOVERY_RETRY_MS = 10_000;

function unavailable(what: string, error: unknown): TokenRejected {
  const detail = error instanceof Error ? error.message : String(error);
  return new TokenRejected('identity_provider_unavailable', `${what} could not be read (${detail.slice(0, 200)})`);
}

export class JwksIssuer implements IdTokenVerifier {
  readonly issuers: readonly string[];
  readonly #config: OidcIssuerConfig;
  #keys: ReturnType<typeof createRemoteJWKSet> | null = null;
  #discovery: Promise<URL> | null = null;
  #discoveryFailedAt = 0;

  constructor(config: OidcIssuerConfig) {
    this.#config = config;
    this.issuers = [config.issuer];
    if (config.jwksUri !== null) this.#keys = createRemoteJWKSet(new URL(config.jwksUri), { timeoutDuration: FETCH_TIMEOUT_MS });
  }

  async verify(token: string, peeked: PeekedJwt): Promise<JWTPayload> {
    requireAlgorithm(peeked, ASYMMETRIC_ALGORITHMS);
    const keys = await this.#keySet();
    // The signature first: a reason decided from claims nobody vouched for would tell a forger which
    // audiences this server accepts.
    let verified: JWTPayload;
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: this.#config.issuer,
        audience: this.#config.audiences,
        algorithms: [...ASYMMETRIC_ALGORITHMS],
        clockTolerance: CLOCK_SKEW_SECONDS,
        requiredClaims: ['exp'],
      });
      verified = payload;
    } catch (error) {
      throw joseRejection(error, this.#config.issuer);
    }
    checkClaims(verified, { issuers: this.issuers, audiences: this.#config.audiences });
    return verified;
  }

  async #keySet(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    if (this.#keys) return this.#keys;
    if (this.#discovery === null || (this.#discoveryFailedAt > 0 && Date.now() - this.#discoveryFailedAt > DISCOVERY_RETRY_MS)) {
      this.#discoveryFailedAt = 0;
      this.#discovery = discoverJwksUri(this.#config.issuer);
      this.#discovery.catch(() => (this.#discoveryFailedAt = Date.now()));
    }
    const url = await this.#discovery;
    this.#keys ??= createRemoteJWKSet(url, { timeoutDuration: FETCH_TIMEOUT_MS });
    return this.#keys;
  }
}

/** OpenID Connect Discovery 1.0: the document's `issuer` must be the configured issuer exactly (§4.3). */
async function discoverJwksUri(issuer: string): Promise<URL> {
  const where = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let document: unknown;
  try {
    const response = await fetch(where, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    document = await response.json();
  } catch (error) {
    throw unavailable(`the discovery document ${where}`, error);
  }
  const doc = isRecord(document) ? document : {};
  if (doc.issuer !== issuer) throw unavailable(`the discovery document ${where}`, new Error(`it names issuer ${JSON.stringify(doc.issuer)}, not ${JSON.stringify(issuer)}`));
  if (typeof doc.jwks_uri !== 'string' || !/^https?:\/\//.test(doc.jwks_uri)) throw unavailable(`the discovery document ${where}`, new Error('it has no jwks_uri'));
  return new URL(doc.jwks_uri);
}

function joseRejection(error: unknown, issuer: string): TokenRejected {
  if (error instanceof TokenRejected) return error;
  if (error instanceof errors.JWTExpired) return new TokenRejected('expired', 'the token has expired; get a new one');
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return new TokenRejected('wrong_audience', "the token was issued for another audience than this server's");
    if (error.claim === 'iss') return new TokenRejected('unknown_issuer', 'the token comes from an issuer this server does not trust (server.auth.oidc)');
    if (error.claim === 'nbf' || error.claim === 'iat') return new TokenRejected('not_yet_valid', 'the token is not valid yet');
    return new TokenRejected('malformed_token', `the token's "${error.claim}" claim is ${error.reason === 'missing' ? 'missing' : 'invalid'}`);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSMultipleMatchingKeys) {
    return new TokenRejected('bad_signature', `the token's signature does not verify with ${issuer}'s keys`);
  }
  if (error instanceof errors.JWKSNoMatchingKey) {
    return new TokenRejected('unknown_key', `the token is signed with a key ${issuer} does not publish (its key set was fetched again at most once in the last 30 s)`);
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return new TokenRejected('unsupported_algorithm', "the token's signature algorithm is not accepted");
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return new TokenRejected('malformed_token', 'the token is not a well-formed signed JWT');
  // The key set could not be fetched (timeout, connection refused, not 200, not a key set).
  return unavailable(`${issuer}'s key set`, error);
}
