// The `all auth strategies failed` log line: one per refused request, with each strategy's reason, up to
// MAX_LINES per minute. Past that, refusals are only counted, and when the minute ends one line says how many
// were left out and why (counts per reason), so a flood of bad tokens cannot fill the disk and still shows
// up, as more than ten lines a minute, on the alert operators set for it.

import type { Logger } from 'pino';
import type { AuthFailure } from './authenticator.ts';
import type { AuthReason } from './identity.ts';

export const AUTH_FAILED_MESSAGE = 'all auth strategies failed';
const WINDOW_MS = 60_000;
const MAX_LINES = 20;

export interface RefusedRequest {
  method: string;
  /** Without the query string, which can carry secrets of its own. */
  path: string;
  ip: string;
  failure: AuthFailure;
}

export class AuthFailureLog {
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #maxLines: number;
  #windowStart = 0;
  #inWindow = 0;
  #suppressed = 0;
  #suppressedReasons: Partial<Record<AuthReason, number>> = {};
  #total = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(logger: Logger, opts: { now?: () => number; maxLinesPerMinute?: number } = {}) {
    this.#logger = logger;
    this.#now = opts.now ?? (() => Date.now());
    this.#maxLines = opts.maxLinesPerMinute ?? MAX_LINES;
  }

  /** Refusals since start, logged or not. */
  get total(): number {
    return this.#total;
  }

  record(refused: RefusedRequest): void {
    const now = this.#now();
    if (now - this.#windowStart >= WINDOW_MS) {
      this.#flush();
      this.#windowStart = now;
      this.#inWindow = 0;
    }
    this.#total++;
    this.#inWindow++;
    if (this.#inWindow > this.#maxLines) {
      this.#suppressed++;
      this.#suppressedReasons[refused.failure.reason] = (this.#suppressedReasons[refused.failure.reason] ?? 0) + 1;
      if (this.#timer === null) {
        this.#timer = setTimeout(() => this.#flush(), Math.max(0, this.#windowStart + WINDOW_MS - now));
        this.#timer.unref();
      }
      return;
    }
    this.#logger.warn(
      {
        reason: refused.failure.reason,
        status_code: refused.failure.statusCode,
        method: refused.method,
        path: refused.path,
        ip: refused.ip,
        strategies: refused.failure.attempts,
        failures_this_minute: this.#inWindow,
        failures_total: this.#total,
      },
      AUTH_FAILED_MESSAGE,
    );
  }

  /** Logs the count of refusals left out of the log, if any. */
  close(): void {
    this.#flush();
  }

  #flush(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#suppressed === 0) return;
    this.#logger.warn(
      { suppressed: this.#suppressed, reasons: this.#suppressedReasons, failures_this_minute: this.#inWindow, failures_total: this.#total },
      `${AUTH_FAILED_MESSAGE} (${this.#suppressed} more in the last minute, counted but not logged one by one)`,
    );
    this.#suppressed = 0;
    this.#suppressedReasons = {};
  }
}
