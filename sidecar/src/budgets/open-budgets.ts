// Picks the ledger the config names and builds the ledger-backed budgets of a local proxy or central server.
// Each ledger's module (and its driver: better-sqlite3, the Firestore SDK, ioredis) is imported only when that kind is
// configured; a sidecar, whose budgets come from the operator, loads none of them (ADR 0003).

import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { BudgetRedisConfig, BudgetsConfig, BudgetUnreachableRule } from '../../../contracts/budget-config.ts';
import type { StorageConfig } from '../../../contracts/runtime-config.ts';
import type { BudgetLedger } from './ledger.ts';
import { DEFAULT_REFRESH_MS, LedgerBudgets } from './ledger-budgets.ts';
import type { RedisRateWindows } from './redis-rate-windows.ts';

export const SQLITE_LEDGER_FILE = 'tollgate-budgets.db';

/** budgets.ledger.path, else tollgate-budgets.db in the span file's folder. */
export function sqliteLedgerPath(budgets: BudgetsConfig, storage: StorageConfig): string {
  return budgets.ledger?.kind === 'sqlite' && budgets.ledger.path ? budgets.ledger.path : join(dirname(storage.path), SQLITE_LEDGER_FILE);
}

/** The configured ledger; without one, SQLite next to the span file (memory when spans are kept in memory). */
export async function openLedger(budgets: BudgetsConfig, storage: StorageConfig): Promise<BudgetLedger> {
  const ledger = budgets.ledger ?? { kind: storage.kind === 'memory' ? 'memory' : 'sqlite' };
  switch (ledger.kind) {
    case 'memory': {
      const { MemoryLedger } = await import('./memory-ledger.ts');
      return new MemoryLedger();
    }
    case 'firestore': {
      const { FirestoreLedger } = await import('./firestore-ledger.ts');
      return new FirestoreLedger({
        collection: ledger.collection,
        ...(ledger.projectId ? { projectId: ledger.projectId } : {}),
        ...(ledger.databaseId ? { databaseId: ledger.databaseId } : {}),
      });
    }
    case 'redis': {
      const { RedisLedger } = await import('./redis-ledger.ts');
      return new RedisLedger(ledger);
    }
    case 'sqlite': {
      const { SqliteLedger } = await import('./sqlite-ledger.ts');
      return new SqliteLedger(sqliteLedgerPath(budgets, storage));
    }
  }
}

/** The configured ledger cannot be opened or read: a bad setting, reported at start like a bad span path. */
export class BudgetLedgerOpenError extends Error {
  constructor(kind: string, cause: unknown) {
    super(`budgets.ledger (${kind}) cannot be opened: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'BudgetLedgerOpenError';
  }
}

export async function openLedgerBudgets(budgets: BudgetsConfig, storage: StorageConfig, logger: Logger): Promise<LedgerBudgets> {
  let ledger: BudgetLedger;
  try {
    ledger = await openLedger(budgets, storage);
  } catch (error) {
    throw new BudgetLedgerOpenError(budgets.ledger?.kind ?? 'sqlite', error);
  }
  // Only a shared ledger has spend this engine did not make itself.
  const shared = ledger.kind === 'firestore' || ledger.kind === 'redis';
  // A Redis ledger shares the rate windows too, on the same store and prefix (ADR 1311).
  const rateWindows = budgets.ledger?.kind === 'redis' ? await openRedisRateWindows(budgets.ledger, budgets.unreachable, logger) : undefined;
  return new LedgerBudgets({ ledger, config: budgets, logger, refreshMs: shared ? DEFAULT_REFRESH_MS : 0, ...(rateWindows ? { rateWindows } : {}) });
}

async function openRedisRateWindows(config: BudgetRedisConfig, unreachable: BudgetUnreachableRule | undefined, logger: Logger): Promise<RedisRateWindows> {
  const { RedisRateWindows } = await import('./redis-rate-windows.ts');
  return new RedisRateWindows({ ...config, logger, ...(unreachable ? { unreachable } : {}) });
}
