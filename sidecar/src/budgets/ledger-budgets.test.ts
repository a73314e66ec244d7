import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseBudgetsPatch } from '../../../contracts/budget-config.ts';
import type { BudgetsConfig } from '../../../contracts/budget-config.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { LedgerBudgets } from './ledger-budgets.ts';
import { MemoryLedger } from './memory-ledger.ts';
import { SqliteLedger } from './sqlite-ledger.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines, messages: (text: string) => lines.filter((l) => String(l.msg).includes(text)) };
}

function config(policies: unknown[]): BudgetsConfig {
  return { ledger: { kind: 'sqlite' }, policies: parseBudgetsPatch({ policies }).policies! };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-ledger-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('budgets kept in SQLite', () => {
  it('a restarted engine enforces the same spend, grants and alerts', async () => {
    const path = join(dir, 'tollgate-budgets.db');
    const log = capture();
    const cfg = config([{ name: 'default', limitUsd: '0.01' }]);
    let now = T0;
    const first = new LedgerBudgets({ ledger: new SqliteLedger(path), config: cfg, logger: log.logger, now: () => now });
    await first.ready;
    for (let i = 0; i < 9; i++) first.charge('alice', 0.001, now);
    const grant = await first.addGrant('bob', { amountUsd: '0.5', reason: 'demo' }, now);
    first.charge('bob', 0.002, now);
    await first.close();
    expect(log.messages('budget alert').map((l) => l.threshold)).toEqual([80, 90]);

    now += 60_000;
    const second = new LedgerBudgets({ ledger: new SqliteLedger(path), config: cfg, logger: log.logger, now: () => now });
    await second.ready;
    expect(second.list(now, { limit: 100 }).budgets.map((b) => [b.user_id, b.spent_usd, b.state])).toEqual([
      ['alice', 0.009, 'warning'],
      ['bob', 0.002, 'ok'],
    ]);
    expect(second.get('bob', now)!.grants).toEqual([{ ...grant, remaining_usd: 0.498 }]);
    second.charge('alice', 0.001, now);
    expect(second.refusal('alice', now)).toMatchObject({ userId: 'alice', policy: 'default' });
    await second.close();
    // 80 and 90 were not repeated after the restart; 100 came once.
    expect(log.messages('budget alert').map((l) => l.threshold)).toEqual([80, 90, 100]);
    const alert = log.messages('budget alert')[2]!;
    expect(alert).toMatchObject({ level: 40, user_id: 'alice', policy: 'default', threshold: 100, spent_usd: 0.01, limit_usd: 0.01, period_start: '2026-11-01T00:00:00.000Z' });
  });

  it('a failed write logs `failed to deduct spend`, keeps the amount, and retries until it is stored', async () => {
    const path = join(dir, 'tollgate-budgets.db');
    const log = capture();
    const budgets = new LedgerBudgets({ ledger: new SqliteLedger(path), config: config([{ name: 'p', limitUsd: 1 }]), logger: log.logger, now: () => T0 });
    await budgets.ready;
    // Another process holds the write lock.
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    budgets.charge('alice', 0.25, T0);
    budgets.charge('alice', 0.5, T0);
    await waitFor('a failed deduction', () => log.messages('failed to deduct spend').length > 0);
    expect(log.messages('failed to deduct spend')[0]).toMatchObject({ level: 50, user_id: 'alice', amount_usd: '0.75', err: expect.stringContaining('locked') });
    // Enforcement continues from memory meanwhile.
    budgets.charge('alice', 0.25, T0);
    expect(budgets.refusal('alice', T0)).not.toBeNull();
    // The failed batch waits to be retried as it was; the later charge queues behind it.
    expect(budgets.health()).toMatchObject({ pendingDeductions: 2, failedWrites: expect.any(Number) });
    other.exec('COMMIT');
    await waitFor('the retried write', () => budgets.health().pendingDeductions === 0, 10_000);
    const row = other.prepare('SELECT spent FROM budget_usage WHERE user_id = ?').get('alice') as { spent: number };
    expect(row.spent).toBe(10_000_000_000); // exactly 1 USD in ledger units
    other.close();
    await budgets.close();
  });

  it('grants: a clear error for a user no policy limits or a bad amount, nothing stored', async () => {
    const ledger = new MemoryLedger();
    const budgets = new LedgerBudgets({ ledger, config: config([{ name: 'p', users: ['alice'], limitUsd: 1 }]), logger: capture().logger, now: () => T0 });
    await budgets.ready;
    await expect(budgets.addGrant('carol', { amountUsd: '1' }, T0)).rejects.toMatchObject({ status: 404, code: 'budget_not_found' });
    await expect(budgets.addGrant('alice', { amountUsd: '-1' }, T0)).rejects.toMatchObject({ status: 400 });
    expect(await ledger.load(0)).toEqual([]);
  });
});

describe('many users (ADR 1306)', () => {
  it('keeps at most maxUsers in memory, still refuses a spent user who was dropped, and pages through every user', async () => {
    const log = capture();
    const budgets = new LedgerBudgets({
      ledger: new SqliteLedger(join(dir, 'many.db')),
      config: config([{ name: 'default', limitUsd: '0.01' }]),
      logger: log.logger,
      now: () => T0,
      maxUsers: 50,
    });
    await budgets.ready;
    budgets.charge('early-spender', 0.02, T0);
    for (let i = 0; i < 2000; i++) budgets.charge(`user-${String(i).padStart(4, '0')}`, 0.001, T0);
    await budgets.flushed();
    const health = budgets.health();
    expect(health.usersInMemory).toBeLessThanOrEqual(50);
    expect(health.usersDropped).toBeGreaterThan(1900);
    expect(budgets.standing(T0, 10).records).toBeLessThanOrEqual(50);
    // Long out of memory, read back from the ledger when it comes back: still spent.
    expect(budgets.refusal('early-spender', T0)).toMatchObject({ userId: 'early-spender', policy: 'default' });

    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = budgets.list(T0, after === undefined ? { limit: 300 } : { after, limit: 300 });
      seen.push(...page.budgets.map((b) => b.user_id));
      expect(page.budgets.every((b) => b.spent_usd > 0)).toBe(true);
      if (page.next === null) break;
      after = page.next;
    }
    expect(seen).toHaveLength(2001);
    expect(seen).toEqual([...seen].sort());
    await budgets.close();
  });
});

describe('a ledger another process holds locked at shutdown', () => {
  it('keeps the spend beside the ledger and writes it at the next start, once, even if that start is repeated', async () => {
    const path = join(dir, 'locked.db');
    const log = capture();
    const cfg = config([{ name: 'default', limitUsd: '1' }]);
    const first = new LedgerBudgets({ ledger: new SqliteLedger(path), config: cfg, logger: log.logger, now: () => T0 });
    await first.ready;
    const holder = new Database(path);
    holder.exec('BEGIN EXCLUSIVE');
    first.charge('gina', 0.25, T0);
    await first.close();
    expect(log.messages('failed to deduct spend; kept beside the ledger for the next start')).toHaveLength(1);
    holder.exec('COMMIT');
    holder.close();

    // A replay that crashed after writing but before removing its file is replayed again: the batch id makes
    // the second one a no-op.
    const kept = readFileSync(`${path}.unwritten`, 'utf8');
    const second = new LedgerBudgets({ ledger: new SqliteLedger(path), config: cfg, logger: log.logger, now: () => T0 });
    await second.ready;
    expect(second.get('gina', T0)?.spent_usd).toBe(0.25);
    await second.close();
    writeFileSync(`${path}.unwritten`, kept);
    const third = new LedgerBudgets({ ledger: new SqliteLedger(path), config: cfg, logger: log.logger, now: () => T0 });
    await third.ready;
    expect(third.get('gina', T0)?.spent_usd).toBe(0.25);
    expect(existsSync(`${path}.unwritten`)).toBe(false);
    await third.close();
  });
});
