// The budget step of the pipeline (ADR 1700): whether a call may go upstream, decided from memory before
// anything is sent (ADRs 1300, 1308); its refusal is answered by refusals.ts.
//
// A call that is admitted holds its estimated cost against the budget until it finishes (ADR 1308): the input
// estimated from the request body (estimateInputTokens) and the request's max output tokens (else
// RESERVED_OUTPUT_TOKENS), priced by the call's price table. The hold is released by MeteredCall.finish,
// which every call reaches whatever its end, when the real cost is charged.
//
// A call under rate limits (ADR 1309: its user's policy; ADR 1313: also its team's, workloads' or namespace's) is
// then admitted by the rate windows of every such level at once, with the same estimate in tokens; the call's
// end settles them all to its real tokens through the same hold, so it happens exactly once.

import type { ServerResponse } from 'node:http';
import type { BudgetRefusal } from '../budgets/budget-book.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { type RateAdmission, RateStoreUnreachable, type RateWindows } from '../budgets/rate-windows.ts';
import type { BudgetPolicyConfig } from '../../../contracts/budget-config.ts';
import type { RateLevel } from '../../../contracts/budget-policies.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { costsNothing } from '../pricing/provider-pricing.ts';
import { estimateInputTokens } from '../usage/usage-estimate.ts';
import type { TokenUsage } from '../usage/usage.ts';
import { RATE_LIMITED, type RateRefusal, setRateLimitHeaders } from './rate-limit-answer.ts';
import { type CallRefusal, reservedUserRefusal } from './refusals.ts';

/** Output tokens held for a call whose request names no maximum (ADR 1308). */
export const RESERVED_OUTPUT_TOKENS = 4096;

/** What a call's reservation is estimated from: its request body (read or only sized) and, parsed, its JSON. */
export interface ReservationBody {
  /** The body as read, or null when it streams through unread (then only `bytes` is known). */
  bytes: Buffer | string | null;
  size: number;
  /** The request parsed, when the caller already has it; else `bytes` is parsed if it is JSON. */
  json?: unknown;
  /** The usage the request stands for when its bytes do not say it (an audio call's seconds or characters, ADR 0911). */
  usage?: TokenUsage | undefined;
}

/**
 * Whether a call about to go upstream is refused; when it is admitted under a blocking policy, its estimated
 * cost is held until `call` finishes, and under rate limits its request, tokens and slot are counted until
 * then (`res` gets the x-ratelimit-* headers). A call without a user is not budgeted; a call to a local model
 * (provider `local`) costs 0 by definition, so a spent budget leaves the local models usable (ADR 1403).
 * A promise only when the rate windows are shared (Redis, ADR 1311): the in-memory path stays synchronous.
 */
export function reserveForCall(
  budgets: Pick<BudgetEnforcer, 'reserve' | 'rateLevels' | 'rateWindows'> | undefined,
  call: MeteredCall,
  prices: PriceTable,
  body: ReservationBody,
  at: { now: number; res?: ServerResponse },
): CallRefusal | null | Promise<CallRefusal | null> {
  const { now, res } = at;
  const { userId, provider, model } = call.call;
  if (budgets === undefined || userId === null) return null;
  const reserved = reservedUserRefusal(userId);
  if (reserved !== null) return reserved;
  if (costsNothing(provider)) return null;
  const levels = budgets.rateLevels?.(userId);
  const windows = budgets.rateWindows;
  const usage = levels === undefined ? null : reservationUsage(body);
  const outcome = budgets.reserve(userId, now, () => (usage === null ? reservationUsd(prices, provider, model, body) : prices.cost(provider, model, usage).costUsd));
  if (outcome?.refusal) return outcome.refusal;
  if (levels === undefined || windows === undefined || usage === null) {
    if (outcome) call.hold(outcome.release);
    return null;
  }
  const admitting: Admitting = { userId, levels, tokens: usage.inputTokens + usage.outputTokens, release: outcome?.release, windows };
  const admission = windows.admit(levels, admitting.tokens, now);
  if (!(admission instanceof Promise)) return admitted(admitting, admission, call, res);
  return admission.then(
    (answer) => admitted(admitting, answer, call, res),
    (error: unknown) => {
      admitting.release?.();
      if (error instanceof RateStoreUnreachable) return storeUnreachableRefusal(levels[0]!.policy, userId, error, now);
      throw error;
    },
  );
}

/** A call asking the rate windows of its levels, with the budget hold it already has (given back when it is refused). */
interface Admitting {
  userId: string;
  levels: readonly RateLevel[];
  tokens: number;
  release: (() => void) | undefined;
  windows: RateWindows;
}

/** The windows' answer: a refusal, or the call counted and settled once when it finishes (ADR 1309). */
function admitted(a: Admitting, admission: RateAdmission, call: MeteredCall, res: ServerResponse | undefined): RateRefusal | null {
  const { userId, levels, tokens, windows } = a;
  if (res !== undefined) setRateLimitHeaders(res, admission);
  const refusedBy = admission.refusedBy;
  if (refusedBy !== null) {
    a.release?.();
    const refuser = levels[admission.refusedAt ?? 0]!;
    RATE_LIMITED[refuser.level][refusedBy]++;
    return {
      userId,
      policy: refuser.policy.name,
      level: refuser.level,
      subject: refuser.key,
      limits: refuser.limits,
      reservedTokens: tokens,
      admission: { ...admission, refusedBy },
      retryAfterSeconds: Math.max(1, Math.ceil(admission.retryAfterMs / 1000)),
    };
  }
  // A call already finished (its caller left while a shared store answered) settles here and now.
  call.hold((used) => {
    a.release?.();
    void windows.settle(levels, tokens, used === null ? null : used.inputTokens + used.outputTokens, Date.now(), admission.countedHere === true);
  });
  return null;
}

/** budgets.unreachable closed and the shared rate windows down past the grace: 503, as the ledger's (ADR 1311). */
function storeUnreachableRefusal(policy: BudgetPolicyConfig, userId: string, error: RateStoreUnreachable, now: number): BudgetRefusal {
  return {
    userId,
    policy: policy.name,
    limitUsd: Number(policy.limitUsd),
    period: policy.period,
    periodEnd: now,
    retryAfterSeconds: 1,
    unreachable: { ledger: error.store, since: error.since },
  };
}

/** The most a call may cost by its request: estimated input and its max output, priced; 0 when unpriced. */
export function reservationUsd(prices: PriceTable, provider: string, model: string, body: ReservationBody): number {
  return prices.cost(provider, model, reservationUsage(body)).costUsd;
}

/** The most a call may use by its request: its input estimated from the body and its max output tokens. */
function reservationUsage(body: ReservationBody): TokenUsage {
  if (body.usage !== undefined) return body.usage;
  const inputTokens = estimateInputTokens(body.bytes, body.size);
  const outputTokens = maxOutputTokens(body.json !== undefined ? body.json : parsed(body.bytes)) ?? RESERVED_OUTPUT_TOKENS;
  return { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: inputTokens + outputTokens };
}

/**
 * The output cap a request names: OpenAI's max_tokens / max_completion_tokens, the Responses API's
 * max_output_tokens, Anthropic's max_tokens, Gemini's generationConfig.maxOutputTokens, Bedrock's
 * inferenceConfig.maxTokens. Null when it names none.
 */
export function maxOutputTokens(request: unknown): number | null {
  if (typeof request !== 'object' || request === null) return null;
  const r = request as Record<string, unknown>;
  const nested = (key: string, field: string): unknown => {
    const value = r[key];
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[field] : undefined;
  };
  for (const value of [r.max_completion_tokens, r.max_tokens, r.max_output_tokens, nested('generationConfig', 'maxOutputTokens'), nested('inferenceConfig', 'maxTokens')]) {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  }
  return null;
}

function parsed(bytes: Buffer | string | null): unknown {
  if (bytes === null) return null;
  try {
    return JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  } catch {
    return null;
  }
}
