// BudgetPolicy → the runtime policy sidecars enforce (contracts/budget-config.ts). Pure, and checked by the
// same parser as the config file, so a value the CRD's schema lets through but the runtime cannot use (an
// unknown time zone) is refused with the field's name. Grants get ids from their content: the same grant
// has the same id on every operator replica and across restarts, so its use in the ledger stays attached.

import { createHash } from 'node:crypto';
import { type BudgetPolicyConfig, parseBudgetPolicy } from '../../../contracts/budget-config.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { formatUsd, microUsdToUnits } from '../../../contracts/money.ts';
import type { BudgetPolicy } from '../../../crds/index.ts';

function amount(usd: string | undefined, micro: number | undefined, field: string): string {
  if (usd !== undefined) return usd;
  if (micro !== undefined) return formatUsd(microUsdToUnits(micro));
  throw new ConfigError(field, 'needs amountUsd or amountMicroUsd');
}

export function grantId(user: string, amountUsd: string, reason: string | undefined, expiresAt: string | undefined): string {
  return createHash('sha256')
    .update(JSON.stringify([user, amountUsd, reason ?? null, expiresAt ?? null]))
    .digest('hex')
    .slice(0, 24);
}

/** Throws ConfigError naming `spec.<field>` when the policy cannot be enforced. */
export function renderBudgetPolicy(key: string, bp: BudgetPolicy): BudgetPolicyConfig {
  const spec = bp.spec;
  if (!spec) throw new ConfigError('spec', 'is required');
  const createdAt = bp.metadata?.creationTimestamp ?? new Date(0).toISOString();
  const seen = new Map<string, number>();
  const grants = (spec.grants ?? []).map((g, i) => {
    const amountUsd = amount(g.amountUsd, g.amountMicroUsd, `spec.grants[${i}]`);
    const base = grantId(g.user, amountUsd, g.reason, g.expiresAt);
    // Two identical grants are two grants.
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return {
      id: n === 0 ? base : `${base}-${n}`,
      user: g.user,
      amountUsd,
      createdAt,
      ...(g.reason !== undefined ? { reason: g.reason } : {}),
      ...(g.expiresAt !== undefined ? { expiresAt: g.expiresAt } : {}),
    };
  });
  // Service accounts are named in the policy's own namespace; the runtime form carries <namespace>/<name>.
  const namespace = key.slice(0, key.indexOf('/'));
  const inNamespace = (names: string[] | undefined) => names?.map((name) => `${namespace}/${name}`);
  const input = {
    name: key,
    users: spec.users,
    serviceAccounts: inNamespace(spec.serviceAccounts),
    team: spec.team && { ...spec.team, serviceAccounts: inNamespace(spec.team.serviceAccounts) },
    scope: spec.scope,
    limitUsd: spec.limitUsd ?? (spec.limitMicroUsd !== undefined ? formatUsd(microUsdToUnits(spec.limitMicroUsd)) : undefined),
    period: spec.period ?? 'month',
    timeZone: spec.timeZone ?? 'UTC',
    alertThresholds: [...(spec.alertThresholds ?? [80, 90, 100])].sort((a, b) => a - b),
    enforcement: spec.enforcement ?? 'block',
    grants,
    ...(spec.rateLimits !== undefined ? { rateLimits: spec.rateLimits } : {}),
  };
  try {
    return parseBudgetPolicy(input, 'spec', { allowGrants: true });
  } catch (error) {
    if (error instanceof ConfigError && error.field === 'spec.name') throw new ConfigError('metadata.name', error.message.slice(error.field.length + 1));
    throw error;
  }
}
