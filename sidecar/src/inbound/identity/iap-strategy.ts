// Behind an identity-aware proxy. Two credentials say who got through it:
//   - x-goog-iap-jwt-assertion, the proxy's signed header, for one of iap.audiences: always required, since
//     without it the request did not come through the proxy;
//   - Proxy-Authorization: Bearer <ID token>, which a client impersonating a service account sends so that
//     the proxy checks it instead of Authorization. When it reaches the server it is verified too, against
//     the oidc issuers; its account must be in iap.allowedServiceAccounts and be the one the proxy let in.
// Who the call is for: X-Proxy-Auth (the developer's own access token) when present, else Authorization
// when present, else the principal the proxy let in. Only an allowed service account may call for someone
// else. With iap.required (the default) every request must have come through the proxy; the strategy is
// decisive either way, so a request it refuses is not let in by oidc or accessTokens.

import type { IapConfig } from '../../../../contracts/server-auth-config.ts';
import { IAP_ASSERTION_HEADER, IAP_ISSUER, type IapAssertions } from './iap-assertion.ts';
import { identityFromClaims, TokenRejected, type Claims, type Identity } from './identity.ts';
import { notApplicable, type Strategy } from './strategy.ts';

async function fromHeader<T>(header: string, check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (error) {
    if (error instanceof TokenRejected) throw new TokenRejected(error.reason, `${header}: ${error.message}`);
    throw error;
  }
}

function emailOf(claims: Claims): string | null {
  return typeof claims.email === 'string' && claims.email !== '' ? claims.email.toLowerCase() : null;
}

export function iapStrategy(config: IapConfig, assertions: IapAssertions): Strategy {
  const allowed = (email: string | null) => email !== null && config.allowedServiceAccounts.includes(email);
  return {
    name: 'iap',
    decisive: true,
    async attempt(checks) {
      const assertion = checks.headers[IAP_ASSERTION_HEADER];
      const proxyToken = checks.bearer('proxy-authorization', 'Proxy-Authorization');
      if (assertion === undefined && proxyToken === null && !config.required) return notApplicable(`no ${IAP_ASSERTION_HEADER} or Proxy-Authorization header`);
      if (Array.isArray(assertion)) throw new TokenRejected('malformed_token', `${IAP_ASSERTION_HEADER} is given more than once`);

      if (assertion === undefined) {
        throw new TokenRejected('iap_assertion_missing', `the request did not come through the identity-aware proxy (no ${IAP_ASSERTION_HEADER} header)`);
      }
      const principal = { claims: await fromHeader(IAP_ASSERTION_HEADER, () => assertions.verify(assertion)), issuer: IAP_ISSUER };
      const via = emailOf(principal.claims);
      if (proxyToken !== null) {
        const account = await fromHeader('Proxy-Authorization', () => checks.idTokenClaims(proxyToken));
        const email = emailOf(account.claims);
        if (!allowed(email)) {
          throw new TokenRejected(
            'service_account_not_allowed',
            `Proxy-Authorization: ${email ?? 'an account without an e-mail address'} is not in server.auth.iap.allowedServiceAccounts`,
          );
        }
        if (via !== email) {
          throw new TokenRejected('principal_mismatch', `Proxy-Authorization names another account than the one ${IAP_ASSERTION_HEADER} says the proxy let in`);
        }
      }

      const delegated = checks.bearer('x-proxy-auth', 'X-Proxy-Auth');
      const header = delegated !== null ? 'X-Proxy-Auth' : 'Authorization';
      const userToken = delegated ?? checks.bearer('authorization', 'Authorization');
      if (userToken === null) {
        // The principal calls for itself. A listed service account is in by name; anyone else passes the user rules.
        const rules = allowed(via) ? { ...checks.rules, allowedDomains: [] } : checks.rules;
        return identityFromClaims(principal.claims, rules, 'iap', principal.issuer);
      }
      const user: Identity = await fromHeader(header, () => checks.anyToken(userToken, 'iap'));
      if (user.email !== null && user.email === via) return user;
      if (!allowed(via)) {
        throw new TokenRejected(
          'service_account_not_allowed',
          `${header} names another user than the caller, and only an account in server.auth.iap.allowedServiceAccounts may call for someone else`,
        );
      }
      return via === null ? user : { ...user, via };
    },
  };
}
