// The one place that turns storage.kind into a span store. Each kind's module (and its driver: better-sqlite3
// for sqlite, a cloud SDK for a remote store) is imported only when that kind is configured, so an engine pays
// memory only for the store it uses (ADR 0003). A new kind is one case here.

import type { Logger } from 'pino';
import type { StorageConfig } from '../../../contracts/runtime-config.ts';
import type { SpanStore } from './span-store.ts';

export async function openSpanStore(storage: StorageConfig, logger: Logger): Promise<SpanStore> {
  switch (storage.kind) {
    case 'sqlite': {
      const { openSqliteSpanStore } = await import('./sqlite-span-store.ts');
      return openSqliteSpanStore(storage.path, { logger, maxSpans: storage.maxSpans });
    }
    case 'memory': {
      const { openMemorySpanStore } = await import('./memory-span-store.ts');
      return openMemorySpanStore(storage.bufferSize);
    }
  }
}
