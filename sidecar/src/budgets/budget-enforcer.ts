// What the request path and the management API see of budgets, whichever way they are kept: in a ledger of
// this engine's own (local proxy, central server: ledger-budgets.ts) or by the operator for a whole cluster
// (a sidecar: cluster-budgets.ts).

import type { BudgetRefusal, BudgetStanding, ReserveOutcome } from './budget-book.ts';
import type { BudgetJson, GrantJson } from './budget-record.ts';
import type { RateLevel } from '../../../contracts/budget-policies.ts';
import type { RateStoreHealth, RateWindows } from './rate-windows.ts';

export interface GrantRequest {
  amountUsd: string;
  reason?: string;
  /** epoch ms */
  expiresAt?: number;
}

/** Why a grant could not be added: `status` is the HTTP answer of the management API. */
export class GrantError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'GrantError';
    this.status = status;
    this.code = code;
  }
}

export interface BudgetPage {
  budgets: BudgetJson[];
  next: string | null;
}

export interface BudgetHealth {
  ledger: string;
  policies: number;
  /** Deductions written to the ledger (or reported to the operator) and not yet acknowledged. */
  pendingDeductions: number;
  /** Users whose stored budget is in memory, and how many were dropped to stay within the bound (ADR 1306). */
  usersInMemory?: number;
  usersDropped?: number;
  failedWrites: number;
  lastError: string | null;
  /** Users with calls in flight holding a reservation here (ADR 1308). */
  reservingUsers?: number;
  /** Where the rate limits are counted when that is a shared store (ADR 1311), and since when it is unreachable. */
  rateLimitStore?: RateStoreHealth;
}

export interface BudgetEnforcer {
  /** Hot path: a refusal for this user's call, or null. In memory only. */
  refusal(userId: string, at: number): BudgetRefusal | null;
  /**
   * Hot path: holds a call's estimated cost (`estimateUsd()`, called only when a blocking policy limits the
   * user) until the call finishes, or refuses the call (ADR 1308). Null: no blocking policy, nothing held. In
   * memory only; the holds are this process's own.
   */
  reserve(userId: string, at: number, estimateUsd: () => number): ReserveOutcome | null;
  /**
   * Hot path: the levels whose rate limits a call of this user is counted under, innermost first: its own
   * policy's (ADR 1309), its team's, workloads' and namespace's (ADR 1313); undefined when none has any.
   */
  rateLevels?(userId: string): readonly RateLevel[] | undefined;
  /**
   * The rate-limit counters, per user or group key (ADR 1309, 1313): this process's own (synchronous), or shared
   * by every engine on the Redis store (one round trip per admission, awaited only then: ADR 1311).
   */
  readonly rateWindows?: RateWindows;
  /** A finished call's cost (the span's cost_usd), charged to the user. Never throws. */
  charge(userId: string, costUsd: number, at: number): void;
  /** One page of budgets in user id order, after `after`; `next` is the `after` of the next page, or null. */
  list(at: number, page: { after?: string; limit: number }): BudgetPage;
  /** Counts per policy and the users nearest their limit, for the metrics: one pass, bounded by the users in memory. */
  standing(at: number, nearest: number): BudgetStanding;
  /** undefined: no policy limits this user. */
  get(userId: string, at: number): BudgetJson | undefined;
  addGrant(userId: string, request: GrantRequest, at: number): Promise<GrantJson>;
  /** The user id calls without one are charged to (a pod's service account), or null. */
  readonly defaultUser: string | null;
  health(): BudgetHealth;
  /** Resolves once stored state is loaded; calls before that are not limited. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}
