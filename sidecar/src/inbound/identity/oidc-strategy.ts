// `Authorization: Bearer <ID token>`: a JWT from one of server.auth.oidc's issuers, for one of its audiences.
// This is what the OpenAI SDKs send when their apiKey is set to an ID token.

import { peekJwt } from './bearer-token.ts';
import { TokenRejected } from './identity.ts';
import { notApplicable, type Strategy } from './strategy.ts';

export const oidcStrategy: Strategy = {
  name: 'oidc',
  async attempt(checks) {
    const token = checks.bearer('authorization', 'Authorization');
    if (token === null) return notApplicable('no Authorization header');
    if (!peekJwt(token)) {
      if (checks.acceptsAccessTokens) return notApplicable('not a JWT (checked as an access token)');
      throw new TokenRejected('malformed_token', 'the bearer token is not a JWT ID token, and this server does not check access tokens (server.auth.accessTokens)');
    }
    return checks.idToken(token, 'oidc');
  },
};
