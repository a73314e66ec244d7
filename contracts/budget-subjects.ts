// Who a budget policy limits, and at which level (ADR 1312). A policy names exactly one kind of subject:
//   users / serviceAccounts  level User: each user id (a service account is the user id its calls carry,
//                            system:serviceaccount:<namespace>:<name>) has a budget of its own;
//   team                     level Team: the team's users and service accounts share one budget;
//   scope: Namespace         level Namespace: every call of the engine's namespace shares one budget.
// A call falls under at most one budget per level and is admitted only if each of them has room. Teams do not
// nest: a team lists users and service accounts, never another team. Label-selected workloads are not a subject
// kind yet (the sidecar does not know its pod's labels).

import { ConfigError } from './config-error.ts';

export const BUDGET_LEVELS = ['User', 'Team', 'Namespace'] as const;
export type BudgetLevel = (typeof BUDGET_LEVELS)[number];

export const BUDGET_SCOPES = ['Namespace'] as const;

export interface BudgetTeamConfig {
  name: string;
  /** User ids of the team's members. */
  users: string[];
  /** `<namespace>/<name>` of the team's service accounts. */
  serviceAccounts: string[];
}

/** The subject fields of a policy, parsed; `users` is empty for a Team or Namespace policy. */
export interface BudgetSubjects {
  users: string[];
  serviceAccounts?: string[];
  team?: BudgetTeamConfig;
  scope?: 'Namespace';
}

export const SUBJECT_FIELDS = ['users', 'serviceAccounts', 'team', 'scope'] as const;
export const MAX_TEAM_MEMBERS = 1000;
const TEAM_NAME = /^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/;
const SERVICE_ACCOUNT = /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/;

/** The user id a service account's calls carry (the sidecar's default user, a TokenReview's username). */
export function serviceAccountUser(entry: string): string {
  const [namespace, name] = entry.split('/') as [string, string];
  return `system:serviceaccount:${namespace}:${name}`;
}

function serviceAccounts(value: unknown, field: string): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_TEAM_MEMBERS) {
    throw new ConfigError(field, `must be a list of 1 to ${MAX_TEAM_MEMBERS} service accounts, each <namespace>/<name>`);
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
  if (v.users === undefined && v.serviceAccounts === undefined) throw new ConfigError(field, 'must list users, serviceAccounts or both');
  let users: string[] = [];
  if (v.users !== undefined) {
    if (!Array.isArray(v.users) || v.users.length > MAX_TEAM_MEMBERS) throw new ConfigError(`${field}.users`, `must be a list of at most ${MAX_TEAM_MEMBERS} user ids`);
    users = v.users.map((u, i) => {
      if (u === '*') throw new ConfigError(`${field}.users[${i}]`, 'cannot be * in a team: a team lists its members; use scope: Namespace for every caller');
      return parseUser(u, `${field}.users[${i}]`);
    });
  }
  return { name: v.name, users, serviceAccounts: v.serviceAccounts === undefined ? [] : serviceAccounts(v.serviceAccounts, `${field}.serviceAccounts`) };
}

/** The policy's subject fields; exactly one kind may be set, and none means `users: ["*"]`. */
export function parseSubjects(
  v: Record<string, unknown>,
  field: string,
  parseUsers: (v: unknown, f: string) => string[],
  parseUser: (v: unknown, f: string) => string,
): BudgetSubjects {
  const set = SUBJECT_FIELDS.filter((key) => v[key] !== undefined);
  if (set.length > 1) throw new ConfigError(`${field}.${set[1]}`, `cannot be set together with ${field}.${set[0]}: a policy limits one kind of subject`);
  if (v.scope !== undefined) {
    if (v.scope !== 'Namespace') throw new ConfigError(`${field}.scope`, `must be one of ${BUDGET_SCOPES.join(', ')} (got ${JSON.stringify(v.scope)})`);
    return { users: [], scope: 'Namespace' };
  }
  if (v.team !== undefined) return { users: [], team: team(v.team, `${field}.team`, parseUser) };
  if (v.serviceAccounts !== undefined) return { users: [], serviceAccounts: serviceAccounts(v.serviceAccounts, `${field}.serviceAccounts`) };
  return { users: parseUsers(v.users ?? ['*'], `${field}.users`) };
}

export function levelOf(subjects: BudgetSubjects): BudgetLevel {
  if (subjects.scope === 'Namespace') return 'Namespace';
  return subjects.team ? 'Team' : 'User';
}

/**
 * Refuses two policies naming the same subject at the same level: a user id (or service account) named by two
 * user-level policies or by two teams, a team name twice, `*` twice, two namespace budgets. A policy naming a user
 * still wins over `*` at the user level; that is not a conflict.
 */
export function refuseSameSubjects(policies: readonly BudgetSubjects[], field: string): void {
  const seen = new Map<string, number>();
  const claim = (key: string, i: number, at: string, what: string): void => {
    const first = seen.get(key);
    if (first !== undefined) throw new ConfigError(`${field}[${i}].${at}`, `names ${what}, which ${field}[${first}] already names at the same level`);
    seen.set(key, i);
  };
  policies.forEach((p, i) => {
    p.users.forEach((u, j) => claim(`User\u0000${u}`, i, `users[${j}]`, u === '*' ? '* (every other user)' : `the user ${JSON.stringify(u)}`));
    p.serviceAccounts?.forEach((sa, j) => claim(`User\u0000${serviceAccountUser(sa)}`, i, `serviceAccounts[${j}]`, `the service account ${sa}`));
    if (p.scope === 'Namespace') claim('Namespace', i, 'scope', 'the namespace');
    const t = p.team;
    if (t === undefined) return;
    claim(`Team\u0000team\u0000${t.name}`, i, 'team.name', `the team ${t.name}`);
    t.users.forEach((u, j) => claim(`Team\u0000${u}`, i, `team.users[${j}]`, `the user ${JSON.stringify(u)} as a team member`));
    t.serviceAccounts.forEach((sa, j) => claim(`Team\u0000${serviceAccountUser(sa)}`, i, `team.serviceAccounts[${j}]`, `the service account ${sa} as a team member`));
  });
}
