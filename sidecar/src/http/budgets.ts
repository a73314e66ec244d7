// /_local/api/budgets: every user's budget in the current period, one user's, and grants. Registered inside
// the management API's plugin, so it shares its JSON-only body parser (duplicate keys refused) and its error
// shape; validation failures are 400s that name the field, and nothing is stored.

import type { FastifyPluginAsync } from 'fastify';
import { GrantError, type BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { parseUsd } from '../../../contracts/money.ts';

export interface BudgetRoutesOptions {
  budgets: BudgetEnforcer;
  now?: () => number;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

const grantBody = {
  type: 'object',
  required: ['amount_usd'],
  // Unknown fields are refused in the handler: fastify's validator would strip them silently.
  properties: {
    // A number or a decimal string: checked by parseUsd, whose message names the rule (no type coercion here).
    amount_usd: {},
    reason: { type: 'string', minLength: 1, maxLength: 1024 },
    expires_at: { type: 'string', maxLength: 64 },
  },
} as const;

function invalid(message: string) {
  return { error: { code: 'invalid_request', message } };
}

export const budgetRoutes: FastifyPluginAsync<BudgetRoutesOptions> = async (app, opts) => {
  const now = opts.now ?? Date.now;

  app.get('/_local/api/budgets', async () => {
    const budgets = opts.budgets.list(now());
    return { budgets, count: budgets.length };
  });

  app.get<{ Params: { user: string } }>('/_local/api/budgets/:user', async (request, reply) => {
    const budget = opts.budgets.get(request.params.user, now());
    if (!budget) {
      return reply.code(404).send({ error: { code: 'budget_not_found', message: `no budget policy limits user ${JSON.stringify(request.params.user)}` } });
    }
    return budget;
  });

  app.post<{ Params: { user: string }; Body: { amount_usd: number | string; reason?: string; expires_at?: string } }>(
    '/_local/api/budgets/:user/grants',
    { schema: { body: grantBody } },
    async (request, reply) => {
      const unknown = Object.keys(request.body).find((key) => !Object.hasOwn(grantBody.properties, key));
      if (unknown !== undefined) return reply.code(400).send(invalid(`${unknown} is not a known field (expected one of: ${Object.keys(grantBody.properties).join(', ')})`));
      const { amount_usd: amount, reason, expires_at: expiresAt } = request.body;
      const at = now();
      const units = parseUsd(amount);
      if (typeof units === 'string') return reply.code(400).send(invalid(`amount_usd ${units}`));
      if (units === 0n) return reply.code(400).send(invalid('amount_usd must be more than 0 USD'));
      let expires: number | undefined;
      if (expiresAt !== undefined) {
        expires = RFC3339.test(expiresAt) ? Date.parse(expiresAt) : Number.NaN;
        if (Number.isNaN(expires)) return reply.code(400).send(invalid(`expires_at must be an RFC 3339 timestamp such as 2026-12-31T23:59:59Z (got ${JSON.stringify(expiresAt)})`));
        if (expires <= at) return reply.code(400).send(invalid(`expires_at must be in the future (got ${expiresAt})`));
      }
      try {
        const grant = await opts.budgets.addGrant(
          request.params.user,
          { amountUsd: String(amount), ...(reason !== undefined ? { reason } : {}), ...(expires !== undefined ? { expiresAt: expires } : {}) },
          at,
        );
        return reply.code(201).send(grant);
      } catch (error) {
        if (error instanceof GrantError) return reply.code(error.status).send({ error: { code: error.code, message: error.message } });
        throw error;
      }
    },
  );
};
