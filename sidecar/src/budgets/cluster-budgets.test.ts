// A sidecar's budgets against the operator's messages, without the stream: what it enforces (the operator's
// usage plus its own unacknowledged spend), what it reports (numbered, resent unchanged until acknowledged),
// and what survives a restart (the outbox and the last state on disk).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BudgetStateMessage, SidecarMessage } from '../../../contracts/push-protocol.ts';
import { ClusterBudgets } from './cluster-budgets.ts';

const T0 = Date.parse('2026-11-10T12:00:00Z');
const NOV = '2026-11-01T00:00:00.000Z';
const POLICY = 'shop/cap';
const policiesJson = JSON.stringify([
  { name: POLICY, users: ['*'], limitUsd: '0.01', period: 'month', timeZone: 'UTC', alertThresholds: [80, 100], enforcement: 'block', grants: [] },
]);

function state(partial: Partial<BudgetStateMessage>): BudgetStateMessage {
  return { replace: false, policiesJson: '', policiesChanged: false, usage: [], includesSequence: '0', defaultUser: 'system:serviceaccount:shop:app', ...partial };
}

let dir: string;
let budgets: ClusterBudgets;
let sent: SidecarMessage[];
const open = () => new ClusterBudgets({ stateDir: dir, logger: pino({ level: 'silent' }), now: () => T0, reportIntervalMs: 60_000 });
const reports = () => sent.filter((m) => m.spendReport).map((m) => m.spendReport!);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-cluster-budgets-'));
  sent = [];
  budgets = open();
});

afterEach(async () => {
  await budgets.close(0);
  rmSync(dir, { recursive: true, force: true });
});

describe('a sidecar’s budgets from the operator', () => {
  it('enforces the cluster-wide usage plus its own spend the operator has not counted', () => {
    budgets.budgetState(
      state({ replace: true, policiesJson, usage: [{ policy: POLICY, userId: 'alice', periodStart: NOV, spent: '80000000', limitUsed: '80000000', alerted: 80, grants: [] }] }),
    );
    expect(budgets.defaultUser).toBe('system:serviceaccount:shop:app');
    expect(budgets.refusal('alice', T0)).toBeNull(); // 0.008 of 0.01 spent elsewhere
    budgets.charge('alice', 0.002, T0); // here: 0.01 in all
    expect(budgets.refusal('alice', T0)).toMatchObject({ userId: 'alice', policy: POLICY, limitUsd: 0.01 });
    // The operator counts this pod's report 1: its usage now has the 0.002 and includes it; nothing is counted twice.
    budgets.attached((m) => sent.push(m));
    expect(reports()).toEqual([{ sequence: '1', entries: [{ policy: POLICY, userId: 'alice', periodStart: NOV, amount: '20000000', calls: 1 }] }]);
    budgets.spendAck(1);
    budgets.budgetState(
      state({ usage: [{ policy: POLICY, userId: 'alice', periodStart: NOV, spent: '100000000', limitUsed: '100000000', alerted: 100, grants: [] }], includesSequence: '1' }),
    );
    expect(budgets.get('alice', T0)).toMatchObject({ spent_usd: 0.01, state: 'exhausted' });
  });

  it('a user exhausted by another pod is refused here as soon as the usage arrives', () => {
    budgets.budgetState(state({ replace: true, policiesJson }));
    expect(budgets.refusal('bob', T0)).toBeNull();
    budgets.budgetState(state({ usage: [{ policy: POLICY, userId: 'bob', periodStart: NOV, spent: '100000000', limitUsed: '100000000', alerted: 100, grants: [] }] }));
    expect(budgets.refusal('bob', T0)).not.toBeNull();
  });

  it('resends an unacknowledged report unchanged after a reconnect, then moves on', () => {
    budgets.budgetState(state({ replace: true, policiesJson }));
    budgets.attached((m) => sent.push(m));
    budgets.charge('alice', 0.001, T0);
    budgets.attached((m) => sent.push(m)); // a tick: report 1 goes out
    budgets.charge('alice', 0.002, T0); // waits: one report in flight
    budgets.detached();
    budgets.attached((m) => sent.push(m)); // reconnected: report 1 again, as it was
    expect(reports().map((r) => [r.sequence, r.entries[0]!.amount])).toEqual([
      ['1', '10000000'],
      ['1', '10000000'],
    ]);
    budgets.spendAck(1);
    expect(reports().at(-1)).toMatchObject({ sequence: '2', entries: [{ amount: '20000000' }] });
  });

  it('sends the next report once the operator has applied the last one, and keeps both until they are written', () => {
    budgets.budgetState(state({ replace: true, policiesJson }));
    budgets.attached((m) => sent.push(m));
    budgets.charge('alice', 0.001, T0);
    budgets.attached((m) => sent.push(m)); // a tick: report 1 goes out
    budgets.charge('bob', 0.002, T0);
    budgets.spendAck(0);
    expect(reports().map((r) => r.sequence)).toEqual(['1']);
    // Applied (its spend is in the usage), not yet in the operator's ledger: report 2 may go.
    budgets.budgetState(
      state({ usage: [{ policy: POLICY, userId: 'alice', periodStart: NOV, spent: '10000000', limitUsed: '10000000', alerted: 0, grants: [] }], includesSequence: '1' }),
    );
    expect(reports().map((r) => r.sequence)).toEqual(['1', '2']);
    expect(budgets.health()).toMatchObject({ includesSequence: 1, acknowledgedSequence: 0, pendingDeductions: 2 });
    budgets.spendAck(2);
    expect(budgets.health()).toMatchObject({ acknowledgedSequence: 2, pendingDeductions: 0 });
  });

  it('a new leader that holds less than the last one did: its own spend counts here again until the new leader has it', () => {
    budgets.budgetState(state({ replace: true, policiesJson }));
    budgets.attached((m) => sent.push(m));
    budgets.charge('alice', 0.006, T0);
    budgets.attached((m) => sent.push(m)); // report 1
    // The old leader applied it: alice's usage has it, so it is no longer this pod's own.
    budgets.budgetState(
      state({ usage: [{ policy: POLICY, userId: 'alice', periodStart: NOV, spent: '60000000', limitUsed: '60000000', alerted: 0, grants: [] }], includesSequence: '1' }),
    );
    expect(budgets.get('alice', T0)).toMatchObject({ spent_usd: 0.006 });
    // The leader dies before writing it. The new one starts from its ledger: alice unknown, nothing of this pod.
    budgets.detached();
    sent = [];
    budgets.attached((m) => sent.push(m));
    expect(reports().map((r) => r.sequence)).toEqual(['1']); // resent, unchanged
    budgets.budgetState(state({ replace: true, policiesJson, includesSequence: '0' }));
    expect(budgets.get('alice', T0)).toMatchObject({ spent_usd: 0.006 });
    budgets.charge('alice', 0.004, T0);
    expect(budgets.refusal('alice', T0)).not.toBeNull(); // 0.006 + 0.004: the limit, as before the failover
  });

  it('a restarted sidecar enforces from its saved state and outbox before the operator answers, and resends what was not acknowledged', async () => {
    budgets.budgetState(
      state({ replace: true, policiesJson, usage: [{ policy: POLICY, userId: 'alice', periodStart: NOV, spent: '50000000', limitUsed: '50000000', alerted: 0, grants: [] }] }),
    );
    budgets.charge('alice', 0.005, T0);
    expect(budgets.refusal('alice', T0)).not.toBeNull();
    await budgets.close(0); // killed before it could report: the charge is on disk

    sent = [];
    budgets = open();
    expect(budgets.refusal('alice', T0)).not.toBeNull();
    budgets.attached((m) => sent.push(m));
    expect(reports()).toEqual([{ sequence: '1', entries: [{ policy: POLICY, userId: 'alice', periodStart: NOV, amount: '50000000', calls: 1 }] }]);
  });

  it('refuses grants through its API: they are set in the BudgetPolicy', async () => {
    await expect(budgets.addGrant()).rejects.toMatchObject({ status: 409, code: 'grants_managed_by_operator' });
  });
});
