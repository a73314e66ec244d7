// A credential cache for the request path: a fresh value is returned without I/O, a value close to
// expiry is refreshed early, and concurrent callers share one refresh. Both the Google and AWS providers
// use it so their refresh rules are the same and tested once.

export interface Expiring<T> {
  value: T;
  /** Epoch milliseconds after which the value is invalid; undefined when it never expires. */
  expiresAt: number | undefined;
}

export interface RefreshingCacheOptions<T> {
  fetch: () => Promise<Expiring<T>>;
  /** Refresh this long before expiry, so no request is sent with a credential about to lapse. */
  refreshMarginMs: number;
  /** A refresh failed while the current value is still valid: the value keeps being served until it expires. */
  onStaleServed?: (error: unknown) => void;
}

export class RefreshingCache<T> {
  readonly #fetch: () => Promise<Expiring<T>>;
  readonly #marginMs: number;
  readonly #onStaleServed: ((error: unknown) => void) | undefined;
  #current: Expiring<T> | undefined;
  #pending: Promise<T> | undefined;
  #lastError: unknown;

  constructor(options: RefreshingCacheOptions<T>) {
    this.#fetch = options.fetch;
    this.#marginMs = options.refreshMarginMs;
    this.#onStaleServed = options.onStaleServed;
  }

  get(): Promise<T> {
    const current = this.#current;
    if (current && (current.expiresAt === undefined || Date.now() < current.expiresAt - this.#marginMs)) {
      return Promise.resolve(current.value);
    }
    this.#pending ??= this.#refresh().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  /** Drops the current value: the next get() fetches (the credential it came from was replaced). */
  invalidate(): void {
    this.#current = undefined;
  }

  /**
   * The error of the last refresh when it left no usable value (callers are failing), else undefined.
   * A failed early refresh while the current value is still valid does not count: requests still succeed.
   */
  get lastError(): unknown {
    return this.#lastError;
  }

  async #refresh(): Promise<T> {
    try {
      const next = await this.#fetch();
      this.#current = next;
      this.#lastError = undefined;
      return next.value;
    } catch (error) {
      const current = this.#current;
      if (current && current.expiresAt !== undefined && Date.now() < current.expiresAt) {
        this.#onStaleServed?.(error);
        return current.value;
      }
      this.#current = undefined;
      this.#lastError = error;
      throw error;
    }
  }
}
