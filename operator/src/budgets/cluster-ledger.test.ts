// What the leader accepts of a sidecar's spend report. An entry is the sum of a user's charges in a period on one
// pod (the sidecar's outbox adds them up), so it is bounded as every sum of spend is (spendUnitsProblem, money.ts),
// not by what one call can be charged. Reports are applied in memory here; nothing is written (the ledger is not
// loaded, so its write timer never runs and the store is not reached).

import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../../contracts/budget-policies.ts';
import type { SpendEntryMessage } from '../../../contracts/push-protocol.ts';
import { KubeApi } from '../../../kube-client/api-client.ts';
import { type AppliedReports, ClusterLedger } from './cluster-ledger.ts';
import { LedgerStore } from './ledger-store.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOV = '2026-11-01T00:00:00.000Z';
const USD = 10_000_000_000n;
const POLICY = compilePolicy({ name: 'shop/cap', users: ['*'], limitUsd: '100000000', period: 'month', timeZone: 'UTC', alertThresholds: [], enforcement: 'block' });
const SOURCE = { podUid: 'uid-1', namespace: 'shop', pod: 'app-1' };

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, messages: (text: string) => lines.filter((l) => String(l.msg).startsWith(text)) };
}

describe('spend reports at the cluster ledger', () => {
  it('accepts a summed entry above what one call is charged, up to where sums stop; refuses negative and larger ones, saying why', async () => {
    const log = capture();
    let applied!: (result: AppliedReports) => void;
    const done = new Promise<AppliedReports>((resolve) => (applied = resolve));
    const ledger = new ClusterLedger({
      store: new LedgerStore(new KubeApi(new KubeConfig()), 'tollgate-system'),
      logger: log.logger,
      policy: (key) => (key === POLICY.name ? POLICY : undefined),
      applied: (result) => applied(result),
      acknowledge: () => undefined,
      written: () => undefined,
      reloaded: () => undefined,
      alert: () => undefined,
      now: () => T0,
      applyDelayMs: 0,
    });
    const entry = (userId: string, amount: string): SpendEntryMessage => ({ policy: POLICY.name, userId, periodStart: NOV, amount, calls: 3 });
    ledger.submit(SOURCE, 1, [
      entry('alice', '25000000000000000'), // 2,500,000 USD: three calls at the most one call is charged (1,000,000 USD), summed
      entry('bob', '-50000000000'), // −5 USD
      entry('carol', '9223372036854775807'), // 2^63 − 1: past where sums stop
      entry('dave', '4611686018427387904'), // 2^62: where sums stop
      entry('erin', '1.5'),
    ]);
    expect((await done).applied).toEqual(new Map([['uid-1', 1]]));

    expect(ledger.userUsage(POLICY.name, 'alice', T0)).toMatchObject({ spent: 2_500_000n * USD, limitUsed: 2_500_000n * USD });
    expect(ledger.userUsage(POLICY.name, 'dave', T0)).toMatchObject({ spent: 2n ** 62n, limitUsed: 2n ** 62n });
    for (const user of ['bob', 'carol', 'erin']) expect(ledger.userUsage(POLICY.name, user, T0)).toBeUndefined();

    const refused = log.messages('malformed spend report entry ignored');
    expect(refused.map((l) => ({ msg: l.msg, user_id: l.user_id, problem: l.problem, pod: l.pod, policy: l.policy, sequence: l.sequence, level: l.level }))).toEqual([
      {
        msg: 'malformed spend report entry ignored: amount is negative (-5 USD)',
        user_id: 'bob',
        problem: 'amount is negative (-5 USD)',
        pod: 'shop/app-1',
        policy: 'shop/cap',
        sequence: 1,
        level: 40,
      },
      {
        msg: 'malformed spend report entry ignored: amount is more than a spend can reach (922337203.6854775807 USD; sums stop at 461168601.8427387904 USD)',
        user_id: 'carol',
        problem: 'amount is more than a spend can reach (922337203.6854775807 USD; sums stop at 461168601.8427387904 USD)',
        pod: 'shop/app-1',
        policy: 'shop/cap',
        sequence: 1,
        level: 40,
      },
      {
        msg: 'malformed spend report entry ignored: amount "1.5" is not a whole number of ledger units',
        user_id: 'erin',
        problem: 'amount "1.5" is not a whole number of ledger units',
        pod: 'shop/app-1',
        policy: 'shop/cap',
        sequence: 1,
        level: 40,
      },
    ]);
    await ledger.stop();
  });
});
