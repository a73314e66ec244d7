// storage.kind → the span store, for the proxy (which writes, and creates the file or table) and for the spend
// report (which only reads what is there): the one place a new store kind is added. Each kind's module and its
// driver (better-sqlite3, DuckDB, a cloud SDK) is imported only when that kind is configured, so a process pays
// memory only for the store it uses (ADR 0003). Stores are opened before the engine is built (main.ts,
// spend-cli.ts).

import { join } from 'node:path';
import type { Logger } from 'pino';
import type { StorageConfig } from '../../../contracts/runtime-config.ts';
import { STORAGE_DEFAULTS } from '../../../contracts/storage-config.ts';
import type { SpanStore } from './span-store.ts';
import type { SpanRetryPolicy } from './span-writer.ts';
import { PROXY_ENV } from '../../../contracts/sidecar-env.ts';

export interface OpenedSpanStore {
  kind: StorageConfig['kind'];
  store: SpanStore;
  /** Where the spans are, for messages: a file, `dataset.table`, a collection. */
  location: string;
  /** A store on the network: its write failures are retried with backoff and do not make /healthz fail. */
  remote: boolean;
  /** The writer's backoff for this store's retryable failures (remote stores). */
  retry?: SpanRetryPolicy;
}

export interface OpenSpanStoreOptions {
  logger: Logger;
  env: NodeJS.ProcessEnv;
  /** `proxy` writes (and creates what is missing); `report` reads what is there and never creates anything. */
  purpose: 'proxy' | 'report';
}

/**
 * A remote store that is down keeps a batch for about a minute of retries (0.5 s doubling to 30 s, jittered)
 * before it is dropped; the spans behind it wait in the writer's bounded ring meanwhile.
 */
export const REMOTE_STORE_RETRY: SpanRetryPolicy = { maxAttempts: 8, initialBackoffMs: 500, maxBackoffMs: 30_000 };

/** The DuckDB file: storage.duckdb.path, else spans.duckdb in the pod's state directory, else ./tollgate.duckdb. */
export function duckDbPath(storage: StorageConfig, env: NodeJS.ProcessEnv): string {
  if (storage.duckdb?.path) return storage.duckdb.path;
  const stateDir = env[PROXY_ENV.stateDir];
  return stateDir ? join(stateDir, STORAGE_DEFAULTS.duckdbPodFile) : STORAGE_DEFAULTS.duckdbFile;
}

/** Opens the configured store. Throws ConfigError for missing settings and SpanStoreOpenError for a file that cannot be opened. */
export async function openSpanStore(storage: StorageConfig, options: OpenSpanStoreOptions): Promise<OpenedSpanStore> {
  const { logger, env, purpose } = options;
  const remote = { remote: true, retry: REMOTE_STORE_RETRY } as const;
  switch (storage.kind) {
    case 'memory': {
      const { openMemorySpanStore } = await import('./memory-span-store.ts');
      return { kind: 'memory', store: openMemorySpanStore(storage.bufferSize), location: 'memory', remote: false };
    }
    case 'sqlite': {
      const { openSqliteSpanStore } = await import('./sqlite-span-store.ts');
      const store = openSqliteSpanStore(storage.path, { logger, maxSpans: storage.maxSpans, mustExist: purpose === 'report' });
      return { kind: 'sqlite', store, location: storage.path, remote: false };
    }
    case 'duckdb': {
      const path = duckDbPath(storage, env);
      const { openDuckDbSpanStore } = await import('./duckdb-span-store.ts');
      const store = await openDuckDbSpanStore(path, { logger, maxSpans: storage.maxSpans, mustExist: purpose === 'report' });
      return { kind: 'duckdb', store, location: path, remote: false };
    }
    case 'bigquery': {
      const s = storage.bigquery ?? {};
      const settings = { ...s, dataset: s.dataset ?? STORAGE_DEFAULTS.bigqueryDataset, table: s.table ?? STORAGE_DEFAULTS.bigqueryTable };
      const { openBigQuerySpanStore } = await import('./bigquery-span-store.ts');
      const store = openBigQuerySpanStore(settings, { logger, prepare: purpose === 'proxy' });
      return { kind: 'bigquery', store, location: `${settings.projectId ? `${settings.projectId}.` : ''}${settings.dataset}.${settings.table}`, ...remote };
    }
    case 'firestore': {
      const s = storage.firestore ?? {};
      const settings = { ...s, collection: s.collection ?? STORAGE_DEFAULTS.firestoreCollection };
      const { openFirestoreSpanStore } = await import('./firestore-span-store.ts');
      const store = openFirestoreSpanStore(settings, { logger });
      return { kind: 'firestore', store, location: `collection ${settings.collection}`, ...remote };
    }
  }
}
