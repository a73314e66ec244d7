// BudgetPolicy (tollgate.dev/v1alpha1): the single source of its CRD YAML and TypeScript types (ADR 0600).
// It caps what each user may spend per calendar period through the sidecars of the pods it selects; the
// operator renders it into the runtime form of contracts/budget-config.ts, keeps the cluster ledger and
// writes the status (docs/budgets.md).
//
// Money is never a float here: a limit is a decimal string of USD (at most six decimals) or an integer of
// micro-dollars, so `kubectl apply` cannot introduce 0.1 + 0.2 drift.

import { MAX_BUDGET_USD } from '../contracts/money.ts';
import { MAX_CONCURRENT_CALLS, MAX_REQUESTS_PER_MINUTE, MAX_TOKENS_PER_MINUTE } from '../contracts/rate-limits-config.ts';
import type { CrdSource, SchemaNode } from './crd-schema.ts';
import { condition } from './proxy-config.ts';

// At most MAX_BUDGET_USD (1e8): nine digits let the pattern refuse what is surely too big; the operator's parse names the bound.
const USD = '^[0-9]{1,9}(\\.[0-9]{1,6})?$';
const MAX_MICRO_USD = MAX_BUDGET_USD * 1_000_000;

const userId: SchemaNode = {
  type: 'string',
  description: 'A user id (the x-tollgate-user header, the body user, a service account system:serviceaccount:<ns>:<name>), or * for every user.',
  minLength: 1,
  maxLength: 256,
};

function usd(description: string): SchemaNode {
  return { type: 'string', description: `${description} Decimal USD with at most 6 decimals, e.g. "25" or "0.01".`, maxLength: 17, pattern: USD };
}

function microUsd(description: string): SchemaNode {
  return { type: 'integer', format: 'int64', description: `${description} Whole micro-dollars (1 USD = 1000000).`, minimum: 0, maximum: MAX_MICRO_USD };
}

const labelSelector: SchemaNode = {
  type: 'object',
  tsType: 'LabelSelector',
  description: 'Which pods of the namespace enforce this policy, by their labels (metav1.LabelSelector); empty: every injected pod.',
  properties: {
    matchLabels: {
      type: 'object',
      description: 'Labels a pod must have, all of them.',
      maxProperties: 64,
      additionalProperties: { type: 'string', maxLength: 63 },
    },
    matchExpressions: {
      type: 'array',
      description: 'Requirements on labels, all of them.',
      maxItems: 32,
      items: {
        type: 'object',
        tsType: 'LabelSelectorRequirement',
        required: ['key', 'operator'],
        properties: {
          key: { type: 'string', minLength: 1, maxLength: 317 },
          operator: { type: 'string', enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
          values: { type: 'array', maxItems: 64, items: { type: 'string', maxLength: 63 } },
        },
        'x-kubernetes-validations': [
          {
            rule: "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
            message: 'values must be set for In and NotIn, and only for them',
            reason: 'FieldValueInvalid',
          },
        ],
      },
    },
  },
};

const grant: SchemaNode = {
  type: 'object',
  tsType: 'BudgetGrantSpec',
  description: "Extra budget for one user, spent before the policy's limit (soonest-expiring grant first). Editing a grant makes it a new grant.",
  required: ['user'],
  properties: {
    user: { ...userId, description: 'The user id the grant is for (not *).' },
    amountUsd: usd('The grant.'),
    amountMicroUsd: microUsd('The grant, instead of amountUsd.'),
    reason: { type: 'string', description: 'Why, for the record.', maxLength: 1024 },
    expiresAt: { type: 'string', format: 'date-time', description: 'When the rest of the grant lapses; absent: never.' },
  },
  'x-kubernetes-validations': [
    { rule: 'has(self.amountUsd) != has(self.amountMicroUsd)', message: 'set exactly one of amountUsd and amountMicroUsd', reason: 'FieldValueInvalid' },
    { rule: "self.user != '*'", message: 'a grant is for one user, not *', fieldPath: '.user', reason: 'FieldValueInvalid' },
  ],
};

function perUserLimit(description: string, maximum: number): SchemaNode {
  return { type: 'integer', format: 'int64', description, minimum: 1, maximum };
}

// ADR 1309: counted per sidecar with the in-memory windows; shared by the namespace with a shared store.
// ADR 1313: on a team, Workload or Namespace policy the limits are the group's as a whole.
const rateLimits: SchemaNode = {
  type: 'object',
  tsType: 'BudgetRateLimitsSpec',
  description:
    'Rate limits for each user the policy matches, or for its team, workload or namespace as a whole: a call is admitted only if every level it falls under has room; a refusal is HTTP 429 rate_limit_exceeded with Retry-After. Counted by each sidecar unless the budgets store is shared (docs/budgets.md).',
  minProperties: 1,
  properties: {
    requestsPerMinute: perUserLimit("Calls per minute (GCRA: a minute's calls may come at once, then one every 60/N seconds).", MAX_REQUESTS_PER_MINUTE),
    tokensPerMinute: perUserLimit('Input + output tokens per minute: estimated input + max output held at admission, settled to the real count.', MAX_TOKENS_PER_MINUTE),
    concurrent: perUserLimit('Calls in flight at once.', MAX_CONCURRENT_CALLS),
  },
};

const serviceAccountName: SchemaNode = {
  type: 'string',
  description: "A service account of the policy's namespace, by name.",
  minLength: 1,
  maxLength: 253,
  pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$',
};

// ADR 1312: one kind of subject per policy; users (or none of them: every user), serviceAccounts, team or scope
// (Workload: the selected pods as one budget; the operator matches their labels, so sidecars need not know them).
const SUBJECTS = ['users', 'serviceAccounts', 'team', 'scope'];

const team: SchemaNode = {
  type: 'object',
  tsType: 'BudgetTeamSpec',
  description: 'A named team: its users and service accounts share one budget. Teams do not nest.',
  required: ['name'],
  properties: {
    name: { type: 'string', description: 'The team, unique among the policies of the namespace.', minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' },
    users: { type: 'array', description: 'User ids of the members (not *).', maxItems: 1000, 'x-kubernetes-list-type': 'set', items: userId },
    serviceAccounts: { type: 'array', description: 'Service accounts of the members.', maxItems: 1000, 'x-kubernetes-list-type': 'set', items: serviceAccountName },
  },
  'x-kubernetes-validations': [
    {
      rule: '(has(self.users) && size(self.users) > 0) || (has(self.serviceAccounts) && size(self.serviceAccounts) > 0)',
      message: 'a team lists users, serviceAccounts or both',
      reason: 'FieldValueRequired',
    },
  ],
};

const spec: SchemaNode = {
  type: 'object',
  tsType: 'BudgetPolicySpec',
  description:
    'A spending limit per calendar period for each user, each service account, a team or the namespace as one budget, enforced by the sidecars of the selected pods. ' +
    "A call is admitted only if its user's, its team's and the namespace's budgets all have room, and is charged to each.",
  properties: {
    selector: labelSelector,
    users: {
      type: 'array',
      description:
        'User ids this policy limits, each separately, or ["*"] (the default when no subject is set) for every user no other policy of the namespace names. ' +
        "A call without a user id is charged to the pod's service account, system:serviceaccount:<namespace>:<name>.",
      minItems: 1,
      maxItems: 1000,
      'x-kubernetes-list-type': 'set',
      items: userId,
    },
    serviceAccounts: {
      type: 'array',
      description: 'Service accounts of the namespace this policy limits, each separately: the calls their pods send without a user id.',
      minItems: 1,
      maxItems: 1000,
      'x-kubernetes-list-type': 'set',
      items: serviceAccountName,
    },
    team,
    scope: {
      type: 'string',
      tsType: 'BudgetScopeName',
      description:
        'Workload: every call through the pods the selector picks shares this one budget. Namespace: every call of the namespace (of the selected pods, with a selector) does.',
      enum: ['Workload', 'Namespace'],
    },
    limitUsd: usd('Limit per subject per period.'),
    limitMicroUsd: microUsd('Limit per subject per period, instead of limitUsd.'),
    period: {
      type: 'string',
      tsType: 'BudgetPeriodName',
      description: 'Calendar period: day, week (ISO, from Monday) or month.',
      enum: ['day', 'week', 'month'],
      default: 'month',
    },
    timeZone: {
      type: 'string',
      description: 'IANA time zone the periods follow, e.g. Europe/Berlin.',
      maxLength: 64,
      pattern: '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$',
      default: 'UTC',
    },
    alertThresholds: {
      type: 'array',
      description: 'Percentages of the limit; reaching each logs `budget alert` and records a BudgetThresholdReached Event, once per user per period.',
      maxItems: 10,
      'x-kubernetes-list-type': 'set',
      items: { type: 'integer', format: 'int32', minimum: 1, maximum: 1000 },
      default: [80, 90, 100],
    },
    enforcement: {
      type: 'string',
      tsType: 'BudgetEnforcementName',
      description: 'block: refuse calls (HTTP 429 budget_exceeded) once the budget is spent; alert: only alert.',
      enum: ['block', 'alert'],
      default: 'block',
    },
    grants: { type: 'array', description: 'Grants, at most 256.', maxItems: 256, items: grant },
    rateLimits,
  },
  'x-kubernetes-validations': [
    { rule: 'has(self.limitUsd) != has(self.limitMicroUsd)', message: 'set exactly one of limitUsd and limitMicroUsd', reason: 'FieldValueInvalid' },
    {
      rule: SUBJECTS.map((field) => `(has(self.${field}) ? 1 : 0)`).join(' + ') + ' <= 1',
      message: `set at most one of ${SUBJECTS.join(', ')}: a policy limits one kind of subject`,
      reason: 'FieldValueInvalid',
    },
    {
      rule: "!has(self.scope) || self.scope != 'Workload' || has(self.selector)",
      message: 'scope Workload needs a selector: the pods whose calls share the budget',
      fieldPath: '.scope',
      reason: 'FieldValueRequired',
    },
  ],
};

const status: SchemaNode = {
  type: 'object',
  tsType: 'BudgetPolicyStatus',
  description: 'Written by the operator through the status subresource: the current period as the cluster ledger holds it.',
  properties: {
    observedGeneration: { type: 'integer', format: 'int64', description: 'The metadata.generation the operator last processed.', minimum: 0 },
    conditions: {
      type: 'array',
      description: 'Ready: True once the policy is accepted and pushed to sidecars; False with a reason otherwise.',
      maxItems: 8,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      items: condition,
    },
    level: { type: 'string', description: 'User, Team, Workload or Namespace: the level of the budgets this policy keeps (ADR 1312).', maxLength: 16 },
    subject: { type: 'string', description: 'What it limits: users, service accounts, team <name> or the namespace.', maxLength: 128 },
    limitUsd: { type: 'string', description: 'The limit, as decimal USD.', maxLength: 32 },
    periodStart: { type: 'string', format: 'date-time', description: 'Start of the current period.' },
    periodEnd: { type: 'string', format: 'date-time', description: 'End of the current period (Retry-After of a refusal counts down to it).' },
    spentUsd: { type: 'string', description: 'Spend of all users this period, exact decimal USD.', maxLength: 32 },
    users: { type: 'integer', format: 'int64', description: 'Users with spend this period.', minimum: 0 },
    usersOverThreshold: { type: 'integer', format: 'int64', description: 'Users at or over the lowest alert threshold.', minimum: 0 },
    usersExhausted: { type: 'integer', format: 'int64', description: 'Users whose budget (limit plus grants) is spent.', minimum: 0 },
    thresholds: {
      type: 'array',
      description: 'Users at or over each alert threshold.',
      maxItems: 10,
      items: {
        type: 'object',
        tsType: 'BudgetThresholdStatus',
        required: ['percent', 'users'],
        properties: { percent: { type: 'integer', format: 'int32', minimum: 1, maximum: 1000 }, users: { type: 'integer', format: 'int64', minimum: 0 } },
      },
    },
    topSpenders: {
      type: 'array',
      description: 'The users who spent most this period, most first (at most 10).',
      maxItems: 10,
      items: {
        type: 'object',
        tsType: 'BudgetSpenderStatus',
        required: ['user', 'spentUsd'],
        properties: {
          user: { type: 'string', maxLength: 256 },
          spentUsd: { type: 'string', maxLength: 32 },
          percent: { type: 'integer', format: 'int64', description: 'Percent of the limit used.', minimum: 0 },
        },
      },
    },
    sidecars: { type: 'integer', format: 'int64', description: 'Connected sidecars enforcing this policy.', minimum: 0 },
  },
};

export const BUDGET_POLICY_CRD: CrdSource = {
  group: 'tollgate.dev',
  kind: 'BudgetPolicy',
  listKind: 'BudgetPolicyList',
  plural: 'budgetpolicies',
  singular: 'budgetpolicy',
  shortNames: ['bp'],
  categories: ['tollgate'],
  scope: 'Namespaced',
  versions: [
    {
      name: 'v1alpha1',
      served: true,
      storage: true,
      statusSubresource: true,
      schema: {
        type: 'object',
        tsType: 'BudgetPolicy',
        description: 'Per-user LLM spending limits per calendar period for the Tollgate sidecars of a namespace (docs/budgets.md).',
        properties: {
          apiVersion: { type: 'string', description: 'tollgate.dev/v1alpha1' },
          kind: { type: 'string', description: 'BudgetPolicy' },
          metadata: { type: 'object', tsType: 'ObjectMeta' },
          spec,
          status,
        },
      },
      printerColumns: [
        { name: 'Level', type: 'string', jsonPath: '.status.level', description: 'User, Team, Workload or Namespace' },
        { name: 'Subject', type: 'string', jsonPath: '.status.subject', priority: 1 },
        { name: 'Limit', type: 'string', jsonPath: '.status.limitUsd', description: 'USD per subject per period' },
        { name: 'Period', type: 'string', jsonPath: '.spec.period' },
        { name: 'Spent', type: 'string', jsonPath: '.status.spentUsd', description: 'USD spent by all its subjects this period' },
        { name: 'Over', type: 'integer', jsonPath: '.status.usersOverThreshold', description: 'Users at or over the lowest alert threshold' },
        { name: 'Exhausted', type: 'integer', jsonPath: '.status.usersExhausted', priority: 1 },
        { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
        { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    },
  ],
};
