// Every answer the engine gives a call it refuses, in one place (ADR 1700), for /proxy and every /v1 API alike:
// in the error shape the route's or the API's callers' SDKs read (routes/error-shape.ts: OpenAI's with code
// `budget_exceeded` on /v1 and the OpenAI-format routes, Anthropic's on the Claude routes, Google's on Gemini).
//
// A spent budget (ADR 1300) is HTTP 429 before any upstream is contacted, `Retry-After` in seconds until the
// period ends; `x-should-retry: false` tells the OpenAI and Anthropic SDKs not to retry a refusal that will not
// lift for hours (they retry every 429 otherwise). With budgets.unreachable closed, a budgeted call while the
// shared ledger cannot be reached past the grace is answered 503 `budget_ledger_unavailable` instead (ADR 1310):
// it lifts when the ledger is back. A rate limit (ADR 1309) is 429 with the SDKs' own retry; a user id of a
// group key's form (ADR 1312) is 400. A path the route cannot meter and a proxy shutting down are refused with
// the engine's own errors, answered in the surface's shape by its failure path.

import type { ServerResponse } from 'node:http';
import type { BudgetRefusal } from '../budgets/budget-book.ts';
import { isGroupKey } from '../../../contracts/budget-policies.ts';
import { ProxyError } from '../errors.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import type { ErrorShape } from '../routes/error-shape.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import { sendJson } from './json-answer.ts';
import { isRateRefusal, RATE_LIMIT_EXCEEDED, type RateRefusal, rateRefusalMessage } from './rate-limit-answer.ts';

export const BUDGET_EXCEEDED = 'budget_exceeded';
const RESERVED_USER_ID = 'reserved_user_id';
const LEDGER_UNAVAILABLE = 'budget_ledger_unavailable';
/** A refusal for an unreachable ledger lifts when the ledger is back: the SDKs may retry it soon. */
const UNREACHABLE_RETRY_AFTER_SECONDS = 5;

const PERIOD_WORD: Record<string, string> = { day: 'daily', week: 'weekly', month: 'monthly' };

/**
 * A call whose user id has the form of a budget above the user (`@team:eng`, ADR 1312): under that id it would
 * spend the group's budget and rate windows as its own, so it is refused 400 whoever wrote the id.
 */
interface ReservedUserRefusal {
  readonly userId: string;
  readonly reservedUserId: true;
}

/** Why a call is refused before it goes upstream: its budget, its rate limits, or a user id that is not one. */
export type CallRefusal = BudgetRefusal | RateRefusal | ReservedUserRefusal;

/** The refusal of a user id that names a budget above the user, or null for any other. Budgets on only. */
export function reservedUserRefusal(userId: string): ReservedUserRefusal | null {
  return isGroupKey(userId) ? { userId, reservedUserId: true } : null;
}

function isReservedUserRefusal(refusal: CallRefusal): refusal is ReservedUserRefusal {
  return 'reservedUserId' in refusal;
}

function reservedUserMessage(refusal: ReservedUserRefusal): string {
  return `user id ${JSON.stringify(refusal.userId)} is reserved: ids starting with @team:, @workload: or @namespace: name the budgets above the user; the credential, x-tollgate-user or the request's user must name a user`;
}

/** Whose budget it is: the user's own, or the team's or namespace's the user's call falls under (ADR 1312). */
function budgetHolder(refusal: BudgetRefusal): string {
  const user = `user ${JSON.stringify(refusal.userId)}`;
  if (refusal.group === undefined) return user;
  if (refusal.group.startsWith('@team:')) return `the team ${JSON.stringify(refusal.group.slice('@team:'.length))} (of ${user})`;
  return `the ${refusal.group.startsWith('@workload:') ? 'workload' : 'namespace'} budget (over ${user})`;
}

/** Names the user, the limit and when it renews; the same text is the span's error. */
export function budgetRefusalMessage(refusal: BudgetRefusal): string {
  const renews = new Date(refusal.periodEnd).toISOString();
  if (refusal.unreachable) {
    const { ledger, since } = refusal.unreachable;
    return `the budget ledger (${ledger}) has not been reachable since ${new Date(since).toISOString()} and budgets.unreachable is closed: calls of user ${JSON.stringify(refusal.userId)} under policy ${JSON.stringify(refusal.policy)} are refused until it is back`;
  }
  if (refusal.short) {
    const { leftUsd, reserveUsd } = refusal.short;
    return `${budgetHolder(refusal)} has ${leftUsd} USD left of the ${refusal.limitUsd} USD ${PERIOD_WORD[refusal.period] ?? refusal.period} budget of policy ${JSON.stringify(refusal.policy)} beyond the calls in flight, and this call may cost up to ${reserveUsd} USD (its input and its max output tokens); it renews at ${renews}`;
  }
  return `${budgetHolder(refusal)} has spent the ${refusal.limitUsd} USD ${PERIOD_WORD[refusal.period] ?? refusal.period} budget of policy ${JSON.stringify(refusal.policy)}; it renews at ${renews}`;
}

/** The span's error of a refused call: the stable code, then the message. */
export function refusalError(refusal: CallRefusal): string {
  if (isReservedUserRefusal(refusal)) return `${RESERVED_USER_ID}: ${reservedUserMessage(refusal)}`;
  return isRateRefusal(refusal) ? `${RATE_LIMIT_EXCEEDED}: ${rateRefusalMessage(refusal)}` : `${BUDGET_EXCEEDED}: ${budgetRefusalMessage(refusal)}`;
}

/** The refusal's answer, in the error shape of the route's or API's callers. */
export function sendRefusal(res: ServerResponse, errors: ErrorShape, refusal: CallRefusal, trace: TraceContext): void {
  if (res.headersSent || res.destroyed) return;
  if (isReservedUserRefusal(refusal)) {
    sendJson(res, 400, errors.body(400, RESERVED_USER_ID, reservedUserMessage(refusal)), trace);
    return;
  }
  if (isRateRefusal(refusal)) {
    // A rate limit lifts within the minute: the SDKs' own retry after Retry-After is what the caller wants.
    res.setHeader('retry-after', String(refusal.retryAfterSeconds));
    sendJson(res, 429, errors.body(429, RATE_LIMIT_EXCEEDED, rateRefusalMessage(refusal)), trace);
    return;
  }
  if (refusal.unreachable) {
    res.setHeader('retry-after', String(UNREACHABLE_RETRY_AFTER_SECONDS));
    sendJson(res, 503, errors.body(503, LEDGER_UNAVAILABLE, budgetRefusalMessage(refusal)), trace);
    return;
  }
  res.setHeader('retry-after', String(refusal.retryAfterSeconds));
  res.setHeader('x-should-retry', 'false');
  sendJson(res, 429, errors.body(429, BUDGET_EXCEEDED, budgetRefusalMessage(refusal)), trace);
}

/**
 * A call refused before it went upstream: its span ends rejected, with the refusal as its error (so the answer's
 * X-Proxy-Span-Id names why), and the caller is answered in its surface's error shape.
 */
export function refuseCall(call: MeteredCall, prices: PriceTable, refusal: CallRefusal, answer: { res: ServerResponse; errors: ErrorShape; trace: TraceContext }): void {
  call.finish({ prices, usage: null, status: 'rejected', statusCode: null, error: refusalError(refusal) });
  sendRefusal(answer.res, answer.errors, refusal, answer.trace);
}

/**
 * Nothing is forwarded that a route's format cannot meter (routes/endpoint-kinds.ts), so the proxy's credential
 * is not spent unseen, unless the route allows unmetered calls.
 */
export function unmeteredRefusal(method: string, path: string, route: string, why: string): ProxyError {
  return new ProxyError(
    'unmetered_endpoint',
    `${method} ${path} on route ${route} is not a call Tollgate can meter (${why}): refused so the proxy's credential is not spent unseen; see docs/routes.md#what-a-route-forwards`,
  );
}

/** A call that arrives while the proxy drains: 503, and its connection closes, so the caller retries elsewhere. */
export function shuttingDown(): ProxyError {
  return new ProxyError('shutting_down', 'the proxy is shutting down; retry on another instance');
}

/**
 * Runs `refuse` when the budget step refused the call, and says whether it did. A promise only when the rate
 * windows are shared (ADR 1311): the in-memory answer costs no turn.
 */
export function whenRefused(refusal: CallRefusal | null | Promise<CallRefusal | null>, refuse: (refusal: CallRefusal) => void): boolean | Promise<boolean> {
  if (refusal instanceof Promise) return refusal.then((answer) => whenRefused(answer, refuse) as boolean);
  if (refusal === null) return false;
  refuse(refusal);
  return true;
}
