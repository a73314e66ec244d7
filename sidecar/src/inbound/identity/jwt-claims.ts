// The claim checks every JWT verifier applies before the signature: times with one small skew, issuer,
// audience. They run on the unverified claims only to name the reason precisely (expired, not yet valid,
// wrong audience); the signature check that follows (jose or google-auth-library) decides, and checks the
// claims again itself. One skew for every issuer: google-auth-library alone would accept five minutes.

import type { JWTPayload } from 'jose';
import { TokenRejected } from './identity.ts';

/** Clock skew allowed on exp, nbf and iat. */
export const CLOCK_SKEW_SECONDS = 30;

export interface ClaimExpectations {
  issuers: readonly string[];
  audiences: readonly string[];
  /** Seconds since the epoch; injected by tests. */
  now?: number;
}

function iso(seconds: number): string {
  const date = new Date(seconds * 1000);
  return Number.isNaN(date.getTime()) ? String(seconds) : date.toISOString();
}

function numeric(payload: JWTPayload, name: 'exp' | 'nbf' | 'iat'): number | undefined {
  const value = payload[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TokenRejected('malformed_token', `the token's "${name}" claim is not a number`);
  return value;
}

export function checkClaims(payload: JWTPayload, expected: ClaimExpectations): void {
  const now = expected.now ?? Date.now() / 1000;
  const exp = numeric(payload, 'exp');
  if (exp === undefined) throw new TokenRejected('malformed_token', 'the token has no "exp" claim: a token that never expires is not accepted');
  if (now > exp + CLOCK_SKEW_SECONDS) throw new TokenRejected('expired', `the token expired at ${iso(exp)}; get a new one`);
  const nbf = numeric(payload, 'nbf');
  if (nbf !== undefined && now < nbf - CLOCK_SKEW_SECONDS) throw new TokenRejected('not_yet_valid', `the token is not valid before ${iso(nbf)}`);
  const iat = numeric(payload, 'iat');
  if (iat !== undefined && now < iat - CLOCK_SKEW_SECONDS) throw new TokenRejected('not_yet_valid', `the token is issued in the future (${iso(iat)}); check the issuer's clock`);
  if (typeof payload.iss !== 'string' || !expected.issuers.includes(payload.iss)) {
    throw new TokenRejected('unknown_issuer', 'the token comes from an issuer this server does not trust (server.auth.oidc)');
  }
  const aud = payload.aud;
  const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  if (!audiences.some((a) => expected.audiences.includes(a))) {
    throw new TokenRejected('wrong_audience', "the token was issued for another audience than this server's");
  }
}
