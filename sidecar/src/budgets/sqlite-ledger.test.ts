// The SQLite ledger keeps sums below 2^63 units: a sum that overflowed used to be stored by SQLite as a float,
// after which every read of the ledger failed (the budgets API and /metrics answered 500 to everyone).

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MAX_SPEND_UNITS, unitsFromCostUsd, UNITS_PER_USD } from '../../../contracts/money.ts';
import { SqliteLedger } from './sqlite-ledger.ts';

const PERIOD = Date.UTC(2026, 10, 1);
const delta = (amount: bigint) => ({ userId: 'erin', policy: 'p', periodStart: PERIOD, split: { amount, limitPart: amount, grantParts: [] }, alerted: 0 });

describe('the SQLite ledger near 2^63 units', () => {
  it('stops a sum at MAX_SPEND_UNITS instead of overflowing, and reads it back as an integer', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'ledger-')), 'budgets.db');
    const ledger = new SqliteLedger(path);
    await ledger.deduct({ id: 'a', deltas: [delta(MAX_SPEND_UNITS)] });
    await ledger.deduct({ id: 'b', deltas: [delta(MAX_SPEND_UNITS)] });
    await ledger.deduct({ id: 'c', deltas: [delta(5n)] });
    expect((await ledger.loadUser('erin', 0))?.periods.get(PERIOD)).toEqual({ spent: MAX_SPEND_UNITS, limitUsed: MAX_SPEND_UNITS, alerted: 0 });
    await ledger.close();
  });

  it('reads a float an older version stored after an overflow as the bound, not as a failure', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'ledger-')), 'budgets.db');
    await new SqliteLedger(path).close();
    const db = new Database(path);
    db.prepare('INSERT INTO budget_usage (user_id, period_start, policy, spent, limit_used, alerted, updated_at) VALUES (?, ?, ?, ?, ?, 0, 0)').run(
      'frank',
      PERIOD,
      'p',
      1.2e19,
      3.5e18,
    );
    db.close();
    const ledger = new SqliteLedger(path);
    expect((await ledger.load(0))[0]?.periods.get(PERIOD)).toEqual({ spent: MAX_SPEND_UNITS, limitUsed: 3_500_000_000_000_000_000n, alerted: 0 });
    await ledger.close();
  });
});

describe('one call charged', () => {
  it('is at most 1,000,000 USD whatever its cost', () => {
    expect(unitsFromCostUsd(0.00027)).toBe(2_700_000n);
    expect(unitsFromCostUsd(5e9)).toBe(1_000_000n * UNITS_PER_USD);
  });
});
