// The one way tests wait for something that happens in its own time (another process, the API server, a
// stream finishing): check, and check again until the answer is there or the deadline passes. Tests never
// sleep for a fixed time and hope; code under test that runs on timers gets an injected or fake clock instead.

import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long (default 30 s: cluster operations on a loaded 2-core machine). */
  timeoutMs?: number;
  /** Pause between checks (default 50 ms). */
  intervalMs?: number;
  /** Stop waiting at once (the awaited thing can no longer happen, e.g. the process exited). */
  signal?: AbortSignal;
}

/**
 * Resolves with the first value `check` returns other than undefined or false. A check that throws counts as
 * "not yet" (an API server still starting); the last error is named if the wait times out.
 */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, options: number | WaitOptions = {}): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 50, signal } = typeof options === 'number' ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}`);
    }
    await sleep(intervalMs, undefined, signal ? { signal } : undefined);
  }
}
