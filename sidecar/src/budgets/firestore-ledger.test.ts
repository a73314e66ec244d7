// The Firestore ledger against the emulator from npm, through the official client as a server would use it:
// FIRESTORE_EMULATOR_HOST set, no credentials. Several engines ("servers") charge the same user at once.

import { Firestore } from '@google-cloud/firestore';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBudgetsPatch } from '../../../contracts/budget-config.ts';
import { unitsFromCostUsd } from '../../../contracts/money.ts';
import { type FirestoreEmulator, startFirestoreEmulator } from '../../../test/emulators/firestore.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { FirestoreLedger, periodKey, userDocId } from './firestore-ledger.ts';
import { LedgerBudgets } from './ledger-budgets.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOV = Date.parse('2026-11-01T00:00:00Z');
let emulator: FirestoreEmulator;
let previousHost: string | undefined;

beforeAll(async () => {
  emulator = await startFirestoreEmulator();
  previousHost = process.env.FIRESTORE_EMULATOR_HOST;
  process.env.FIRESTORE_EMULATOR_HOST = emulator.host;
});

afterAll(async () => {
  if (previousHost === undefined) delete process.env.FIRESTORE_EMULATOR_HOST;
  else process.env.FIRESTORE_EMULATOR_HOST = previousHost;
  await emulator?.stop();
});

function logs() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }) };
}

function server(collection: string, log = logs(), refreshMs = 0) {
  const config = { ledger: { kind: 'firestore' as const, collection }, policies: parseBudgetsPatch({ policies: [{ name: 'team', limitUsd: '10' }] }).policies! };
  const ledger = new FirestoreLedger({ collection, projectId: emulator.projectId, writeTimeoutMs: 2_000 });
  return { budgets: new LedgerBudgets({ ledger, config, logger: log.logger, now: () => T0, refreshMs }), log };
}

describe('the Firestore ledger', () => {
  it('many servers charging one user at once lose no increment: the stored spend is the exact sum', async () => {
    const servers = Array.from({ length: 4 }, () => server('concurrent').budgets);
    await Promise.all(servers.map((s) => s.ready));
    const costs = [0.0000123, 0.00000855, 0.0012345678, 0.1];
    // 4 servers × 50 calls each, interleaved, each flushing as it goes.
    for (let i = 0; i < 50; i++) for (const s of servers) s.charge('alice', costs[i % costs.length]!, T0);
    await Promise.all(servers.map((s) => s.flushed()));
    let expected = 0n; // what the spans would add up to, in units of 1e-10 USD
    for (let i = 0; i < 50; i++) expected += 4n * unitsFromCostUsd(costs[i % costs.length]!);
    expect(expected).toBe(48_603_434_544n); // 4.8603434544 USD
    const ledger = new FirestoreLedger({ collection: 'concurrent', projectId: emulator.projectId });
    const stored = await ledger.loadUser('alice', 0);
    expect(stored!.periods.get(NOV)!.spent).toBe(expected);
    expect(stored!.periods.get(NOV)!.limitUsed).toBe(expected);
    await Promise.all([...servers.map((s) => s.close()), ledger.close()]);
  });

  it('stores spend as integer increments, one field per period, in the documented layout', async () => {
    const { budgets } = server('layout');
    await budgets.ready;
    await budgets.addGrant('team/alice', { amountUsd: '1', reason: 'launch' }, T0);
    budgets.charge('team/alice', 1.5, T0);
    await budgets.flushed();
    const db = new Firestore({ projectId: emulator.projectId, useBigInt: true });
    const doc = (await db.collection('layout').doc(userDocId('team/alice')).get()).data()!;
    const key = periodKey(NOV);
    expect(doc).toMatchObject({
      user_id: 'team/alice',
      policy: 'team',
      period_start: '2026-11-01T00:00:00.000Z',
      [`spent_${key}`]: 15_000_000_000n,
      [`limit_used_${key}`]: 5_000_000_000n,
    });
    const grants = await db.collection('layout').doc(userDocId('team/alice')).collection('grants').get();
    expect(grants.docs.map((g) => g.data())).toEqual([expect.objectContaining({ amount: 10_000_000_000n, used: 10_000_000_000n, reason: 'launch' })]);
    await db.terminate();
    await budgets.close();
  });

  it('a batch retried after it had committed is recognised by its marker and not added twice', async () => {
    const ledger = new FirestoreLedger({ collection: 'retried', projectId: emulator.projectId });
    const batch = { id: 'batch-1', deltas: [{ userId: 'bob', policy: 'team', periodStart: NOV, split: { amount: 7n, limitPart: 7n, grantParts: [] }, alerted: 0 }] };
    await ledger.deduct(batch);
    await ledger.deduct(batch); // the first answer was "lost"
    expect((await ledger.loadUser('bob', 0))!.periods.get(NOV)!.spent).toBe(7n);
    await ledger.close();
  });

  it('each alert is logged by one server only, and a server sees spend made by the others', async () => {
    const a = server('shared', logs(), 50);
    const b = server('shared', logs(), 50);
    await Promise.all([a.budgets.ready, b.budgets.ready]);
    a.budgets.charge('carol', 4, T0);
    b.budgets.charge('carol', 4.5, T0); // b alone: 45% … together 85%
    await Promise.all([a.budgets.flushed(), b.budgets.flushed()]);
    await waitFor('a to see b’s spend', () => a.budgets.get('carol', T0)!.spent_usd === 8.5);
    await waitFor('b to see a’s spend', () => b.budgets.get('carol', T0)!.spent_usd === 8.5);
    a.budgets.charge('carol', 1, T0); // 95% as a sees it
    b.budgets.charge('carol', 1, T0); // 95% as b sees it
    await Promise.all([a.budgets.flushed(), b.budgets.flushed()]);
    await waitFor('the alerts', () => [...a.log.lines, ...b.log.lines].filter((l) => String(l.msg).includes('budget alert') && l.threshold === 90).length === 1);
    const ninety = [...a.log.lines, ...b.log.lines].filter((l) => String(l.msg).includes('budget alert') && l.threshold === 90);
    expect(ninety).toHaveLength(1);
    await waitFor('the exhausted budget on both servers', () => a.budgets.refusal('carol', T0) !== null && b.budgets.refusal('carol', T0) !== null);
    await Promise.all([a.budgets.close(), b.budgets.close()]);
  });

  it('a ledger that cannot be reached logs `failed to deduct spend` and the amount lands once it is back', async () => {
    const log = logs();
    const { budgets } = server('outage', log);
    await budgets.ready;
    await emulator.stop();
    budgets.charge('dave', 0.5, T0);
    await waitFor('the failed deduction', () => log.lines.some((l) => l.msg === 'failed to deduct spend'), 20_000);
    expect(log.lines.find((l) => l.msg === 'failed to deduct spend')).toMatchObject({ user_id: 'dave', amount_usd: '0.5', ledger: 'firestore' });
    await emulator.restart();
    await waitFor('the retried deduction', () => budgets.health().pendingDeductions === 0, 40_000);
    const ledger = new FirestoreLedger({ collection: 'outage', projectId: emulator.projectId });
    expect((await ledger.loadUser('dave', 0))!.periods.get(NOV)!.spent).toBe(5_000_000_000n);
    await Promise.all([budgets.close(), ledger.close()]);
  }, 90_000);
});
