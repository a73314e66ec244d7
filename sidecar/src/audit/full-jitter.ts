// Capped exponential backoff with full jitter (a random delay between 0 and the capped exponential), the
// form that spreads the reconnects of many sidecars after an agent restart instead of synchronising them.

export interface BackoffSettings {
  initialMs: number;
  maxMs: number;
}

/** Delay before retry number `attempt` (1 = the first retry). */
export function fullJitterDelay(settings: BackoffSettings, attempt: number, random: () => number = Math.random): number {
  const cap = Math.min(settings.maxMs, settings.initialMs * 2 ** Math.min(attempt - 1, 30));
  return Math.floor(random() * cap);
}

/** Resolves after `ms`, or at once (false) when the signal aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
