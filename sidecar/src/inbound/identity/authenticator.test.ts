// The strategies against a local OIDC issuer, a fake tokeninfo endpoint and a fake IAP, through the real
// jose and google-auth-library code paths: every token is minted here, good and bad.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startFakeIap, type FakeIap } from '../../../../test/fakes/iap-signer.ts';
import { startFakeTokeninfo, type FakeTokeninfo } from '../../../../test/fakes/google-tokeninfo.ts';
import { createSigningKey, startOidcIssuer, type LocalOidcIssuer } from '../../../../test/fakes/oidc-issuer.ts';
import { parseServerAuth, defaultServerAuth, type ServerAuthConfig } from '../../../../contracts/server-auth-config.ts';
import { createAuthenticator, type Authenticator, type AuthOutcome } from './authenticator.ts';

const AUD = 'tollgate';
const IAP_CLIENT = '123-iap.apps.googleusercontent.com';
const BACKEND = '/projects/123/global/backendServices/456';
const ROBOT = 'tollgate-client@proj.iam.gserviceaccount.com';
/** The OAuth client the fake tokeninfo issues tokens to unless told otherwise. */
const CLI_CLIENT = 'test-cli.apps.googleusercontent.com';

let issuer: LocalOidcIssuer;
let google: LocalOidcIssuer; // plays accounts.google.com: its RS256 certificates, tokens with Google's iss
let tokeninfo: FakeTokeninfo;
let iap: FakeIap;
let auth: Authenticator;

function config(input: Record<string, unknown>): ServerAuthConfig {
  return { ...defaultServerAuth(), ...parseServerAuth(input, 'server.auth') };
}

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

function reason(outcome: AuthOutcome): string | undefined {
  return outcome.failure?.reason;
}

const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  [issuer, google, tokeninfo, iap] = await Promise.all([startOidcIssuer(), startOidcIssuer(), startFakeTokeninfo(), startFakeIap()]);
  auth = createAuthenticator(
    config({
      required: true,
      oidc: [
        { issuer: issuer.url, audiences: [AUD] },
        { issuer: 'https://accounts.google.com', audiences: [AUD, IAP_CLIENT], certsUrl: google.googleCertsUrl },
      ],
      accessTokens: { tokeninfoUrl: tokeninfo.url, cacheSeconds: 300, audiences: [CLI_CLIENT] },
      // Not the front door here, so that one authenticator serves every strategy's tests; the front door has its own.
      iap: { enabled: true, required: false, audiences: [BACKEND], allowedServiceAccounts: [ROBOT], publicKeysUrl: iap.publicKeysUrl },
    }),
  )!;
});

afterAll(async () => {
  await Promise.all([issuer?.close(), google?.close(), tokeninfo?.close(), iap?.close()]);
});

describe('ID tokens from an OIDC issuer (jose, JWKS from discovery)', () => {
  it('accepts a valid RS256 token and an ES256 token, naming the caller by e-mail', async () => {
    const rs = await auth.authenticate(bearer(await issuer.idToken('Alice@Example.com', AUD)));
    expect(rs.identity).toMatchObject({ userId: 'alice@example.com', email: 'alice@example.com', issuer: issuer.url, strategy: 'oidc' });
    const es = await auth.authenticate(bearer(await issuer.idToken('bob@example.com', AUD, {}, { alg: 'ES256' })));
    expect(es.identity?.userId).toBe('bob@example.com');
    expect(issuer.fetches('/.well-known/openid-configuration')).toBe(1);
  });

  it.each([
    ['expired', { exp: now() - 120, iat: now() - 3720 }],
    ['not_yet_valid', { nbf: now() + 600 }],
    ['wrong_audience', { aud: 'another-app' }],
    ['unknown_issuer', { iss: 'https://issuer.example' }],
  ])('refuses a token that is %s', async (expected, claims) => {
    const outcome = await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, claims)));
    expect(reason(outcome)).toBe(expected);
    expect(outcome.failure?.statusCode).toBe(401);
  });

  it('accepts a token within the clock skew', async () => {
    const outcome = await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, { exp: now() - 10, nbf: now() + 10 })));
    expect(outcome.identity?.userId).toBe('alice@example.com');
  });

  it('refuses a bad signature, alg none and HS256, without quoting the token', async () => {
    const impostor = await createSigningKey('RS256', issuer.current('RS256').kid);
    const forged = await issuer.idToken('mallory@example.com', AUD, {}, { signWith: impostor });
    const bad = await auth.authenticate(bearer(forged));
    expect(reason(bad)).toBe('bad_signature');
    expect(JSON.stringify(bad.failure)).not.toContain(forged.split('.')[2]!);
    expect(JSON.stringify(bad.failure)).not.toContain(forged.split('.')[1]!);

    expect(reason(await auth.authenticate(bearer(await issuer.idToken('mallory@example.com', AUD, {}, { unsigned: true }))))).toBe('unsupported_algorithm');
    const [header, payload] = (await issuer.idToken('mallory@example.com', AUD)).split('.');
    const hs = `${Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url')}.${payload}.${header}`;
    expect(reason(await auth.authenticate(bearer(hs)))).toBe('unsupported_algorithm');
  });

  it('picks up a rotated key with one JWKS fetch, and a made-up kid right after costs no fetch', async () => {
    await auth.authenticate(bearer(await issuer.idToken('warm@example.com', AUD)));
    const before = issuer.fetches('/jwks');
    const rotated = await issuer.rotate('RS256');
    // Within the refetch cooldown (30 s) of the last fetch, an unknown kid is refused without a fetch.
    expect(reason(await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, {}, { key: rotated }))))).toBe('unknown_key');
    expect(issuer.fetches('/jwks')).toBe(before);
    // Past the cooldown, the first token with the new kid fetches the key set once.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 31_000 });
    try {
      const outcome = await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, {}, { key: rotated })));
      expect(outcome.identity?.userId).toBe('alice@example.com');
      expect(issuer.fetches('/jwks')).toBe(before + 1);

      const unknown = await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, {}, { header: { kid: 'made-up' } })));
      expect(reason(unknown)).toBe('unknown_key');
      expect(issuer.fetches('/jwks')).toBe(before + 1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses an unverified e-mail and a token without the user claim', async () => {
    expect(reason(await auth.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, { email_verified: false }))))).toBe('email_unverified');
    expect(reason(await auth.authenticate(bearer(await issuer.mint({ iss: issuer.url, aud: AUD, sub: 'x', iat: now(), exp: now() + 60 }))))).toBe('missing_claim');
  });

  it('says 503, not 401, when the issuer cannot be reached', async () => {
    const down = createAuthenticator(config({ oidc: [{ issuer: 'http://127.0.0.1:9', audiences: [AUD] }] }))!;
    const outcome = await down.authenticate(bearer(await issuer.idToken('alice@example.com', AUD, { iss: 'http://127.0.0.1:9' })));
    expect(outcome.failure).toMatchObject({ reason: 'identity_provider_unavailable', statusCode: 503 });
  });
});

describe('Google ID tokens (google-auth-library verifyIdToken against the local certificates)', () => {
  const googleToken = (email: string, claims: Record<string, unknown> = {}, opts = {}) =>
    google.mint({ iss: 'https://accounts.google.com', aud: AUD, sub: `g-${email}`, email, email_verified: true, iat: now(), exp: now() + 3600, ...claims }, opts);

  it('accepts a valid token; refuses expired, early, foreign-audience and badly signed ones', async () => {
    expect((await auth.authenticate(bearer(await googleToken('carol@example.com')))).identity).toMatchObject({
      userId: 'carol@example.com',
      issuer: 'https://accounts.google.com',
    });
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', { exp: now() - 60, iat: now() - 3660 }))))).toBe('expired');
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', { iat: now() + 600, exp: now() + 4200 }))))).toBe('not_yet_valid');
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', { aud: 'someone-else' }))))).toBe('wrong_audience');
    const impostor = await createSigningKey('RS256', google.current('RS256').kid);
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', {}, { signWith: impostor }))))).toBe('bad_signature');
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', {}, { alg: 'ES256' }))))).toBe('unsupported_algorithm');
  });

  it('a rotated Google key is fetched once past the cooldown; a made-up kid right after fetches nothing', async () => {
    await auth.authenticate(bearer(await googleToken('warm@example.com')));
    const before = google.fetches('/oauth2/v1/certs');
    const rotated = await google.rotate('RS256');
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 31_000 });
    try {
      expect((await auth.authenticate(bearer(await googleToken('carol@example.com', {}, { key: rotated })))).identity?.userId).toBe('carol@example.com');
      expect(google.fetches('/oauth2/v1/certs')).toBe(before + 1);
      expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', {}, { header: { kid: 'made-up' } }))))).toBe('unknown_key');
      expect(google.fetches('/oauth2/v1/certs')).toBe(before + 1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("an expired token inside google-auth-library's own five minutes is refused all the same", async () => {
    expect(reason(await auth.authenticate(bearer(await googleToken('carol@example.com', { exp: now() - 120, iat: now() - 3720 }))))).toBe('expired');
  });
});

describe('opaque access tokens (tokeninfo through google-auth-library)', () => {
  it('accepts a live token, caches the answer, refuses an unknown one', async () => {
    const token = tokeninfo.issue('dave@example.com');
    const before = tokeninfo.lookups().length;
    expect((await auth.authenticate(bearer(token))).identity).toMatchObject({ userId: 'dave@example.com', strategy: 'accessTokens', issuer: tokeninfo.url });
    expect((await auth.authenticate(bearer(token))).identity?.userId).toBe('dave@example.com');
    expect(tokeninfo.lookups().length).toBe(before + 1);
    const lookup = tokeninfo.lookups().at(-1)!;
    expect(lookup.method).toBe('POST');
    expect(lookup.headers.authorization).toBe(`Bearer ${token}`);

    const unknown = await auth.authenticate(bearer('ya29.not-a-real-token'));
    expect(unknown.failure).toMatchObject({ reason: 'inactive_token', statusCode: 401 });
    expect(unknown.failure?.message).not.toContain('ya29');
  });

  it('keeps an answer no longer than the token lives', async () => {
    const { AccessTokens } = await import('./access-tokens.ts');
    let offset = 0;
    const tokens = new AccessTokens(
      { tokeninfoUrl: tokeninfo.url, cacheSeconds: 300, audiences: [CLI_CLIENT], lookupsPerSecond: 5, lookupBurst: 20, concurrentLookups: 8 },
      () => Date.now() + offset,
    );
    const token = tokeninfo.issue('erin@example.com', { expiresInSeconds: 120 });
    await tokens.verify(token);
    offset = 60_000;
    await tokens.verify(token);
    expect(tokens.lookups).toBe(1);
    // Past the token's expiry (but within cacheSeconds) the cache has let go, and the token is refused.
    offset = 121_000;
    await expect(tokens.verify(token)).rejects.toMatchObject({ reason: 'expired' });
    expect(tokens.lookups).toBe(2);
  });

  it('refuses a revoked token once its cached answer is gone', async () => {
    const token = tokeninfo.issue('frank@example.com');
    const shortCache = createAuthenticator(config({ accessTokens: { tokeninfoUrl: tokeninfo.url, cacheSeconds: 0, audiences: [CLI_CLIENT] } }))!;
    expect((await shortCache.authenticate(bearer(token))).identity?.userId).toBe('frank@example.com');
    tokeninfo.revoke(token);
    expect(reason(await shortCache.authenticate(bearer(token)))).toBe('inactive_token');
    // A refusal is remembered: asking again within the minute costs no lookup.
    const lookups = tokeninfo.lookups().length;
    expect(reason(await shortCache.authenticate(bearer(token)))).toBe('inactive_token');
    expect(tokeninfo.lookups().length).toBe(lookups);
    // tokeninfo refuses an expired token the way it refuses a made-up one.
    expect(reason(await shortCache.authenticate(bearer(tokeninfo.issue('frank@example.com', { expiresInSeconds: -1 }))))).toBe('inactive_token');
  });

  it('refuses a token issued to another OAuth app, by aud and azp, and remembers the refusal', async () => {
    const foreign = tokeninfo.issue('mallory@example.com', { clientId: 'another-app.apps.googleusercontent.com' });
    const outcome = await auth.authenticate(bearer(foreign));
    expect(outcome.failure).toMatchObject({ reason: 'wrong_audience', statusCode: 401 });
    const lookups = tokeninfo.lookups().length;
    for (let i = 0; i < 20; i++) expect(reason(await auth.authenticate(bearer(foreign)))).toBe('wrong_audience');
    expect(tokeninfo.lookups().length).toBe(lookups);
  });

  it('a made-up token repeated costs one lookup, not one per request', async () => {
    const before = tokeninfo.lookups().length;
    for (let i = 0; i < 50; i++) expect(reason(await auth.authenticate(bearer('ya29.made-up-and-repeated')))).toBe('inactive_token');
    expect(tokeninfo.lookups().length).toBe(before + 1);
  });

  it('says 503, not 401, when tokeninfo throttles (429), and does not remember it', async () => {
    const token = tokeninfo.issue('gail@example.com');
    tokeninfo.setThrottled(true);
    try {
      expect((await auth.authenticate(bearer(token))).failure).toMatchObject({ reason: 'identity_provider_unavailable', statusCode: 503 });
    } finally {
      tokeninfo.setThrottled(false);
    }
    expect((await auth.authenticate(bearer(token))).identity?.userId).toBe('gail@example.com');
  });

  it('says 503 when tokeninfo fails', async () => {
    tokeninfo.server.setFailing(true);
    try {
      const outcome = await auth.authenticate(bearer(tokeninfo.issue('gina@example.com')));
      expect(outcome.failure).toMatchObject({ reason: 'identity_provider_unavailable', statusCode: 503 });
    } finally {
      tokeninfo.server.setFailing(false);
    }
  });
});

describe('behind an identity-aware proxy', () => {
  const robotToken = (email = ROBOT) =>
    google.mint({ iss: 'https://accounts.google.com', aud: IAP_CLIENT, sub: 'robot', email, email_verified: true, iat: now(), exp: now() + 3600 });

  it('the IAP pair: X-Proxy-Auth names the user and wins over Authorization', async () => {
    const headers = {
      'x-goog-iap-jwt-assertion': await iap.assertion(ROBOT, BACKEND),
      'proxy-authorization': `Bearer ${await robotToken()}`,
      'x-proxy-auth': `Bearer ${tokeninfo.issue('helen@example.com')}`,
      authorization: `Bearer ${await issuer.idToken('somebody-else@example.com', AUD)}`,
    };
    const outcome = await auth.authenticate(headers);
    expect(outcome.identity).toMatchObject({ userId: 'helen@example.com', strategy: 'iap', via: ROBOT });
  });

  it('without X-Proxy-Auth, Authorization names the user; without either, the principal IAP let in', async () => {
    const assertion = await iap.assertion(ROBOT, BACKEND);
    const viaAuthorization = await auth.authenticate({ 'x-goog-iap-jwt-assertion': assertion, ...bearer(await issuer.idToken('ivan@example.com', AUD)) });
    expect(viaAuthorization.identity).toMatchObject({ userId: 'ivan@example.com', via: ROBOT });
    const human = await auth.authenticate({ 'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND) });
    expect(human.identity).toMatchObject({ userId: 'judy@example.com', strategy: 'iap' });
    expect(human.identity?.via).toBeUndefined();
  });

  it('refuses Proxy-Authorization from a service account that is not allowed', async () => {
    const other = 'intruder@proj.iam.gserviceaccount.com';
    const outcome = await auth.authenticate({
      'x-goog-iap-jwt-assertion': await iap.assertion(other, BACKEND),
      'proxy-authorization': `Bearer ${await robotToken(other)}`,
      'x-proxy-auth': `Bearer ${tokeninfo.issue('helen@example.com')}`,
    });
    expect(outcome.failure?.reason).toBe('service_account_not_allowed');
    expect(outcome.failure?.attempts.iap).toContain('intruder@proj.iam.gserviceaccount.com is not in server.auth.iap.allowedServiceAccounts');
  });

  it('refuses a user calling for another user, an assertion for another backend, a forged one, and none at all', async () => {
    const forOther = await auth.authenticate({
      'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND),
      'x-proxy-auth': `Bearer ${tokeninfo.issue('helen@example.com')}`,
    });
    expect(forOther.failure?.reason).toBe('service_account_not_allowed');
    expect(reason(await auth.authenticate({ 'x-goog-iap-jwt-assertion': await iap.assertion(ROBOT, '/projects/123/global/backendServices/999') }))).toBe('wrong_audience');
    expect(reason(await auth.authenticate({ 'x-goog-iap-jwt-assertion': await iap.assertion(ROBOT, BACKEND, {}, { key: await iap.foreignKey() }) }))).toBe('bad_signature');
    const noAssertion = await auth.authenticate({ 'proxy-authorization': `Bearer ${await robotToken()}` });
    expect(noAssertion.failure?.reason).toBe('iap_assertion_missing');
  });
});

describe('IAP as the front door (iap.required, the default)', () => {
  let frontDoor: Authenticator;
  beforeAll(() => {
    // The set-up docs/central-server.md describes: IAP, and Google's issuer with the IAP client among its audiences.
    frontDoor = createAuthenticator(
      config({
        oidc: [{ issuer: 'https://accounts.google.com', audiences: [AUD, IAP_CLIENT], certsUrl: google.googleCertsUrl }],
        accessTokens: { tokeninfoUrl: tokeninfo.url, cacheSeconds: 300, audiences: [CLI_CLIENT] },
        iap: { audiences: [BACKEND], allowedServiceAccounts: [ROBOT], publicKeysUrl: iap.publicKeysUrl },
      }),
    )!;
  });
  const googleIdToken = (email: string) =>
    google.mint({ iss: 'https://accounts.google.com', aud: IAP_CLIENT, sub: email, email, email_verified: true, iat: now(), exp: now() + 3600 });

  it('refuses a valid ID token or access token that did not come through the proxy', async () => {
    const idToken = await frontDoor.authenticate(bearer(await googleIdToken('admin@example.com')));
    expect(idToken.failure).toMatchObject({ reason: 'iap_assertion_missing', statusCode: 401 });
    expect(Object.keys(idToken.failure!.attempts)).toEqual(['iap']);
    expect(reason(await frontDoor.authenticate(bearer(tokeninfo.issue('helen@example.com'))))).toBe('iap_assertion_missing');
    expect(reason(await frontDoor.authenticate({}))).toBe('iap_assertion_missing');
  });

  it("refuses a user who came through the proxy with another user's token, and does not ask oidc", async () => {
    const outcome = await frontDoor.authenticate({
      'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND),
      ...bearer(await googleIdToken('admin@example.com')),
    });
    expect(outcome.failure?.reason).toBe('service_account_not_allowed');
    expect(Object.keys(outcome.failure!.attempts)).toEqual(['iap']);
  });

  it('lets in what came through the proxy', async () => {
    const outcome = await frontDoor.authenticate({ 'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND) });
    expect(outcome.identity).toMatchObject({ userId: 'judy@example.com', strategy: 'iap' });
  });
});

describe('IAP beside other strategies (iap.required: false)', () => {
  it("a request carrying IAP's headers is judged by iap alone: another user's token in Authorization is not rescued by oidc", async () => {
    const outcome = await auth.authenticate({
      'x-goog-iap-jwt-assertion': await iap.assertion('judy@example.com', BACKEND),
      ...bearer(await issuer.idToken('admin@example.com', AUD)),
    });
    expect(outcome.failure?.reason).toBe('service_account_not_allowed');
    expect(Object.keys(outcome.failure!.attempts)).toEqual(['iap']);
  });

  it('a request without them may use another strategy', async () => {
    expect((await auth.authenticate(bearer(await issuer.idToken('kim@example.com', AUD)))).identity).toMatchObject({ userId: 'kim@example.com', strategy: 'oidc' });
  });
});

describe('order and reasons', () => {
  it('no credential at all is missing_token, with every strategy not applicable', async () => {
    const outcome = await auth.authenticate({});
    expect(outcome.failure).toMatchObject({ reason: 'missing_token', statusCode: 401 });
    expect(Object.keys(outcome.failure!.attempts)).toEqual(['iap', 'oidc', 'accessTokens']);
  });

  it('a header of another scheme is malformed', async () => {
    expect(reason(await auth.authenticate({ authorization: 'Basic YWxpY2U6cGFzcw==' }))).toBe('malformed_token');
  });

  it('an opaque token with no access-token check configured is malformed, not missing', async () => {
    const idOnly = createAuthenticator(config({ oidc: [{ issuer: issuer.url, audiences: [AUD] }] }))!;
    expect(reason(await idOnly.authenticate(bearer('ya29.opaque')))).toBe('malformed_token');
  });

  it('users.allowedDomains keeps other domains out', async () => {
    const corp = createAuthenticator(config({ oidc: [{ issuer: issuer.url, audiences: [AUD] }], users: { allowedDomains: ['example.com'] } }))!;
    expect((await corp.authenticate(bearer(await issuer.idToken('alice@example.com', AUD)))).identity?.userId).toBe('alice@example.com');
    expect(reason(await corp.authenticate(bearer(await issuer.idToken('eve@elsewhere.test', AUD))))).toBe('user_not_allowed');
  });
});
