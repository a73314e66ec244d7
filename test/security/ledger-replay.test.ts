// Spend a SQLite ledger could not write at shutdown is kept in `<ledger>.unwritten` and replayed at the next start
// (ADR 1306's kept batches). The replay used to write whatever the file held: a batch with a negative amount
// lowered a user's spend to −4,999.99 USD, a negative grant part gave a used-up grant back, and a huge alert
// threshold silenced the period's alerts. A replayed delta is now checked as a first write is; one that fails is
// skipped and logged, and the rest of the file is written.

import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseBudgetsPatch, type BudgetsConfig } from '../../contracts/budget-config.ts';
import { LedgerBudgets } from '../../sidecar/src/budgets/ledger-budgets.ts';
import { SqliteLedger } from '../../sidecar/src/budgets/sqlite-ledger.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
/** The monthly UTC period T0 is in. */
const NOVEMBER = Date.UTC(2026, 10, 1);
const USD = 10_000_000_000n;

const CONFIG: BudgetsConfig = {
  ledger: { kind: 'sqlite' },
  policies: parseBudgetsPatch({ policies: [{ name: 'default', limitUsd: '10', period: 'month', timeZone: 'UTC' }] }).policies!,
};

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, messages: (text: string) => lines.filter((l) => String(l.msg).startsWith(text)) };
}

interface UsageRow {
  user_id: string;
  spent: bigint;
  limit_used: bigint;
  alerted: bigint;
}

/** What the ledger file holds, read with a connection of its own. */
function stored(path: string): { usage: UsageRow[]; grantUsed: bigint[] } {
  const db = new Database(path, { readonly: true });
  db.defaultSafeIntegers(true);
  try {
    return {
      usage: db.prepare('SELECT user_id, spent, limit_used, alerted FROM budget_usage ORDER BY user_id').all() as UsageRow[],
      grantUsed: db.prepare('SELECT used FROM budget_grants').pluck().all() as bigint[],
    };
  } finally {
    db.close();
  }
}

/** A delta as `keep` writes it: amounts as decimal strings of ledger units. */
function delta(userId: string, amount: string, opts: { limitPart?: string; grantParts?: { grantId: string; amount: string }[]; alerted?: number } = {}) {
  return {
    userId,
    policy: 'default',
    periodStart: NOVEMBER,
    split: { amount, limitPart: opts.limitPart ?? amount, grantParts: opts.grantParts ?? [] },
    alerted: opts.alerted ?? 0,
  };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-ledger-replay-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('spend kept at shutdown and replayed at the next start', () => {
  it('is checked as a first write is: invalid deltas are skipped and logged, valid ones in the same file are written', async () => {
    const path = join(dir, 'tollgate-budgets.db');
    // Real spend first: gina has a 1 USD grant and spends 2 USD, 1 from the grant and 1 from the limit.
    const first = new LedgerBudgets({ ledger: new SqliteLedger(path), config: CONFIG, logger: capture().logger, now: () => T0 });
    await first.ready;
    const grant = await first.addGrant('gina', { amountUsd: '1' }, T0);
    first.charge('gina', 2, T0);
    await first.flushed();
    await first.close();
    expect(stored(path)).toEqual({ usage: [{ user_id: 'gina', spent: 2n * USD, limit_used: 1n * USD, alerted: 0n }], grantUsed: [1n * USD] });

    const hostile = [
      // The finding: spend becomes −4,999.99 USD.
      { id: 'b-negative', deltas: [delta('gina', '-49999900000000')] },
      // A valid delta of hank beside a negative grant part that would give gina's used-up grant back.
      { id: 'b-mixed', deltas: [delta('hank', '3000000000'), delta('gina', '0', { limitPart: '0', grantParts: [{ grantId: grant.id, amount: '-10000000000' }] })] },
      // A threshold no policy can have: every alert of the period would be taken as logged already.
      { id: 'b-alert', deltas: [delta('gina', '1', { alerted: 1_000_000 })] },
      // Past where sums stop (2^62 units); 2^63 − 1 would have reached the store as is.
      { id: 'b-overflow', deltas: [delta('ivy', '9223372036854775807')] },
      // No batch id: nothing to write it once by.
      { deltas: [delta('ivy', '5000000000')] },
      // Genuine kept spend.
      { id: 'b-valid', deltas: [delta('gina', '5000000000')] },
    ];
    writeFileSync(`${path}.unwritten`, hostile.map((batch) => `${JSON.stringify(batch)}\n`).join(''), { mode: 0o600 });

    const log = capture();
    const second = new LedgerBudgets({ ledger: new SqliteLedger(path), config: CONFIG, logger: log.logger, now: () => T0 });
    await second.ready;

    // gina: 2 + 0.50 USD spent, 1 + 0.50 USD of the limit used, the grant still used up; hank: 0.30 USD.
    expect(second.get('gina', T0)).toMatchObject({ spent_usd: 2.5, remaining_usd: 8.5, grants: [{ id: grant.id, remaining_usd: 0 }] });
    expect(second.get('hank', T0)).toMatchObject({ spent_usd: 0.3, remaining_usd: 9.7 });
    expect(second.get('ivy', T0)).toMatchObject({ spent_usd: 0, remaining_usd: 10 });
    await second.close();
    expect(stored(path)).toEqual({
      usage: [
        { user_id: 'gina', spent: 25n * (USD / 10n), limit_used: 15n * (USD / 10n), alerted: 0n },
        { user_id: 'hank', spent: 3n * (USD / 10n), limit_used: 3n * (USD / 10n), alerted: 0n },
      ],
      grantUsed: [1n * USD],
    });
    expect(existsSync(`${path}.unwritten`)).toBe(false);
    expect(existsSync(`${path}.unwritten.replaying`)).toBe(false);

    const skipped = log.messages('budget spend kept at the last shutdown skipped: not valid spend');
    expect(skipped.map((l) => ({ file: l.file, line: l.line, batch: l.batch, user_id: l.user_id, problem: l.problem, level: l.level }))).toEqual([
      { file: `${path}.unwritten`, line: 1, batch: 'b-negative', user_id: 'gina', problem: 'amount is negative (-4999.99 USD)', level: 50 },
      { file: `${path}.unwritten`, line: 2, batch: 'b-mixed', user_id: 'gina', problem: `part of grant "${grant.id}" is negative (-1 USD)`, level: 50 },
      { file: `${path}.unwritten`, line: 3, batch: 'b-alert', user_id: 'gina', problem: 'has alert threshold 1000000, not a percentage from 0 to 1000', level: 50 },
      {
        file: `${path}.unwritten`,
        line: 4,
        batch: 'b-overflow',
        user_id: 'ivy',
        problem: 'amount is more than a spend can reach (922337203.6854775807 USD; sums stop at 461168601.8427387904 USD)',
        level: 50,
      },
      { file: `${path}.unwritten`, line: 5, batch: null, user_id: null, problem: 'is not a batch of spend ({"id", "deltas"})', level: 50 },
    ]);
    expect(skipped[0]!.msg).toBe(
      `budget spend kept at the last shutdown skipped: not valid spend (${path}.unwritten line 1, batch b-negative: user "gina": amount is negative (-4999.99 USD))`,
    );
    expect(log.messages('budget spend kept at the last shutdown written to the ledger').map((l) => [l.batches, l.skipped])).toEqual([[2, 5]]);
  });

  it('a first write with a negative amount is refused whole, and the spend stays as it was', async () => {
    const path = join(dir, 'tollgate-budgets.db');
    const ledger = new SqliteLedger(path);
    const grain = (userId: string, amount: bigint) => ({ userId, policy: 'default', periodStart: NOVEMBER, split: { amount, limitPart: amount, grantParts: [] }, alerted: 0 });
    await ledger.deduct({ id: 'a', deltas: [grain('gina', 2n * USD)] });
    await expect(ledger.deduct({ id: 'b', deltas: [grain('hank', USD), grain('gina', -49_999_900_000_000n)] })).rejects.toThrow(
      'batch b not written: the spend of user "gina" amount is negative (-4999.99 USD)',
    );
    await ledger.close();
    expect(stored(path).usage).toEqual([{ user_id: 'gina', spent: 2n * USD, limit_used: 2n * USD, alerted: 0n }]);
  });
});
