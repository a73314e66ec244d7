// `Authorization: Bearer <access token>`: an opaque OAuth 2.0 access token, vouched for by the tokeninfo
// endpoint (server.auth.accessTokens). A JWT is left to the oidc strategy when ID tokens are configured.

import { peekJwt } from './bearer-token.ts';
import { notApplicable, type Strategy } from './strategy.ts';

export const accessTokenStrategy: Strategy = {
  name: 'accessTokens',
  async attempt(checks) {
    const token = checks.bearer('authorization', 'Authorization');
    if (token === null) return notApplicable('no Authorization header');
    if (peekJwt(token) && checks.acceptsIdTokens) return notApplicable('a JWT (checked as an ID token)');
    return checks.accessToken(token, 'accessTokens');
  },
};
