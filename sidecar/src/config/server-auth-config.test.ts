import { describe, expect, it } from 'vitest';
import { parseConfigYaml } from './config-file.ts';
import { ConfigStore } from './config-store.ts';
import { applyServerModeDefaults, checkServerAuth } from '../../../contracts/server-auth-config.ts';

const ISSUER = 'https://login.example.com';

describe('server.auth in the config file', () => {
  it("reads the issue's example, filling defaults, and keeps the mode", () => {
    const patch = parseConfigYaml(
      `
mode: server
server:
  auth:
    required: true
    oidc:
      - issuer: https://accounts.google.com
        audiences: ["32555940559.apps.googleusercontent.com", "tollgate"]
        jwksUri: null
    accessTokens:
      tokeninfoUrl: https://oauth2.googleapis.com/tokeninfo
      cacheSeconds: 300
      audiences: ["32555940559.apps.googleusercontent.com"]
    iap:
      enabled: true
      audiences: ["/projects/123/global/backendServices/456"]
      allowedServiceAccounts: ["tollgate-client@proj.iam.gserviceaccount.com"]
    users: { claim: email }
    admins: [Platform-Team@example.com]
    health: required
`,
      'server.yaml',
    );
    const config = new ConfigStore(patch).get();
    expect(config.mode).toBe('server');
    expect(config.server.auth).toEqual({
      required: true,
      oidc: [
        {
          issuer: 'https://accounts.google.com',
          audiences: ['32555940559.apps.googleusercontent.com', 'tollgate'],
          jwksUri: null,
          certsUrl: 'https://www.googleapis.com/oauth2/v1/certs',
        },
      ],
      accessTokens: {
        tokeninfoUrl: 'https://oauth2.googleapis.com/tokeninfo',
        cacheSeconds: 300,
        audiences: ['32555940559.apps.googleusercontent.com'],
        lookupsPerSecond: 5,
        lookupBurst: 20,
        concurrentLookups: 8,
      },
      iap: {
        enabled: true,
        required: true,
        audiences: ['/projects/123/global/backendServices/456'],
        allowedServiceAccounts: ['tollgate-client@proj.iam.gserviceaccount.com'],
        publicKeysUrl: 'https://www.gstatic.com/iap/verify/public_key',
      },
      users: { claim: 'email', groupsClaim: 'groups', allowedDomains: [] },
      admins: ['platform-team@example.com'],
      health: 'required',
    });
  });

  it.each([
    ['server: { auth: { oidc: [{ issuer: "https://login.example.com" }] } }', 'server.yaml: server.auth.oidc[0].audiences must list at least one audience'],
    ['server: { auth: { oidc: [{ issuer: "http://login.example.com", audiences: [a] }] } }', 'server.yaml: server.auth.oidc[0].issuer must be an https URL'],
    [
      'server: { auth: { oidc: [{ issuer: "https://accounts.google.com", audiences: [a], jwksUri: "https://x.example/jwks" }] } }',
      'server.yaml: server.auth.oidc[0].jwksUri is not used for https://accounts.google.com',
    ],
    [`server: { auth: { oidc: [{ issuer: "${ISSUER}", audiences: [a] }, { issuer: "${ISSUER}", audiences: [b] }] } }`, 'server.yaml: server.auth.oidc[1].issuer repeats'],
    ['server: { auth: { iap: { enabled: true } } }', 'server.yaml: server.auth.iap.audiences must list the audience'],
    ['server: { auth: { iap: { audiences: ["/projects/x/global/backendServices/1"] } } }', 'server.yaml: server.auth.iap.audiences[0] must be /projects/<number>'],
    [
      'server: { auth: { iap: { audiences: ["/projects/1/apps/p"], allowedServiceAccounts: [robot] } } }',
      'server.yaml: server.auth.iap.allowedServiceAccounts[0] must be an e-mail address',
    ],
    ['server: { auth: { health: sometimes } }', 'server.yaml: server.auth.health must be required or open (got "sometimes")'],
    [
      'server: { auth: { accessTokens: { cacheSeconds: 86400, audiences: [a] } } }',
      'server.yaml: server.auth.accessTokens.cacheSeconds must be an integer at least 0 and at most 3600',
    ],
    ['server: { auth: { accessTokens: { cacheSeconds: 60 } } }', 'server.yaml: server.auth.accessTokens.audiences must list the OAuth client ids whose access tokens are accepted'],
    ['server: { auth: { user: { claim: email } } }', 'server.yaml: server.auth.user is not a known field'],
    ['mode: central', 'server.yaml: mode must be one of proxy, server (got "central")'],
  ])('refuses %s', (yaml, message) => {
    expect(() => parseConfigYaml(yaml, 'server.yaml')).toThrow(message);
  });

  it('server mode turns required, health and the wildcard host on, under what the file says', () => {
    const patch = parseConfigYaml(`mode: server\nserver: { host: 10.0.0.5, auth: { health: open, oidc: [{ issuer: "${ISSUER}", audiences: [t] }] } }`, 'f');
    applyServerModeDefaults(patch);
    const config = new ConfigStore(patch).get();
    expect(config.server.host).toBe('10.0.0.5');
    expect(config.server.auth).toMatchObject({ required: true, health: 'open' });

    const bare = parseConfigYaml(`mode: server\nserver: { auth: { oidc: [{ issuer: "${ISSUER}", audiences: [t] }] } }`, 'f');
    applyServerModeDefaults(bare);
    expect(new ConfigStore(bare).get().server).toMatchObject({ host: '0.0.0.0', auth: { required: true, health: 'required' } });

    const proxy = new ConfigStore(parseConfigYaml('server: { port: 9 }', 'f')).get();
    expect(proxy.mode).toBe('proxy');
    expect(proxy.server.auth).toMatchObject({ required: false, health: 'open', oidc: [] });
  });

  it('refuses a server that could identify nobody', () => {
    const patch = parseConfigYaml('mode: server', 'f');
    applyServerModeDefaults(patch);
    const config = new ConfigStore(patch).get();
    expect(() => checkServerAuth(config.server.auth, config.mode)).toThrow('server.auth needs at least one way to identify callers in server mode: oidc (ID tokens), accessTokens');
    expect(() => checkServerAuth(new ConfigStore().get().server.auth, 'proxy')).not.toThrow();
  });

  it('the management API cannot set mode or server.auth', async () => {
    const { parseRuntimeConfigPatch } = await import('../../../contracts/config-schema.ts');
    const api = ['pricing', 'cache', 'upstreams', 'breaker', 'gateway'];
    expect(() => parseRuntimeConfigPatch({ mode: 'proxy' }, api)).toThrow('mode is not a known field');
    expect(() => parseRuntimeConfigPatch({ server: { auth: { required: false } } }, api)).toThrow('server is not a known field');
  });
});
