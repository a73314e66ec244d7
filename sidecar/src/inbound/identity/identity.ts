// Who made a request, once a strategy has proved it, and why a token was refused. The reasons are stable
// codes: they are in the 401's JSON, in the `all auth strategies failed` log line and in the docs. Messages
// never quote a token (or anything decoded from one that the caller did not prove).

/** The authenticated caller. Routes read it from `request.identity` (caller-user.ts). */
export interface Identity {
  /** The `users.claim` of the credential (e-mail by default): the span's user_id and the budget key. */
  readonly userId: string;
  /** Lower-cased e-mail when the credential carries one. */
  readonly email: string | null;
  /** `sub` of the credential. */
  readonly subject: string;
  /** `iss` of the token, or the tokeninfo endpoint that vouched for an access token. */
  readonly issuer: string;
  /** The caller's groups (`users.groupsClaim`), for `admins`. */
  readonly groups: readonly string[];
  /** Which strategy proved it. */
  readonly strategy: StrategyName;
  /** Behind an identity-aware proxy: the principal the proxy let in, when another user's token named the caller. */
  readonly via?: string;
}

export type StrategyName = 'iap' | 'oidc' | 'accessTokens';

export type AuthReason =
  | 'missing_token'
  | 'malformed_token'
  | 'unsupported_algorithm'
  | 'unknown_issuer'
  | 'unknown_key'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'wrong_audience'
  | 'inactive_token'
  | 'missing_claim'
  | 'email_unverified'
  | 'user_not_allowed'
  | 'iap_assertion_missing'
  | 'service_account_not_allowed'
  | 'principal_mismatch'
  /** The issuer's keys or the tokeninfo endpoint could not be reached: the caller's token may be fine (503). */
  | 'identity_provider_unavailable'
  /** Too many unknown access tokens to look up at tokeninfo right now (lookup-bounds.ts): 503 with Retry-After. */
  | 'token_lookups_throttled';

/** A credential that did not prove an identity; `message` says why in words, never quoting the credential. */
export class TokenRejected extends Error {
  readonly reason: AuthReason;
  /** When the caller may try again (a refusal that says nothing about the token). */
  readonly retryAfterSeconds: number | undefined;
  constructor(reason: AuthReason, message: string, retryAfterSeconds?: number) {
    super(message);
    this.name = 'TokenRejected';
    this.reason = reason;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Claims of a verified token or a tokeninfo answer. */
export type Claims = Readonly<Record<string, unknown>>;

export interface ClaimRules {
  /** users.claim */
  claim: string;
  /** users.groupsClaim */
  groupsClaim: string;
  /** users.allowedDomains (lower case) */
  allowedDomains: readonly string[];
}

function claimString(claims: Claims, name: string): string | null {
  const value = claims[name];
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return null;
}

/**
 * The identity a verified credential names. An e-mail the issuer says is unverified is refused (anyone can
 * put any address on some accounts); so is a domain outside users.allowedDomains.
 */
export function identityFromClaims(claims: Claims, rules: ClaimRules, strategy: StrategyName, issuer: string): Identity {
  const verified = claims.email_verified;
  const rawEmail = claimString(claims, 'email');
  if (rawEmail !== null && (verified === false || verified === 'false')) {
    throw new TokenRejected('email_unverified', "the token's e-mail address is not verified by its issuer");
  }
  const email = rawEmail?.toLowerCase() ?? null;
  const userId = rules.claim === 'email' ? email : claimString(claims, rules.claim);
  if (userId === null) throw new TokenRejected('missing_claim', `the token has no ${JSON.stringify(rules.claim)} claim (server.auth.users.claim)`);
  if (rules.allowedDomains.length > 0) {
    const domain = email?.slice(email.lastIndexOf('@') + 1) ?? null;
    if (domain === null || !rules.allowedDomains.includes(domain)) {
      throw new TokenRejected('user_not_allowed', `${domain === null ? 'a caller without an e-mail address' : `the domain ${domain}`} is not in server.auth.users.allowedDomains`);
    }
  }
  const groupsValue = claims[rules.groupsClaim];
  const groups = Array.isArray(groupsValue) ? groupsValue.filter((g): g is string => typeof g === 'string').map((g) => g.toLowerCase()) : [];
  return { userId, email, subject: claimString(claims, 'sub') ?? userId, issuer, groups, strategy };
}
