// The `budgets` section of the runtime config (config file, POST /_local/api/config) and the policies the
// operator renders from BudgetPolicy resources for a sidecar: their types, defaults and validation. One parser
// checks every source, so a bad value is refused everywhere with the field's name and nothing is half-applied.
// Amounts stay decimal USD strings here (JSON-safe and exact); ledger units are derived from them (money.ts).

import { ConfigError } from './config-error.ts';
import { BUDGET_PERIODS, type BudgetPeriod, isTimeZone } from './budget-period.ts';
import { formatUsd, parseUsd } from './money.ts';
import { parseRateLimits, type RateLimitsConfig } from './rate-limits-config.ts';
import { type BudgetTeamConfig, parseSubjects, refuseSameSubjects } from './budget-subjects.ts';

export const BUDGET_ENFORCEMENTS = ['block', 'alert'] as const;
export type BudgetEnforcement = (typeof BUDGET_ENFORCEMENTS)[number];

/** A grant written in a BudgetPolicy (cluster mode); grants of the local proxy and server live in its ledger. */
export interface BudgetGrantConfig {
  /** Stable id derived from the grant's fields by the operator: editing a grant makes it a new grant. */
  id: string;
  user: string;
  amountUsd: string;
  reason?: string;
  /** RFC 3339; absent: never expires. */
  expiresAt?: string;
  /** RFC 3339: when the grant first appeared in the policy (creation of the policy or of the grant). */
  createdAt: string;
}

export interface BudgetPolicyConfig {
  /** Unique among the policies; in a cluster `<namespace>/<name>` of the BudgetPolicy. */
  name: string;
  /**
   * User ids this policy limits, each separately; `*` matches every user no other policy names exactly. Empty
   * when the policy limits a team or the namespace (ADR 1312).
   */
  users: string[];
  /** `<namespace>/<name>`: each service account's calls (user system:serviceaccount:<ns>:<name>) limited separately. */
  serviceAccounts?: string[];
  /** One budget shared by the team's users and service accounts. */
  team?: BudgetTeamConfig;
  /**
   * Namespace: one budget shared by every call of the namespace (of the engine, for a local proxy or server).
   * Workload: one budget shared by every call through the pods a BudgetPolicy selects (BudgetPolicies only).
   */
  scope?: 'Workload' | 'Namespace';
  /** Per user per period, decimal USD with at most six decimals. */
  limitUsd: string;
  period: BudgetPeriod;
  /** IANA time zone the calendar periods follow. */
  timeZone: string;
  /** Percentages of the limit that log a `budget alert` once per user per period, ascending. */
  alertThresholds: number[];
  /** block: refuse calls once the budget is spent; alert: only alert. */
  enforcement: BudgetEnforcement;
  /** Cluster mode only: grants from the BudgetPolicy spec. */
  grants?: BudgetGrantConfig[];
  /** Per user the policy matches, counted per engine process unless the store is shared (ADR 1309). */
  rateLimits?: RateLimitsConfig;
}

/** A Redis-compatible store (Redis 7, Valkey) shared by several engines (ADR 1310). */
export interface BudgetRedisConfig {
  /** redis://[user@]host:port[/db] or rediss:// (TLS); never with a password in it. */
  url: string;
  /** Hash tag of every key: `{<keyPrefix>}:…`, so one ledger is one Redis Cluster slot. */
  keyPrefix: string;
  /** The environment variable that holds the password. */
  passwordEnv?: string;
  /** A file that holds the password (a mounted Secret). */
  passwordFile?: string;
}

export type BudgetLedgerConfig =
  | { kind: 'sqlite'; path?: string }
  | { kind: 'firestore'; projectId?: string; databaseId?: string; collection: string }
  | { kind: 'memory' }
  | ({ kind: 'redis' } & BudgetRedisConfig);

export const BUDGET_LEDGER_KINDS = ['sqlite', 'firestore', 'memory', 'redis'] as const;

/**
 * What a budgeted call gets while the shared ledger cannot be written: open admits it on what memory knows;
 * closed refuses it with 503 once the ledger has failed for longer than UNREACHABLE_GRACE_MS.
 */
export const BUDGET_UNREACHABLE_RULES = ['open', 'closed'] as const;
export type BudgetUnreachableRule = (typeof BUDGET_UNREACHABLE_RULES)[number];
export const UNREACHABLE_GRACE_MS = 30_000;

export interface BudgetsConfig {
  /**
   * Where spend and grants are kept; read when the engine starts. Absent: SQLite next to the span file, or
   * memory when spans are kept in memory.
   */
  ledger?: BudgetLedgerConfig;
  /** Absent: open. */
  unreachable?: BudgetUnreachableRule;
  policies: BudgetPolicyConfig[];
}

/** What one config source sets; `policies` replaces the whole list of earlier layers. */
export interface BudgetsPatch {
  ledger?: BudgetLedgerConfig;
  unreachable?: BudgetUnreachableRule;
  policies?: BudgetPolicyConfig[];
}

export const DEFAULT_ALERT_THRESHOLDS = [80, 90, 100];
export const DEFAULT_FIRESTORE_COLLECTION = 'budgets';
export const DEFAULT_REDIS_KEY_PREFIX = 'tollgate:budgets';
export const MAX_BUDGET_POLICIES = 100;
export const MAX_POLICY_USERS = 1000;
export const MAX_POLICY_GRANTS = 256;
/** Highest alert threshold a policy can have, in percent of its limit. */
export const MAX_ALERT_THRESHOLD = 1000;
const MAX_USER_ID = 256;
const POLICY_NAME = /^[A-Za-z0-9]([A-Za-z0-9._/-]{0,250}[A-Za-z0-9])?$/;
const FIRESTORE_COLLECTION = /^[A-Za-z0-9_-]{1,100}$/;
const PROJECT = /^[a-z0-9][a-z0-9.:-]{0,127}$/;
const REDIS_KEY_PREFIX = /^[A-Za-z0-9:._-]{1,64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

type Obj = Record<string, unknown>;

function object(value: unknown, field: string): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(field, 'must be an object');
  return value as Obj;
}

function onlyKeys(value: Obj, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${allowed.join(', ')})`);
  }
}

function nonEmptyString(value: unknown, field: string, max = 4096): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new ConfigError(field, `must be a non-empty string of at most ${max} characters`);
  }
  return value;
}

/** A USD amount (number or decimal string) normalised to its exact decimal string. */
export function parseUsdField(value: unknown, field: string, opts: { positive?: boolean } = {}): string {
  const units = parseUsd(value);
  if (typeof units === 'string') throw new ConfigError(field, units);
  if (opts.positive && units === 0n) throw new ConfigError(field, 'must be more than 0 USD');
  return formatUsd(units);
}

/** An RFC 3339 timestamp, normalised to UTC with milliseconds. */
export function parseTimestamp(value: unknown, field: string): string {
  if (typeof value !== 'string' || !RFC3339.test(value) || Number.isNaN(Date.parse(value))) {
    throw new ConfigError(field, `must be an RFC 3339 timestamp such as 2026-12-31T23:59:59Z (got ${JSON.stringify(value)})`);
  }
  return new Date(Date.parse(value)).toISOString();
}

export function parseUserId(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_USER_ID || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new ConfigError(field, `must be a user id: a non-empty string of at most ${MAX_USER_ID} characters without control characters`);
  }
  return value;
}

function parseUsers(input: unknown, field: string): string[] {
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_POLICY_USERS) {
    throw new ConfigError(field, `must be a list of 1 to ${MAX_POLICY_USERS} user ids, or ["*"] for every user`);
  }
  const users = input.map((u, i) => parseUserId(u, `${field}[${i}]`));
  const seen = new Set<string>();
  users.forEach((u, i) => {
    if (seen.has(u)) throw new ConfigError(`${field}[${i}]`, `repeats ${JSON.stringify(u)}`);
    seen.add(u);
  });
  return users;
}

function parseThresholds(value: unknown, field: string): number[] {
  if (!Array.isArray(value) || value.length > 10) throw new ConfigError(field, 'must be a list of at most 10 percentages');
  const out = value.map((v, i) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_ALERT_THRESHOLD) {
      throw new ConfigError(`${field}[${i}]`, `must be an integer percentage from 1 to ${MAX_ALERT_THRESHOLD} (got ${JSON.stringify(v)})`);
    }
    return v;
  });
  for (let i = 1; i < out.length; i++) {
    if (out[i]! <= out[i - 1]!) throw new ConfigError(`${field}[${i}]`, `must be greater than the threshold before it (${out[i - 1]}): list thresholds once, ascending`);
  }
  return out;
}

function parseGrant(input: unknown, field: string): BudgetGrantConfig {
  const v = object(input, field);
  onlyKeys(v, field, ['id', 'user', 'amountUsd', 'reason', 'expiresAt', 'createdAt']);
  const grant: BudgetGrantConfig = {
    id: nonEmptyString(v.id, `${field}.id`, 64),
    user: parseUserId(v.user, `${field}.user`),
    amountUsd: parseUsdField(v.amountUsd, `${field}.amountUsd`, { positive: true }),
    createdAt: parseTimestamp(v.createdAt, `${field}.createdAt`),
  };
  if (v.reason !== undefined) grant.reason = nonEmptyString(v.reason, `${field}.reason`, 1024);
  if (v.expiresAt !== undefined) grant.expiresAt = parseTimestamp(v.expiresAt, `${field}.expiresAt`);
  return grant;
}

/** One policy; defaults filled in. `allowGrants` only for policies the operator renders. */
export function parseBudgetPolicy(input: unknown, field: string, opts: { allowGrants?: boolean } = {}): BudgetPolicyConfig {
  const v = object(input, field);
  const keys = ['name', 'users', 'serviceAccounts', 'team', 'scope', 'limitUsd', 'period', 'timeZone', 'alertThresholds', 'enforcement', 'rateLimits'];
  if (opts.allowGrants) keys.push('grants');
  else if (v.grants !== undefined) {
    throw new ConfigError(`${field}.grants`, 'cannot be set here: add a grant with POST /_local/api/budgets/{user}/grants (or in a BudgetPolicy)');
  }
  onlyKeys(v, field, keys);
  const name = v.name;
  if (typeof name !== 'string' || !POLICY_NAME.test(name)) {
    throw new ConfigError(`${field}.name`, `must be a name of letters, digits, '.', '_', '-' and '/', at most 252 characters (got ${JSON.stringify(name)})`);
  }
  if (v.limitUsd === undefined) throw new ConfigError(`${field}.limitUsd`, 'is required');
  const subjects = parseSubjects(v, field, parseUsers, parseUserId);
  const period = v.period ?? 'month';
  if (typeof period !== 'string' || !(BUDGET_PERIODS as readonly string[]).includes(period)) {
    throw new ConfigError(`${field}.period`, `must be one of ${BUDGET_PERIODS.join(', ')} (got ${JSON.stringify(period)})`);
  }
  const timeZone = v.timeZone ?? 'UTC';
  if (typeof timeZone !== 'string' || !isTimeZone(timeZone)) {
    throw new ConfigError(`${field}.timeZone`, `must be an IANA time zone such as UTC or Europe/Berlin (got ${JSON.stringify(timeZone)})`);
  }
  const enforcement = v.enforcement ?? 'block';
  if (typeof enforcement !== 'string' || !(BUDGET_ENFORCEMENTS as readonly string[]).includes(enforcement)) {
    throw new ConfigError(`${field}.enforcement`, `must be one of ${BUDGET_ENFORCEMENTS.join(', ')} (got ${JSON.stringify(enforcement)})`);
  }
  const policy: BudgetPolicyConfig = {
    name,
    ...subjects,
    // A user's $0 limit is a budget of grants only; a team or namespace has no grants, so 0 could only refuse all.
    limitUsd: parseUsdField(v.limitUsd, `${field}.limitUsd`, { positive: subjects.users.length === 0 }),
    period: period as BudgetPeriod,
    timeZone,
    alertThresholds: v.alertThresholds === undefined ? [...DEFAULT_ALERT_THRESHOLDS] : parseThresholds(v.alertThresholds, `${field}.alertThresholds`),
    enforcement: enforcement as BudgetEnforcement,
  };
  // On a team, workload or namespace policy the limits are the group's as a whole (ADR 1313), bounded alike.
  if (v.rateLimits !== undefined) policy.rateLimits = parseRateLimits(v.rateLimits, `${field}.rateLimits`);
  if (opts.allowGrants && v.grants !== undefined) {
    if (!Array.isArray(v.grants) || v.grants.length > MAX_POLICY_GRANTS) throw new ConfigError(`${field}.grants`, `must be a list of at most ${MAX_POLICY_GRANTS} grants`);
    policy.grants = v.grants.map((g, i) => parseGrant(g, `${field}.grants[${i}]`));
  }
  return policy;
}

export function parseBudgetPolicies(input: unknown, field: string, opts: { allowGrants?: boolean } = {}): BudgetPolicyConfig[] {
  if (!Array.isArray(input) || input.length > MAX_BUDGET_POLICIES) throw new ConfigError(field, `must be a list of at most ${MAX_BUDGET_POLICIES} policies`);
  const policies = input.map((p, i) => parseBudgetPolicy(p, `${field}[${i}]`, opts));
  const names = new Map<string, number>();
  policies.forEach((p, i) => {
    const first = names.get(p.name);
    if (first !== undefined) throw new ConfigError(`${field}[${i}].name`, `repeats ${JSON.stringify(p.name)} (already at ${field}[${first}])`);
    names.set(p.name, i);
  });
  return policies;
}

function parseLedger(input: unknown, field: string): BudgetLedgerConfig {
  const v = object(input, field);
  const kind = v.kind ?? 'sqlite';
  switch (kind) {
    case 'sqlite': {
      onlyKeys(v, field, ['kind', 'path']);
      return v.path === undefined ? { kind: 'sqlite' } : { kind: 'sqlite', path: nonEmptyString(v.path, `${field}.path`) };
    }
    case 'memory':
      onlyKeys(v, field, ['kind']);
      return { kind: 'memory' };
    case 'firestore': {
      onlyKeys(v, field, ['kind', 'projectId', 'databaseId', 'collection']);
      const collection = v.collection ?? DEFAULT_FIRESTORE_COLLECTION;
      if (typeof collection !== 'string' || !FIRESTORE_COLLECTION.test(collection)) {
        throw new ConfigError(`${field}.collection`, `must be a Firestore collection id of letters, digits, '_' and '-' (got ${JSON.stringify(collection)})`);
      }
      const ledger: Extract<BudgetLedgerConfig, { kind: 'firestore' }> = { kind: 'firestore', collection };
      if (v.projectId !== undefined) {
        if (typeof v.projectId !== 'string' || !PROJECT.test(v.projectId)) throw new ConfigError(`${field}.projectId`, 'must be a Google Cloud project id');
        ledger.projectId = v.projectId;
      }
      if (v.databaseId !== undefined) ledger.databaseId = nonEmptyString(v.databaseId, `${field}.databaseId`, 63);
      return ledger;
    }
    case 'redis':
      return parseRedisLedger(v, field);
    default:
      throw new ConfigError(`${field}.kind`, `must be one of ${BUDGET_LEDGER_KINDS.join(', ')} (got ${JSON.stringify(kind)})`);
  }
}

function parseRedisLedger(v: Obj, field: string): BudgetLedgerConfig {
  onlyKeys(v, field, ['kind', 'url', 'keyPrefix', 'passwordEnv', 'passwordFile']);
  const url = nonEmptyString(v.url, `${field}.url`, 2048);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`${field}.url`, `must be a URL such as redis://redis.tollgate:6379 (got ${JSON.stringify(url)})`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new ConfigError(`${field}.url`, `must start with redis:// or rediss:// (got ${parsed.protocol}//)`);
  if (parsed.hostname === '') throw new ConfigError(`${field}.url`, 'must name a host');
  // A config file is read by many and kept in Git and ConfigMaps; the secret comes from where secrets live.
  if (parsed.password !== '') throw new ConfigError(`${field}.url`, `must not contain a password: set ${field}.passwordEnv or ${field}.passwordFile`);
  const keyPrefix = v.keyPrefix ?? DEFAULT_REDIS_KEY_PREFIX;
  if (typeof keyPrefix !== 'string' || !REDIS_KEY_PREFIX.test(keyPrefix)) {
    throw new ConfigError(`${field}.keyPrefix`, `must be 1 to 64 letters, digits, ':', '.', '_' and '-' (got ${JSON.stringify(keyPrefix)})`);
  }
  if (v.passwordEnv !== undefined && v.passwordFile !== undefined) throw new ConfigError(`${field}.passwordFile`, `cannot be set together with ${field}.passwordEnv`);
  const ledger: Extract<BudgetLedgerConfig, { kind: 'redis' }> = { kind: 'redis', url, keyPrefix };
  if (v.passwordEnv !== undefined) {
    if (typeof v.passwordEnv !== 'string' || !ENV_NAME.test(v.passwordEnv)) throw new ConfigError(`${field}.passwordEnv`, 'must be the name of an environment variable');
    ledger.passwordEnv = v.passwordEnv;
  }
  if (v.passwordFile !== undefined) ledger.passwordFile = nonEmptyString(v.passwordFile, `${field}.passwordFile`);
  return ledger;
}

/** The `budgets` section of a config source. */
export function parseBudgetsPatch(input: unknown, field = 'budgets'): BudgetsPatch {
  const v = object(input, field);
  onlyKeys(v, field, ['ledger', 'unreachable', 'policies']);
  const patch: BudgetsPatch = {};
  if (v.ledger !== undefined) patch.ledger = parseLedger(v.ledger, `${field}.ledger`);
  if (v.unreachable !== undefined) {
    if (typeof v.unreachable !== 'string' || !(BUDGET_UNREACHABLE_RULES as readonly string[]).includes(v.unreachable)) {
      throw new ConfigError(`${field}.unreachable`, `must be one of ${BUDGET_UNREACHABLE_RULES.join(', ')} (got ${JSON.stringify(v.unreachable)})`);
    }
    patch.unreachable = v.unreachable as BudgetUnreachableRule;
  }
  if (v.policies !== undefined) {
    patch.policies = parseBudgetPolicies(v.policies, `${field}.policies`);
    // A config source is one author's list: a subject named twice at one level is a mistake to refuse (ADR 1312).
    // BudgetPolicies are several objects, rendered one by one for the sidecars, where the first still wins.
    refuseSameSubjects(patch.policies, `${field}.policies`);
    const workload = patch.policies.findIndex((p) => p.scope === 'Workload');
    if (workload >= 0) {
      throw new ConfigError(
        `${field}.policies[${workload}].scope`,
        'cannot be Workload here: a workload is the pods a BudgetPolicy selects; use Namespace for every call of this engine',
      );
    }
  }
  return patch;
}

export function defaultBudgetsConfig(): BudgetsConfig {
  return { policies: [] };
}
