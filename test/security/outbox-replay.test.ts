// A sidecar in a cluster keeps the spend it has not had acknowledged in an outbox on the pod's disk
// (`<state dir>/budget-outbox.db`, ADR 1302), and a restarted sidecar enforces it again and reports it to the
// operator. The rows used to be read back as the file held them: a negative amount lowered a user's spend here
// and went out in a report, and an amount past what a sum can reach went out as is. A row is now checked at the
// start as a ledger checks a delta (deltaProblem); one that fails is dropped and logged, the rest is kept.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SidecarMessage } from '../../contracts/push-protocol.ts';
import { ClusterBudgets, OUTBOX_FILE } from '../../sidecar/src/budgets/cluster-budgets.ts';
import { SpendOutbox } from '../../sidecar/src/budgets/spend-outbox.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOV = Date.UTC(2026, 10, 1);
const POLICY = 'shop/cap';
const policiesJson = JSON.stringify([{ name: POLICY, users: ['*'], limitUsd: '0.01', period: 'month', timeZone: 'UTC', alertThresholds: [], enforcement: 'block', grants: [] }]);
const USD = 10_000_000_000n;

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, messages: (text: string) => lines.filter((l) => String(l.msg).startsWith(text)) };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-outbox-replay-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('spend kept in a sidecar’s outbox and replayed at its next start', () => {
  it('is checked as a ledger write is: invalid rows are dropped and logged, valid ones enforced and reported', async () => {
    const open = (logger = pino({ level: 'silent' })) => new ClusterBudgets({ stateDir: dir, logger, now: () => T0, reportIntervalMs: 60_000 });
    const sent: SidecarMessage[] = [];
    const first = open();
    first.budgetState({ replace: true, policiesJson, policiesChanged: true, usage: [], includesSequence: '0', defaultUser: '' });
    first.charge('alice', 0.005, T0); // genuine spend: 0.005 USD
    first.attached((m) => sent.push(m)); // report 1 (alice's 0.005) goes out and is not acknowledged
    expect(sent.map((m) => m.spendReport?.sequence)).toEqual(['1']);
    await first.close(0);

    // What a hostile process, or a damaged disk, leaves in the file.
    const path = join(dir, OUTBOX_FILE);
    const db = new Database(path);
    const insert = db.prepare('INSERT INTO spend (policy, user_id, period_start, amount, calls, report_seq) VALUES (?, ?, ?, ?, ?, ?)');
    insert.run(POLICY, 'alice', NOV, -49_999_900_000_000n, 1, null); // −4,999.99 USD: would give alice her budget back
    insert.run(POLICY, 'bob', NOV, 2n ** 63n - 1n, 1, 1); // past where sums stop, in the unacknowledged report 1
    insert.run(POLICY, 'carol', NOV, 20_000_000n, 1, null); // genuine: 0.002 USD
    insert.run(POLICY, 'dave', NOV, 1e30, 1, null); // a float, not ledger units
    insert.run(POLICY, 'erin', 2n ** 62n, 10_000_000n, 1, null); // no time in epoch ms
    db.close();

    const log = capture();
    const second = open(log.logger);
    // Enforced here: alice's 0.005 and carol's 0.002, nothing of the rest.
    expect(second.get('alice', T0)).toMatchObject({ spent_usd: 0.005, remaining_usd: 0.005 });
    expect(second.get('carol', T0)).toMatchObject({ spent_usd: 0.002, remaining_usd: 0.008 });
    expect(second.get('bob', T0)).toMatchObject({ spent_usd: 0, remaining_usd: 0.01 });
    expect(second.health().pendingDeductions).toBe(2);

    // Reported: report 1 again without bob's row, then carol's spend as report 2.
    sent.length = 0;
    second.attached((m) => sent.push(m));
    second.spendAck(1);
    expect(sent.map((m) => m.spendReport)).toEqual([
      { sequence: '1', entries: [{ policy: POLICY, userId: 'alice', periodStart: '2026-11-01T00:00:00.000Z', amount: '50000000', calls: 1 }] },
      { sequence: '2', entries: [{ policy: POLICY, userId: 'carol', periodStart: '2026-11-01T00:00:00.000Z', amount: '20000000', calls: 1 }] },
    ]);
    await second.close(0);

    const skipped = log.messages('budget spend in the outbox skipped: not valid spend');
    expect(skipped.map((l) => ({ file: l.file, row: l.row, sequence: l.sequence, user_id: l.user_id, policy: l.policy, problem: l.problem, level: l.level }))).toEqual([
      { file: path, row: 2, sequence: null, user_id: 'alice', policy: POLICY, problem: 'amount is negative (-4999.99 USD)', level: 50 },
      {
        file: path,
        row: 3,
        sequence: 1,
        user_id: 'bob',
        policy: POLICY,
        problem: 'amount is more than a spend can reach (922337203.6854775807 USD; sums stop at 461168601.8427387904 USD)',
        level: 50,
      },
      { file: path, row: 5, sequence: null, user_id: 'dave', policy: POLICY, problem: 'amount 1e+30 is not a whole number of ledger units', level: 50 },
      { file: path, row: 6, sequence: null, user_id: 'erin', policy: POLICY, problem: 'has period start 4611686018427387904, not a time in epoch ms', level: 50 },
    ]);
    expect(skipped[0]!.msg).toBe(`budget spend in the outbox skipped: not valid spend (${path} row 2, unsent: user "alice": amount is negative (-4999.99 USD))`);
    expect(log.messages('budget spend in the outbox checked').map((l) => [l.file, l.kept, l.skipped])).toEqual([[path, 2, 4]]);

    // The dropped rows are gone from the file; a third start finds nothing to skip.
    const after = new Database(path, { readonly: true });
    expect(after.prepare('SELECT user_id FROM spend ORDER BY id').pluck().all()).toEqual(['carol']);
    after.close();
  });

  it('a row summed up to where sums stop stays there, and is kept at the next start', () => {
    const path = join(dir, OUTBOX_FILE);
    const outbox = new SpendOutbox(path);
    outbox.add(POLICY, 'alice', NOV, 2n ** 62n); // as high as a sum of charges reaches (addSpend)
    outbox.add(POLICY, 'alice', NOV, 1_000_000n * USD); // one more charge of the most a call is charged
    expect(outbox.pending().map((r) => r.amount)).toEqual([2n ** 62n]);
    expect(() => outbox.add(POLICY, 'bob', NOV, -USD)).toThrow('spend of user "bob" not kept in the outbox: amount is negative (-1 USD)');
    outbox.close();
    const reopened = new SpendOutbox(path);
    expect(reopened.skipped).toEqual([]);
    expect(reopened.pending().map((r) => [r.userId, r.amount, r.calls])).toEqual([['alice', 2n ** 62n, 2]]);
    reopened.close();
  });
});
