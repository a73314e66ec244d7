// `server.auth` and the top-level `mode`: who may call the engine, and how a caller proves it (ID tokens,
// OAuth 2.0 access tokens, an identity-aware proxy in front). Read at start only, from the config file: the
// config API and the operator never set `server`. The checks of the tokens live in inbound/identity/.

import { ConfigError } from './config-error.ts';

/** `proxy`: the local proxy and the sidecar (the default). `server`: the central server (auth on by default). */
export type EngineMode = 'proxy' | 'server';
export const ENGINE_MODES: readonly EngineMode[] = ['proxy', 'server'];

/** Google's ID-token issuer, in both spellings Google puts in `iss`. Tokens from it are checked by google-auth-library. */
export const GOOGLE_ISSUERS: readonly string[] = ['https://accounts.google.com', 'accounts.google.com'];
export const GOOGLE_CERTS_URL = 'https://www.googleapis.com/oauth2/v1/certs';
export const GOOGLE_TOKENINFO_URL = 'https://oauth2.googleapis.com/tokeninfo';
export const IAP_PUBLIC_KEYS_URL = 'https://www.gstatic.com/iap/verify/public_key';

export interface OidcIssuerConfig {
  /** `iss` of the tokens, exactly as the issuer writes it. */
  issuer: string;
  /** `aud` values accepted (client ids). At least one. */
  audiences: string[];
  /** The issuer's JWKS; null: the `jwks_uri` of `{issuer}/.well-known/openid-configuration`. Not for Google. */
  jwksUri: string | null;
  /** Google only: the PEM certificates google-auth-library verifies with (default Google's v1 certs). */
  certsUrl?: string;
}

export interface AccessTokenConfig {
  /** Google's tokeninfo endpoint, or one that answers in its shape. */
  tokeninfoUrl: string;
  /** How long a good answer is reused; never past the token's own expiry. */
  cacheSeconds: number;
  /**
   * OAuth client ids (`aud` or `azp` of the answer) whose tokens are accepted; at least one. Any OAuth app can
   * have a user sign in and hold an access token for them, so a token issued to another app must not pass.
   */
  audiences: string[];
  /**
   * tokeninfo lookups of tokens no cache knows, at most this many a second on average (a token bucket), with
   * `lookupBurst` at once after a quiet spell and `concurrentLookups` in flight. Past them a request with a new
   * token is a 503 token_lookups_throttled with Retry-After; cached tokens are not affected.
   */
  lookupsPerSecond: number;
  lookupBurst: number;
  concurrentLookups: number;
}

export interface IapConfig {
  enabled: boolean;
  /**
   * true (the default): IAP is the front door. A request without IAP's signed header did not come through it
   * and is refused, whatever else it carries; the other strategies only check the tokens IAP passed along.
   * false: IAP is one way in among others (callers inside the network may come with a plain ID token). Either
   * way, a request that carries IAP's headers is judged by iap alone: a refusal there is never rescued by
   * another strategy.
   */
  required: boolean;
  /** `aud` of IAP's signed header (`/projects/N/global/backendServices/M` or `/projects/N/apps/ID`); at least one when enabled. */
  audiences: string[];
  /** Service accounts that may come in with Proxy-Authorization and call on behalf of a user (X-Proxy-Auth). */
  allowedServiceAccounts: string[];
  /** IAP's public keys (kid → PEM). */
  publicKeysUrl: string;
}

export interface ServerAuthConfig {
  /** true: every call needs an identity. false: an identity is used when given, a bad one is still refused. */
  required: boolean;
  oidc: OidcIssuerConfig[];
  accessTokens: AccessTokenConfig | null;
  iap: IapConfig | null;
  users: {
    /** The claim that becomes the span's user_id (and the budget key). */
    claim: string;
    /** The claim listing the caller's groups, matched against `admins`. */
    groupsClaim: string;
    /** E-mail domains whose users are let in; empty: any identity a strategy accepts. */
    allowedDomains: string[];
  };
  /** Users (e-mail or user id) and groups that may use /_local/api in server mode. */
  admins: string[];
  /** `required`: GET /healthz on the serving port needs an identity; the probe-only port stays open. */
  health: 'required' | 'open';
}

export function defaultServerAuth(): ServerAuthConfig {
  return {
    required: false,
    oidc: [],
    accessTokens: null,
    iap: null,
    users: { claim: 'email', groupsClaim: 'groups', allowedDomains: [] },
    admins: [],
    health: 'open',
  };
}

/** True when at least one strategy is configured, i.e. the engine checks credentials at all. */
export function hasAuthStrategy(auth: ServerAuthConfig): boolean {
  return auth.oidc.length > 0 || auth.accessTokens !== null || auth.iap?.enabled === true;
}

type Obj = Record<string, unknown>;

const URL_PATTERN = /^https?:\/\/[^\s/?#@]+(?:\/[^\s?#]*)?$/;
const CLAIM = /^[A-Za-z0-9_.:-]{1,64}$/;
const DOMAIN = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/;
const MAX_LIST = 100;

/** A small reader over one object of the section: each getter names the field in its error. */
class Fields {
  readonly #value: Obj;
  readonly #field: string;

  constructor(input: unknown, field: string, allowed: readonly string[]) {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ConfigError(field, 'must be an object');
    this.#value = input as Obj;
    this.#field = field;
    for (const key of Object.keys(this.#value)) {
      if (!allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${allowed.join(', ')})`);
    }
  }

  has(key: string): boolean {
    return this.#value[key] !== undefined;
  }

  raw(key: string): unknown {
    return this.#value[key];
  }

  name(key: string): string {
    return `${this.#field}.${key}`;
  }

  boolean(key: string): boolean | undefined {
    const v = this.#value[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') throw new ConfigError(this.name(key), `must be true or false (got ${JSON.stringify(v)})`);
    return v;
  }

  string(key: string, check?: { pattern: RegExp; hint: string }): string | undefined {
    const v = this.#value[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0 || v.length > 2048) throw new ConfigError(this.name(key), 'must be a non-empty string');
    if (check && !check.pattern.test(v)) throw new ConfigError(this.name(key), `${check.hint} (got ${JSON.stringify(v)})`);
    return v;
  }

  url(key: string): string | undefined {
    return this.string(key, { pattern: URL_PATTERN, hint: 'must be an http(s) URL without user:password@, query or fragment' });
  }

  integer(key: string, min: number, max: number): number | undefined {
    const v = this.#value[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new ConfigError(this.name(key), `must be an integer at least ${min} and at most ${max} (got ${JSON.stringify(v)})`);
    }
    return v;
  }

  list(key: string, check?: (entry: string, field: string) => string): string[] | undefined {
    const v = this.#value[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.length > MAX_LIST) throw new ConfigError(this.name(key), `must be a list of at most ${MAX_LIST} strings`);
    return v.map((entry, i) => {
      const field = `${this.name(key)}[${i}]`;
      if (typeof entry !== 'string' || entry.length === 0 || entry.length > 512) throw new ConfigError(field, 'must be a non-empty string');
      return check ? check(entry, field) : entry;
    });
  }
}

function isGoogleIssuer(issuer: string): boolean {
  return GOOGLE_ISSUERS.includes(issuer);
}

function parseIssuer(input: unknown, field: string): OidcIssuerConfig {
  const v = new Fields(input, field, ['issuer', 'audiences', 'jwksUri', 'certsUrl']);
  const issuer = v.string('issuer');
  if (issuer === undefined) throw new ConfigError(v.name('issuer'), 'is required');
  const google = isGoogleIssuer(issuer);
  if (!google && !/^https:\/\/[^\s?#@]+$/.test(issuer) && !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/[^\s?#]*)?$/.test(issuer)) {
    throw new ConfigError(v.name('issuer'), `must be an https URL (http only on loopback, for tests) (got ${JSON.stringify(issuer)})`);
  }
  const audiences = v.list('audiences');
  if (audiences === undefined || audiences.length === 0) {
    throw new ConfigError(
      v.name('audiences'),
      'must list at least one audience (the client ids the tokens are issued for): a token for any audience would be a token for any application',
    );
  }
  const jwksRaw = v.raw('jwksUri');
  const jwksUri = jwksRaw === null ? null : (v.url('jwksUri') ?? null);
  if (google && jwksUri !== null) {
    throw new ConfigError(v.name('jwksUri'), `is not used for ${issuer}: google-auth-library verifies Google's tokens with its PEM certificates; set certsUrl to move them`);
  }
  const certsUrl = v.url('certsUrl');
  if (!google && certsUrl !== undefined) throw new ConfigError(v.name('certsUrl'), `is for Google's issuer only; ${issuer} publishes a JWKS (jwksUri)`);
  const out: OidcIssuerConfig = { issuer, audiences, jwksUri };
  if (google) out.certsUrl = certsUrl ?? GOOGLE_CERTS_URL;
  return out;
}

function parseAccessTokens(input: unknown, field: string): AccessTokenConfig {
  const v = new Fields(input, field, ['tokeninfoUrl', 'cacheSeconds', 'audiences', 'lookupsPerSecond', 'lookupBurst', 'concurrentLookups']);
  const audiences = v.list('audiences') ?? [];
  if (audiences.length === 0) {
    throw new ConfigError(
      v.name('audiences'),
      "must list the OAuth client ids whose access tokens are accepted (tokeninfo's aud or azp): without it a token any other app obtained for a user would be accepted",
    );
  }
  return {
    tokeninfoUrl: v.url('tokeninfoUrl') ?? GOOGLE_TOKENINFO_URL,
    cacheSeconds: v.integer('cacheSeconds', 0, 3600) ?? 300,
    audiences,
    lookupsPerSecond: v.integer('lookupsPerSecond', 1, 1000) ?? 5,
    lookupBurst: v.integer('lookupBurst', 1, 10_000) ?? 20,
    concurrentLookups: v.integer('concurrentLookups', 1, 1000) ?? 8,
  };
}

function email(entry: string, field: string): string {
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(entry)) throw new ConfigError(field, `must be an e-mail address (got ${JSON.stringify(entry)})`);
  return entry.toLowerCase();
}

function parseIap(input: unknown, field: string): IapConfig {
  const v = new Fields(input, field, ['enabled', 'required', 'audiences', 'allowedServiceAccounts', 'publicKeysUrl']);
  const iap: IapConfig = {
    enabled: v.boolean('enabled') ?? true,
    required: v.boolean('required') ?? true,
    audiences:
      v.list('audiences', (entry, f) => {
        if (!/^\/projects\/\d+\/(global\/backendServices\/\d+|apps\/[a-z][a-z0-9-]*)$/.test(entry)) {
          throw new ConfigError(f, `must be /projects/<number>/global/backendServices/<id> or /projects/<number>/apps/<project-id> (got ${JSON.stringify(entry)})`);
        }
        return entry;
      }) ?? [],
    allowedServiceAccounts: v.list('allowedServiceAccounts', email) ?? [],
    publicKeysUrl: v.url('publicKeysUrl') ?? IAP_PUBLIC_KEYS_URL,
  };
  if (iap.enabled && iap.audiences.length === 0) {
    throw new ConfigError(
      v.name('audiences'),
      "must list the audience of the proxy's signed header (/projects/<number>/global/backendServices/<id>): without it a header signed for any other backend would be accepted",
    );
  }
  return iap;
}

/**
 * Checks a `server.auth` section. Fields left out stay out (undefined), so the mode's defaults can fill them
 * in later (tollgate proxy --mode server); the result is merged over defaultServerAuth().
 */
export function parseServerAuth(input: unknown, field: string): Partial<ServerAuthConfig> {
  const v = new Fields(input, field, ['required', 'oidc', 'accessTokens', 'iap', 'users', 'admins', 'health']);
  const out: Partial<ServerAuthConfig> = {};
  const required = v.boolean('required');
  if (required !== undefined) out.required = required;
  if (v.has('oidc')) {
    const list = v.raw('oidc');
    if (!Array.isArray(list) || list.length > 16) throw new ConfigError(v.name('oidc'), 'must be a list of at most 16 issuers');
    out.oidc = list.map((entry, i) => parseIssuer(entry, `${v.name('oidc')}[${i}]`));
    const seen = new Map<string, number>();
    out.oidc.forEach((entry, i) => {
      const key = isGoogleIssuer(entry.issuer) ? 'google' : entry.issuer;
      const first = seen.get(key);
      if (first !== undefined)
        throw new ConfigError(
          `${v.name('oidc')}[${i}].issuer`,
          `repeats ${JSON.stringify(entry.issuer)} (already at ${v.name('oidc')}[${first}]); list its audiences in one entry`,
        );
      seen.set(key, i);
    });
  }
  if (v.raw('accessTokens') === null) out.accessTokens = null;
  else if (v.has('accessTokens')) out.accessTokens = parseAccessTokens(v.raw('accessTokens'), v.name('accessTokens'));
  if (v.raw('iap') === null) out.iap = null;
  else if (v.has('iap')) out.iap = parseIap(v.raw('iap'), v.name('iap'));
  if (v.has('users')) {
    const u = new Fields(v.raw('users'), v.name('users'), ['claim', 'groupsClaim', 'allowedDomains']);
    const claim = { pattern: CLAIM, hint: 'must be a claim name such as email or sub' };
    out.users = {
      claim: u.string('claim', claim) ?? 'email',
      groupsClaim: u.string('groupsClaim', claim) ?? 'groups',
      allowedDomains:
        u.list('allowedDomains', (entry, f) => {
          const domain = entry.toLowerCase();
          if (!DOMAIN.test(domain)) throw new ConfigError(f, `must be a domain such as example.com (got ${JSON.stringify(entry)})`);
          return domain;
        }) ?? [],
    };
  }
  const admins = v.list('admins', (entry) => entry.toLowerCase());
  if (admins !== undefined) out.admins = admins;
  const health = v.string('health', { pattern: /^(required|open)$/, hint: 'must be required or open' });
  if (health !== undefined) out.health = health as ServerAuthConfig['health'];
  return out;
}

/**
 * A config that cannot authenticate anyone is refused at start: `required` with no strategy would refuse every
 * call, and admins with no strategy could never be recognised.
 */
export function checkServerAuth(auth: ServerAuthConfig, mode: EngineMode): void {
  if (hasAuthStrategy(auth)) return;
  if (auth.required || mode === 'server') {
    throw new ConfigError(
      'server.auth',
      `needs at least one way to identify callers${mode === 'server' ? ' in server mode' : ' when required is true'}: oidc (ID tokens), accessTokens (OAuth 2.0 access tokens) or iap (an identity-aware proxy in front)`,
    );
  }
  if (auth.health === 'required') throw new ConfigError('server.auth.health', 'is required, but no strategy (oidc, accessTokens, iap) is configured to check the token');
}

export function parseEngineMode(input: unknown, field: string): EngineMode {
  if (typeof input !== 'string' || !(ENGINE_MODES as readonly string[]).includes(input)) {
    throw new ConfigError(field, `must be one of ${ENGINE_MODES.join(', ')} (got ${JSON.stringify(input)})`);
  }
  return input as EngineMode;
}

/**
 * `--mode server` (or `mode: server` in the file) turns the central server's defaults on under whatever the
 * file sets: every call needs an identity, /healthz on the serving port too, and it listens on every
 * interface (a central server is meant to be reached; the Host check still applies).
 */
export function applyServerModeDefaults(patch: { mode?: EngineMode; server?: { host?: string; auth?: Partial<ServerAuthConfig> } }): void {
  if (patch.mode !== 'server') return;
  const server = (patch.server ??= {});
  server.host ??= '0.0.0.0';
  const auth = (server.auth ??= {});
  auth.required ??= true;
  auth.health ??= 'required';
}
