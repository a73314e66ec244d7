// Reading credentials off a request: `Bearer <token>` from Authorization, Proxy-Authorization or X-Proxy-Auth,
// and a look inside a JWT before it is verified (to route it to its issuer and to refuse `alg: none` and
// symmetric algorithms up front). Nothing read here is trusted until a verifier has checked the signature.

import { decodeJwt, decodeProtectedHeader, type JWTPayload, type ProtectedHeaderParameters } from 'jose';
import { TokenRejected } from './identity.ts';

/** RFC 6750 b64token; at most 8 KiB (an ID token is 1–2 KiB; a header is capped at 16 KiB anyway). */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const MAX_TOKEN = 8192;

/** The token of a `Bearer` header; null when the header is absent. A header of another shape is refused. */
export function bearerToken(value: string | string[] | undefined, header: string): string | null {
  if (value === undefined) return null;
  if (Array.isArray(value)) throw new TokenRejected('malformed_token', `${header} is given more than once`);
  const match = BEARER.exec(value);
  if (!match) {
    const scheme = /^\S+/.exec(value)?.[0];
    throw new TokenRejected(
      'malformed_token',
      `${header} must be "Bearer <token>"${scheme && !/^bearer$/i.test(scheme) && scheme.length <= 16 && /^[A-Za-z-]+$/.test(scheme) ? ` (got the ${scheme} scheme)` : ''}`,
    );
  }
  const token = match[1]!;
  if (token.length > MAX_TOKEN) throw new TokenRejected('malformed_token', `${header} carries a token over ${MAX_TOKEN} bytes`);
  return token;
}

export interface PeekedJwt {
  header: ProtectedHeaderParameters;
  payload: JWTPayload;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** The header and claims of a JWT-shaped token, unverified; null when the token is not a JWT (an opaque access token). */
export function peekJwt(token: string): PeekedJwt | null {
  if (!JWT_SHAPE.test(token)) return null;
  try {
    const header = decodeProtectedHeader(token);
    if (typeof header.alg !== 'string') return null;
    return { header, payload: decodeJwt(token) };
  } catch {
    return null;
  }
}

/** Signatures an ID token may use: asymmetric only, so a public key can never be used as an HMAC secret. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;

export function requireAlgorithm(peeked: PeekedJwt, allowed: readonly string[]): void {
  const alg = peeked.header.alg!;
  if (!allowed.includes(alg)) {
    const shown = /^[A-Za-z0-9]{1,16}$/.test(alg) ? alg : 'an unknown algorithm';
    throw new TokenRejected('unsupported_algorithm', `the token is signed with ${shown}; accepted: ${allowed.join(', ')}`);
  }
}
