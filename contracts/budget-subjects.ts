// Who a budget policy limits, and at which level (ADR 1312). A policy names exactly one kind of subject:
//   users / serviceAccounts  level User: each user id (a service account is the user id its calls carry,
//                            system:serviceaccount:<namespace>:<name>) has a budget of its own;
//   team                     level Team: the team's users and service accounts share one budget;
//   scope: Workload          level Workload: every call through the pods a BudgetPolicy's selector picks shares
//                            one budget (the operator matches the labels and sends the policy to those pods only);
//   scope: Namespace         level Namespace: every call of the engine's namespace shares one budget.
// A call falls under at most one budget per level and is admitted only if each of them has room. Teams do not
// nest: a team lists users and service accounts, never another team.

import { ConfigError } from './config-error.ts';

type BudgetLevel = 'User' | 'Team' | 'Workload' | 'Namespace';

const BUDGET_SCOPES = ['Workload', 'Namespace'] as const;
type BudgetScope = (typeof BUDGET_SCOPES)[number];

export interface BudgetTeamConfig {
  name: string;
  /** User ids of the team's members. */
  users: string[];
  /** `<namespace>/<name>` of the team's service accounts. */
  serviceAccounts: string[];
}

/** The subject fields of a policy, parsed; `users` is empty for a policy above the user level. */
interface BudgetSubjects {
  users: string[];
  serviceAccounts?: string[];
  team?: BudgetTeamConfig;
  scope?: BudgetScope;
}

const SUBJECT_FIELDS = ['users', 'serviceAccounts', 'team', 'scope'] as const;
const MAX_TEAM_MEMBERS = 1000;
const TEAM_NAME = /^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/;
const SERVICE_ACCOUNT = /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/;

/** The user id a service account's calls carry (the sidecar's default user, a TokenReview's username). */
export function serviceAccountUser(entry: string): string {
  const [namespace, name] = entry.split('/') as [string, string];
  return `system:serviceaccount:${namespace}:${name}`;
}

function serviceAccounts(value: unknown, field: string, min = 1): string[] {
  if (!Array.isArray(value) || value.length < min || value.length > MAX_TEAM_MEMBERS) {
    throw new ConfigError(field, `must be a list of ${min} to ${MAX_TEAM_MEMBERS} service accounts, each <namespace>/<name>`);
  }
  return value.map((entry, i) => {
    if (typeof entry !== 'string' || !SERVICE_ACCOUNT.test(entry)) {
      throw new ConfigError(`${field}[${i}]`, `must be a service account as <namespace>/<name>, e.g. payments/checkout (got ${JSON.stringify(entry)})`);
    }
    return entry;
  });
}

function team(value: unknown, field: string, parseUser: (v: unknown, f: string) => string): BudgetTeamConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(field, 'must be an object with name, users and serviceAccounts');
  const v = value as Record<string, unknown>;
  if (v.teams !== undefined) {
    throw new ConfigError(`${field}.teams`, "cannot be set: teams do not nest; list the other team's users and service accounts in this team instead");
  }
  for (const key of Object.keys(v)) {
    if (!['name', 'users', 'serviceAccounts'].includes(key)) throw new ConfigError(`${field}.${key}`, 'is not a known field (expected one of: name, users, serviceAccounts)');
  }
  if (typeof v.name !== 'string' || !TEAM_NAME.test(v.name)) {
    throw new ConfigError(`${field}.name`, `must be a name of lower-case letters, digits, '-' and '.', at most 63 characters (got ${JSON.stringify(v.name)})`);
  }
  let users: string[] = [];
  if (v.users !== undefined) {
    if (!Array.isArray(v.users) || v.users.length > MAX_TEAM_MEMBERS) throw new ConfigError(`${field}.users`, `must be a list of at most ${MAX_TEAM_MEMBERS} user ids`);
    users = v.users.map((u, i) => {
      if (u === '*') throw new ConfigError(`${field}.users[${i}]`, 'cannot be * in a team: a team lists its members; use scope: Namespace for every caller');
      return parseUser(u, `${field}.users[${i}]`);
    });
  }
  const accounts = v.serviceAccounts === undefined ? [] : serviceAccounts(v.serviceAccounts, `${field}.serviceAccounts`, 0);
  if (users.length + accounts.length === 0) throw new ConfigError(field, 'must list users, serviceAccounts or both');
  return { name: v.name, users, serviceAccounts: accounts };
}

/** The policy's subject fields; exactly one kind may be set, and none means `users: ["*"]`. */
export function parseSubjects(
  v: Record<string, unknown>,
  field: string,
  parseUsers: (v: unknown, f: string) => string[],
  parseUser: (v: unknown, f: string) => string,
): BudgetSubjects {
  // `users: []` is how a parsed team or namespace policy reads back (the operator sends it so to sidecars).
  const set = SUBJECT_FIELDS.filter((key) => v[key] !== undefined && !(key === 'users' && Array.isArray(v.users) && v.users.length === 0));
  if (set.length > 1) throw new ConfigError(`${field}.${set[1]}`, `cannot be set together with ${field}.${set[0]}: a policy limits one kind of subject`);
  if (v.scope !== undefined) {
    if (!(BUDGET_SCOPES as readonly unknown[]).includes(v.scope)) {
      throw new ConfigError(`${field}.scope`, `must be one of ${BUDGET_SCOPES.join(', ')} (got ${JSON.stringify(v.scope)})`);
    }
    return { users: [], scope: v.scope as BudgetScope };
  }
  if (v.team !== undefined) return { users: [], team: team(v.team, `${field}.team`, parseUser) };
  if (v.serviceAccounts !== undefined) return { users: [], serviceAccounts: serviceAccounts(v.serviceAccounts, `${field}.serviceAccounts`) };
  return { users: parseUsers(v.users ?? ['*'], `${field}.users`) };
}

export function levelOf(subjects: BudgetSubjects): BudgetLevel {
  if (subjects.scope !== undefined) return subjects.scope;
  return subjects.team ? 'Team' : 'User';
}

/** What a policy limits, in a few words: the status's `subject`. */
export function subjectOf(subjects: BudgetSubjects): string {
  if (subjects.scope === 'Namespace') return 'the namespace';
  if (subjects.scope === 'Workload') return 'the selected pods';
  if (subjects.team) return `team ${subjects.team.name}`;
  if (subjects.serviceAccounts) return `each of ${subjects.serviceAccounts.length} service accounts`;
  return subjects.users.includes('*') ? 'every user' : `each of ${subjects.users.length} users`;
}

interface Claim {
  key: string;
  /** The field under the policy that names it. */
  at: string;
  what: string;
}

/** What a policy names at its level, each as a key two policies must not share. */
function claims(p: BudgetSubjects): Claim[] {
  const out: Claim[] = [];
  p.users.forEach((u, j) => out.push({ key: `User\u0000${u}`, at: `users[${j}]`, what: u === '*' ? '* (every other user)' : `the user ${JSON.stringify(u)}` }));
  p.serviceAccounts?.forEach((sa, j) => out.push({ key: `User\u0000${serviceAccountUser(sa)}`, at: `serviceAccounts[${j}]`, what: `the service account ${sa}` }));
  if (p.scope === 'Namespace') out.push({ key: 'Namespace', at: 'scope', what: 'the namespace' });
  // Between BudgetPolicies only those with an equal selector are compared: two of them are the same pods.
  if (p.scope === 'Workload') out.push({ key: 'Workload', at: 'scope', what: 'the selected pods as one workload' });
  const t = p.team;
  if (t === undefined) return out;
  out.push({ key: `Team\u0000team\u0000${t.name}`, at: 'team.name', what: `the team ${t.name}` });
  t.users.forEach((u, j) => out.push({ key: `Team\u0000${u}`, at: `team.users[${j}]`, what: `the user ${JSON.stringify(u)} as a team member` }));
  t.serviceAccounts.forEach((sa, j) =>
    out.push({ key: `Team\u0000${serviceAccountUser(sa)}`, at: `team.serviceAccounts[${j}]`, what: `the service account ${sa} as a team member` }),
  );
  return out;
}

/**
 * Refuses two policies naming the same subject at the same level: a user id (or service account) named by two
 * user-level policies or by two teams, a team name twice, `*` twice, two namespace budgets. A policy naming a user
 * still wins over `*` at the user level; that is not a conflict.
 */
export function refuseSameSubjects(policies: readonly BudgetSubjects[], field: string): void {
  const seen = new Map<string, number>();
  policies.forEach((p, i) => {
    for (const { key, at, what } of claims(p)) {
      const first = seen.get(key);
      if (first !== undefined) throw new ConfigError(`${field}[${i}].${at}`, `names ${what}, which ${field}[${first}] already names at the same level`);
      seen.set(key, i);
    }
  });
}

/** The same rule between objects (BudgetPolicies): `policy` may not name what an older one already names. */
export function refuseSubjectsTaken(older: readonly { name: string; subjects: BudgetSubjects }[], policy: BudgetSubjects, field: string): void {
  const taken = new Map<string, string>();
  for (const o of older) for (const { key } of claims(o.subjects)) if (!taken.has(key)) taken.set(key, o.name);
  for (const { key, at, what } of claims(policy)) {
    const owner = taken.get(key);
    if (owner !== undefined) throw new ConfigError(`${field}.${at}`, `names ${what}, which the older policy ${owner} already names at the same level`);
  }
}
