// A list-and-watch cache of one resource type that keeps going whatever the API server does: every error
// restarts it after an exponential, jittered delay (an API server restart must not be answered by a
// thundering herd); 410 Gone relists at once; a watch that stays silent longer than a bookmark interval is
// presumed dead (a half-open connection) and replaced. It requests bookmarks, drops managedFields and
// resyncs rarely, as a safety net rather than polling.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Backoff, type BackoffPolicy } from './backoff.ts';
import { type KubeApi, KubeApiError, type KubeObject, objectKey, PARTIAL_METADATA, PARTIAL_METADATA_LIST } from './api-client.ts';

export type InformerHandler<T> = {
  add?: (obj: T) => void;
  update?: (obj: T, old: T) => void;
  delete?: (obj: T) => void;
};

export interface InformerOptions<T extends KubeObject> {
  api: KubeApi;
  /** Collection path, e.g. `/apis/tollgate.dev/v1alpha1/proxyconfigs` or `/api/v1/namespaces/x/secrets`. */
  path: string;
  logger: Logger;
  /** Shapes each object before it is cached (managedFields are dropped before this runs). */
  transform?: (obj: T) => T;
  restartBackoff?: BackoffPolicy;
  /** Silence after which a watch is presumed dead; the API server sends bookmarks about once a minute. */
  staleAfterMs?: number;
  /** Period of the safety-net resync (every object handed to `update` again). */
  resyncMs?: number;
  labelSelector?: string;
  /** List and watch the objects' metadata only (PartialObjectMetadata). */
  metadataOnly?: boolean;
  /** e.g. `metadata.name=x`: RBAC that names one object (resourceNames) allows list and watch only with it. */
  fieldSelector?: string;
}

const DEFAULT_RESTART: BackoffPolicy = { baseMs: 500, maxMs: 30_000, jitter: 0.5 };
const DEFAULT_STALE_MS = 150_000;
const DEFAULT_RESYNC_MS = 10 * 3_600_000;
const PAGE_SIZE = 500;

interface List<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T & { code?: number; reason?: string; message?: string };
}

class GoneError extends Error {}
class StaleWatchError extends Error {}

export class Informer<T extends KubeObject> {
  #opts: InformerOptions<T>;
  #store = new Map<string, T>();
  #handlers: InformerHandler<T>[] = [];
  #resourceVersion = '';
  #synced = false;
  #syncWaiters: (() => void)[] = [];
  #abort = new AbortController();
  #running: Promise<void> | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  /** Times the informer listed from scratch (the first sync and every 410 Gone); useful in tests and logs. */
  relists = 0;
  /** Watches restarted because they were silent longer than `staleAfterMs`. */
  staleRestarts = 0;
  /** Restarts after any other error, each one after a backoff delay. */
  errorRestarts = 0;
  #lastActivityAt = Date.now();

  constructor(opts: InformerOptions<T>) {
    this.#opts = opts;
  }

  on(handler: InformerHandler<T>): void {
    this.#handlers.push(handler);
  }

  get(key: string): T | undefined {
    return this.#store.get(key);
  }

  list(namespace?: string): T[] {
    const all = [...this.#store.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  /**
   * Epoch milliseconds of the run loop's last sign of life: a list page, a watch opened, a watch event or
   * bookmark, or the end of a backoff delay. A healthy loop never goes quiet much longer than `staleAfterMs`
   * plus one backoff delay, whatever the API server does; a longer silence means the loop itself is wedged.
   */
  lastActivityAt(): number {
    return this.#lastActivityAt;
  }

  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  start(): void {
    if (this.#running) return;
    this.#running = this.#run();
    const resync = this.#opts.resyncMs ?? DEFAULT_RESYNC_MS;
    this.#resyncTimer = setInterval(() => {
      for (const obj of this.#store.values()) this.#emit('update', obj, obj);
    }, resync);
    this.#resyncTimer.unref();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    clearInterval(this.#resyncTimer);
    await this.#running;
  }

  async #run(): Promise<void> {
    const log = this.#opts.logger;
    const backoff = new Backoff(this.#opts.restartBackoff ?? DEFAULT_RESTART);
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      // True from a relist until the watch after it delivers an event: a 410 in that window is not an old
      // version expiring but a server that cannot serve this one, and relisting at once would spin.
      let justListed = false;
      try {
        if (!this.#resourceVersion) {
          await this.#relist(signal);
          backoff.reset();
          justListed = true;
        }
        // Progress (any event) forgets earlier failures, also when the watch later ends in an error: an API
        // server restart next week must start again from the base delay, not from where the last one left it.
        const receivedEvents = await this.#watch(signal, () => {
          backoff.reset();
          justListed = false;
        });
        // A watch the server closed normally (its timeout) is resumed at once from the last version; one
        // that ends without a single event is throttled, so a misbehaving server cannot make this spin.
        if (!receivedEvents) await this.#pause(backoff.next(), signal);
      } catch (error) {
        if (signal.aborted) break;
        if (error instanceof GoneError) {
          this.#resourceVersion = '';
          if (justListed) {
            const delay = backoff.next();
            log.warn({ path: this.#opts.path, retryInMs: delay }, 'watch refused the version just listed (410 Gone); relisting after backoff');
            await this.#pause(delay, signal);
          } else {
            log.info({ path: this.#opts.path }, 'watch expired (410 Gone); relisting');
          }
          continue;
        }
        if (error instanceof StaleWatchError) {
          this.staleRestarts += 1;
          this.#opts.api.dropConnections();
          log.warn({ path: this.#opts.path }, 'watch stale (no events or bookmarks); restarting it');
          continue;
        }
        this.errorRestarts += 1;
        const delay = backoff.next();
        log.warn({ path: this.#opts.path, err: errorText(error), retryInMs: delay }, 'informer error; restarting after backoff');
        await this.#pause(delay, signal);
      }
    }
  }

  async #pause(ms: number, signal: AbortSignal): Promise<void> {
    await sleep(ms, undefined, { signal }).catch(() => undefined);
    this.#lastActivityAt = Date.now();
  }

  async #relist(signal: AbortSignal): Promise<void> {
    const items: T[] = [];
    let cont: string | undefined;
    let resourceVersion = '';
    do {
      const page = await this.#opts.api.get<List<T>>(this.#opts.path, {
        query: { limit: PAGE_SIZE, continue: cont, labelSelector: this.#opts.labelSelector, fieldSelector: this.#opts.fieldSelector },
        signal,
        ...(this.#opts.metadataOnly ? { accept: PARTIAL_METADATA_LIST } : {}),
      });
      this.#lastActivityAt = Date.now();
      items.push(...(page.items ?? []));
      cont = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion ?? '';
    } while (cont);
    this.relists += 1;
    const fresh = new Map<string, T>();
    for (const item of items) {
      const obj = this.#shape(item);
      fresh.set(objectKey(obj), obj);
    }
    const old = this.#store;
    this.#store = fresh;
    this.#resourceVersion = resourceVersion;
    for (const [key, obj] of old) if (!fresh.has(key)) this.#emit('delete', obj);
    for (const [key, obj] of fresh) {
      const before = old.get(key);
      if (!before) this.#emit('add', obj);
      else if (before.metadata.resourceVersion !== obj.metadata.resourceVersion) this.#emit('update', obj, before);
    }
    if (!this.#synced) {
      this.#synced = true;
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
  }

  /** Watches until the server ends the stream; throws on errors, Gone and staleness. */
  async #watch(outer: AbortSignal, progressed: () => void): Promise<boolean> {
    const staleAfter = this.#opts.staleAfterMs ?? DEFAULT_STALE_MS;
    const controller = new AbortController();
    const signal = AbortSignal.any([outer, controller.signal]);
    let stale = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      this.#lastActivityAt = Date.now();
      clearTimeout(timer);
      timer = setTimeout(() => {
        stale = true;
        controller.abort();
      }, staleAfter);
      timer.unref();
    };
    let received = false;
    try {
      arm();
      const body = await this.#opts.api.stream(
        this.#opts.path,
        {
          watch: 1,
          resourceVersion: this.#resourceVersion,
          allowWatchBookmarks: true,
          // Like client-go: 5–10 minutes, randomised so that watches of many clients do not expire together.
          timeoutSeconds: Math.floor(300 + Math.random() * 300),
          labelSelector: this.#opts.labelSelector,
          fieldSelector: this.#opts.fieldSelector,
        },
        signal,
        this.#opts.metadataOnly ? PARTIAL_METADATA : undefined,
      );
      let buffered = '';
      const decoder = new TextDecoder();
      for await (const chunk of body) {
        arm();
        buffered += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (!line) continue;
          this.#handleEvent(JSON.parse(line) as WatchEvent<T>);
          if (!received) progressed();
          received = true;
        }
      }
      return received;
    } catch (error) {
      if (stale && !outer.aborted) throw new StaleWatchError('stale watch');
      if (error instanceof KubeApiError && error.statusCode === 410) throw new GoneError(error.message);
      throw error;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }

  #handleEvent(event: WatchEvent<T>): void {
    const obj = event.object;
    switch (event.type) {
      case 'ERROR':
        if (obj.code === 410) throw new GoneError(obj.message ?? 'resource version too old');
        throw new KubeApiError(obj.code ?? 500, obj.reason ?? '', `watch ${this.#opts.path}: ${obj.message ?? 'error event'}`);
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED': {
        const shaped = this.#shape(obj);
        const key = objectKey(shaped);
        const before = this.#store.get(key);
        this.#store.set(key, shaped);
        if (before) this.#emit('update', shaped, before);
        else this.#emit('add', shaped);
        break;
      }
      case 'DELETED': {
        const key = objectKey(obj);
        const before = this.#store.get(key) ?? this.#shape(obj);
        this.#store.delete(key);
        this.#emit('delete', before);
        break;
      }
    }
    const rv = obj.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
  }

  #shape(obj: T): T {
    if (obj.metadata?.managedFields !== undefined) {
      obj = { ...obj, metadata: { ...obj.metadata } };
      delete obj.metadata.managedFields;
    }
    return this.#opts.transform ? this.#opts.transform(obj) : obj;
  }

  #emit(kind: 'add' | 'delete', obj: T): void;
  #emit(kind: 'update', obj: T, old: T): void;
  #emit(kind: 'add' | 'update' | 'delete', obj: T, old?: T): void {
    for (const handler of this.#handlers) {
      try {
        if (kind === 'add') handler.add?.(obj);
        else if (kind === 'update') handler.update?.(obj, old as T);
        else handler.delete?.(obj);
      } catch (error) {
        this.#opts.logger.error({ err: errorText(error), path: this.#opts.path }, 'informer handler failed');
      }
    }
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
