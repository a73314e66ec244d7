// The answer to a call refused because its user's budget is spent (ADR 1300): HTTP 429 before any upstream
// is contacted, `Retry-After` in seconds until the period ends, and a body in the error shape the route's
// callers' SDKs read (the route module's ErrorShape: OpenAI's with code `budget_exceeded` on /v1 and the
// OpenAI-format routes, Anthropic's on the Claude routes, Google's on Gemini). `x-should-retry: false` tells
// the OpenAI and Anthropic SDKs not to retry a refusal that will not lift for hours; they retry every 429
// otherwise.

import type { ServerResponse } from 'node:http';
import type { BudgetRefusal } from '../budgets/budget-book.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import type { ErrorShape } from '../routes/error-shape.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import { sendJson } from './json-answer.ts';

export const BUDGET_EXCEEDED = 'budget_exceeded';

const PERIOD_WORD: Record<string, string> = { day: 'daily', week: 'weekly', month: 'monthly' };

/**
 * Whether a call about to go upstream is refused. A call without a user is not budgeted; a call to a local
 * model (provider `local`) costs 0 by definition, so a spent budget leaves the local models usable (ADR 1403).
 */
export function budgetRefusalFor(budgets: Pick<BudgetEnforcer, 'refusal'> | undefined, call: { userId: string | null; provider: string }, now: number): BudgetRefusal | null {
  if (budgets === undefined || call.userId === null || call.provider === 'local') return null;
  return budgets.refusal(call.userId, now);
}

/** Names the user, the limit and when it renews; the same text is the span's error. */
export function budgetRefusalMessage(refusal: BudgetRefusal): string {
  const renews = new Date(refusal.periodEnd).toISOString();
  return `user ${JSON.stringify(refusal.userId)} has spent the ${refusal.limitUsd} USD ${PERIOD_WORD[refusal.period] ?? refusal.period} budget of policy ${JSON.stringify(refusal.policy)}; it renews at ${renews}`;
}

export function sendBudgetRefusal(res: ServerResponse, errors: ErrorShape, refusal: BudgetRefusal, trace: TraceContext): void {
  if (res.headersSent || res.destroyed) return;
  res.setHeader('retry-after', String(refusal.retryAfterSeconds));
  res.setHeader('x-should-retry', 'false');
  sendJson(res, 429, errors.body(429, BUDGET_EXCEEDED, budgetRefusalMessage(refusal)), trace);
}
