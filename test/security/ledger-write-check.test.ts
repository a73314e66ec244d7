// Every budget ledger checks a batch before it writes it (deltaProblem, ledger.ts): amounts, limit parts and grant
// parts from 0 to where sums stop, an alert threshold a policy can have. Only the SQLite ledger used to: the
// Firestore ledger incremented by whatever a delta said (a negative amount lowered a user's stored spend for every
// server of the fleet) and so did the memory one. A batch with one such delta is refused whole, by each of them
// with the same error, and nothing of it is stored.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FirestoreLedger } from '../../sidecar/src/budgets/firestore-ledger.ts';
import type { BudgetLedger, SpendDelta } from '../../sidecar/src/budgets/ledger.ts';
import { MemoryLedger } from '../../sidecar/src/budgets/memory-ledger.ts';
import { SqliteLedger } from '../../sidecar/src/budgets/sqlite-ledger.ts';
import { type FirestoreEmulator, startFirestoreEmulator } from '../emulators/firestore.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOVEMBER = Date.UTC(2026, 10, 1);
const USD = 10_000_000_000n;

let emulator: FirestoreEmulator;
let previousHost: string | undefined;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-ledger-write-check-'));
  emulator = await startFirestoreEmulator();
  previousHost = process.env.FIRESTORE_EMULATOR_HOST;
  process.env.FIRESTORE_EMULATOR_HOST = emulator.host;
});

afterAll(async () => {
  if (previousHost === undefined) delete process.env.FIRESTORE_EMULATOR_HOST;
  else process.env.FIRESTORE_EMULATOR_HOST = previousHost;
  await emulator?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function delta(userId: string, amount: bigint, opts: { limitPart?: bigint; grantParts?: { grantId: string; amount: bigint }[]; alerted?: number } = {}): SpendDelta {
  return {
    userId,
    policy: 'default',
    periodStart: NOVEMBER,
    split: { amount, limitPart: opts.limitPart ?? amount, grantParts: opts.grantParts ?? [] },
    alerted: opts.alerted ?? 0,
  };
}

const ledgers: [string, () => BudgetLedger][] = [
  ['sqlite', () => new SqliteLedger(join(dir, 'tollgate-budgets.db'))],
  ['firestore', () => new FirestoreLedger({ collection: 'write-check', projectId: emulator.projectId, writeTimeoutMs: 5_000 })],
  ['memory', () => new MemoryLedger()],
];

describe.each(ledgers)('the %s ledger', (_kind, open) => {
  it('refuses a batch with a delta no charge can make, whole, and stores nothing of it', async () => {
    const ledger = open();
    // Real spend first: gina has a 1 USD grant and spends 2 USD, 1 from the grant and 1 from the limit.
    await ledger.addGrant('gina', { id: 'g1', amount: USD, used: 0n, reason: null, createdAt: T0, expiresAt: null });
    await ledger.deduct({ id: 'a', deltas: [delta('gina', 2n * USD, { limitPart: USD, grantParts: [{ grantId: 'g1', amount: USD }] })] });

    const refused: [string, SpendDelta[], string][] = [
      // A valid delta of hank beside the finding: gina's spend becomes −4,999.99 USD.
      ['b-negative', [delta('hank', USD), delta('gina', -49_999_900_000_000n)], 'the spend of user "gina" amount is negative (-4999.99 USD)'],
      // Gives gina's used-up grant back.
      ['b-grant', [delta('gina', 0n, { limitPart: 0n, grantParts: [{ grantId: 'g1', amount: -USD }] })], 'the spend of user "gina" part of grant "g1" is negative (-1 USD)'],
      // Every alert of the period would be taken as logged already.
      ['b-alert', [delta('gina', 1n, { alerted: 1_000_000 })], 'the spend of user "gina" has alert threshold 1000000, not a percentage from 0 to 1000'],
      // Past where sums stop (2^62 units).
      [
        'b-overflow',
        [delta('ivy', 2n ** 63n - 1n)],
        'the spend of user "ivy" amount is more than a spend can reach (922337203.6854775807 USD; sums stop at 461168601.8427387904 USD)',
      ],
    ];
    for (const [id, deltas, problem] of refused) await expect(ledger.deduct({ id, deltas })).rejects.toThrow(`batch ${id} not written: ${problem}`);

    const gina = await ledger.loadUser('gina', 0);
    expect(gina?.periods.get(NOVEMBER)).toEqual({ spent: 2n * USD, limitUsed: USD, alerted: 0 });
    expect(gina?.grants.map((g) => [g.id, g.used])).toEqual([['g1', USD]]);
    expect(await ledger.loadUser('hank', 0)).toBeUndefined();
    expect(await ledger.loadUser('ivy', 0)).toBeUndefined();

    // The refusal burns no batch id: the same batch without the bad delta is written.
    await ledger.deduct({ id: 'b-negative', deltas: [delta('hank', USD)] });
    expect((await ledger.loadUser('hank', 0))?.periods.get(NOVEMBER)).toEqual({ spent: USD, limitUsed: USD, alerted: 0 });
    await ledger.close();
  });
});
