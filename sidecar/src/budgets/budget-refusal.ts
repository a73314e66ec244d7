// The answer to a call refused because its user's budget is spent (ADR 1300): HTTP 429 before any upstream
// is contacted, `Retry-After` in seconds until the period ends, and a body in the error shape the caller's
// SDK reads for that route: OpenAI's (code `budget_exceeded`) on /v1 and the OpenAI-format routes,
// Anthropic's on the Claude routes, Google's on Gemini. `x-should-retry: false` tells the OpenAI and
// Anthropic SDKs not to retry a refusal that will not lift for hours; they otherwise retry every 429.
//
// Kept apart from the routes on purpose: when each route module owns its error shape, this is the one place
// that maps a refusal onto it.

import type { ServerResponse } from 'node:http';
import type { RouteName } from '../providers/routes.ts';
import { ROUTES } from '../providers/routes.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import type { BudgetRefusal } from './budget-book.ts';

export const BUDGET_EXCEEDED = 'budget_exceeded';

export type RefusalFormat = 'openai' | 'anthropic' | 'google';

/** Which SDK family calls this route, by its wire format (/v1 speaks OpenAI's). */
export function refusalFormat(route: RouteName | 'v1'): RefusalFormat {
  if (route === 'v1') return 'openai';
  switch (ROUTES[route].format) {
    case 'openai':
      return 'openai';
    case 'gemini':
      return 'google';
    case 'anthropic':
    case 'bedrock':
      return 'anthropic';
  }
}

const PERIOD_WORD: Record<string, string> = { day: 'daily', week: 'weekly', month: 'monthly' };

/** Names the user, the limit and when it renews; the same text is the span's error. */
export function budgetRefusalMessage(refusal: BudgetRefusal): string {
  const renews = new Date(refusal.periodEnd).toISOString();
  return `user ${JSON.stringify(refusal.userId)} has spent the ${refusal.limitUsd} USD ${PERIOD_WORD[refusal.period] ?? refusal.period} budget of policy ${JSON.stringify(refusal.policy)}; it renews at ${renews}`;
}

export function budgetRefusalBody(format: RefusalFormat, refusal: BudgetRefusal): Record<string, unknown> {
  const message = budgetRefusalMessage(refusal);
  switch (format) {
    case 'openai':
      return { error: { message, type: 'rate_limit_error', param: null, code: BUDGET_EXCEEDED } };
    case 'anthropic':
      return { type: 'error', error: { type: 'rate_limit_error', message: `${BUDGET_EXCEEDED}: ${message}` } };
    case 'google':
      return { error: { code: 429, message: `${BUDGET_EXCEEDED}: ${message}`, status: 'RESOURCE_EXHAUSTED' } };
  }
}

export function sendBudgetRefusal(res: ServerResponse, format: RefusalFormat, refusal: BudgetRefusal, trace: TraceContext): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(budgetRefusalBody(format, refusal));
  res.writeHead(429, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'retry-after': String(refusal.retryAfterSeconds),
    'x-should-retry': 'false',
    'x-proxy-span-id': trace.spanId,
    'x-proxy-trace-id': trace.traceId,
  });
  res.end(body);
}
