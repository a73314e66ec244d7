// Graceful shutdown bookkeeping: how many calls are in flight, and whether new ones are still accepted.
// SIGTERM flips `draining`, waits for in-flight calls (streams included) to end, then flushes spans.

export class Lifecycle {
  #draining = false;
  #cutting = false;
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Marks a call in flight; call the returned function exactly once when it ends. */
  track(): () => void {
    this.#inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight--;
      if (this.#inFlight === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
    };
  }

  startDraining(): void {
    this.#draining = true;
  }

  /**
   * True once shutdown cuts the connections still open at the drain deadline: a call that ends now did not
   * lose its caller, the proxy stopped it.
   */
  get cutting(): boolean {
    return this.#cutting;
  }

  /** How long shutdown waited before cutting (set with startCutting). */
  drainTimeoutMs: number | undefined;

  startCutting(drainTimeoutMs: number): void {
    this.drainTimeoutMs = drainTimeoutMs;
    this.#cutting = true;
  }

  /** Resolves when nothing is in flight, or after `timeoutMs` (returns false then). */
  waitIdle(timeoutMs: number): Promise<boolean> {
    if (this.#inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.#idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
