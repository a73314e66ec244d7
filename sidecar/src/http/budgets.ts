// /_local/api/budgets: every user's budget in the current period, one user's, and grants. Registered inside
// the management API's plugin, so it shares its JSON-only body parser (duplicate keys refused) and its error
// shape; validation failures are 400s that name the field, and nothing is stored.

import type { FastifyPluginAsync } from 'fastify';
import { GrantError, type BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { parseUsd } from '../../../contracts/money.ts';

export interface BudgetRoutesOptions {
  budgets: BudgetEnforcer;
  now?: () => number;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

const GRANT_FIELDS = ['amount_usd', 'reason', 'expires_at'] as const;
const REASON_MAX = 1024;
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/**
 * The grant body's shape, checked here rather than by a JSON schema: a schema would make fastify load ajv in
 * every sidecar (ADR 0003). Unknown fields are refused, not stripped. Returns the refusal, or null.
 */
function grantBodyRefusal(body: unknown): string | null {
  if (!isRecord(body)) return 'body must be a JSON object';
  const unknown = Object.keys(body).find((key) => !(GRANT_FIELDS as readonly string[]).includes(key));
  if (unknown !== undefined) return `${unknown} is not a known field (expected one of: ${GRANT_FIELDS.join(', ')})`;
  // amount_usd is a number or a decimal string: checked by parseUsd, whose message names the rule.
  if (!Object.hasOwn(body, 'amount_usd')) return "body must have required property 'amount_usd'";
  const { reason, expires_at: expiresAt } = body;
  if (reason !== undefined && (typeof reason !== 'string' || reason.length < 1 || reason.length > REASON_MAX)) {
    return `reason must be a string of 1 to ${REASON_MAX} characters`;
  }
  if (expiresAt !== undefined && (typeof expiresAt !== 'string' || expiresAt.length > 64)) {
    return `expires_at must be an RFC 3339 timestamp such as 2026-12-31T23:59:59Z (got ${JSON.stringify(expiresAt)})`;
  }
  return null;
}

function invalid(message: string) {
  return { error: { code: 'invalid_request', message } };
}

export const budgetRoutes: FastifyPluginAsync<BudgetRoutesOptions> = async (app, opts) => {
  const now = opts.now ?? Date.now;

  // One page at a time: a ledger may hold any number of users, and one answer must not (ADR 1306).
  app.get<{ Querystring: Record<string, string | string[]> }>('/_local/api/budgets', async (request, reply) => {
    const { limit: limitText = String(DEFAULT_PAGE), after } = request.query;
    const limit = Number(limitText);
    if (typeof limitText !== 'string' || !/^\d{1,4}$/.test(limitText) || limit < 1 || limit > MAX_PAGE) {
      return reply.code(400).send(invalid(`limit must be a whole number from 1 to ${MAX_PAGE} (got ${JSON.stringify(limitText)})`));
    }
    if (after !== undefined && (typeof after !== 'string' || after.length > 256)) return reply.code(400).send(invalid('after must be one user id of at most 256 characters'));
    const page = opts.budgets.list(now(), after === undefined ? { limit } : { after, limit });
    return { budgets: page.budgets, count: page.budgets.length, next: page.next };
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
    async (request, reply) => {
      const refusal = grantBodyRefusal(request.body);
      if (refusal !== null) return reply.code(400).send(invalid(refusal));
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
