import { describe, expect, it } from 'vitest';
import type { ModelAliasesConfig } from '../../../contracts/model-aliases.ts';
import type { AliasHealthMessage } from '../../../contracts/push-protocol.ts';
import type { ModelAliasStatus } from '../../../crds/index.ts';
import { readAliasReport, type SidecarAliasHealth } from '../push/alias-reports.ts';
import { aliasEvents, aliasStatus, comparableAliasStatus, duration } from './alias-status.ts';

const T0 = Date.parse('2026-11-29T10:00:00.000Z');
const MINUTES_3 = 180_000;

const models: ModelAliasesConfig = {
  'claude-sonnet': {
    targets: [
      { route: 'gamma-direct', model: 'claude-sonnet-4-5' },
      { route: 'gamma', model: 'claude-sonnet-4-5@20250929', priority: 1 },
      { route: 'gamma-cloudb', model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', priority: 1 },
    ],
  },
};

type State = AliasHealthMessage['targets'][number]['state'];

/** One sidecar's report of claude-sonnet: the three targets' states, in order, and since when it falls back. */
function sidecar(states: [State, State, State], degradedSince = 0, extra: AliasHealthMessage[] = []): SidecarAliasHealth {
  const targets = models['claude-sonnet']!.targets.map((t, i) => ({ route: t.route, model: t.model, state: states[i]! }));
  return readAliasReport({ aliases: [{ alias: 'claude-sonnet', targets, degradedSinceUnixMs: String(degradedSince) }, ...extra] }, models)!;
}

describe('a sidecar’s alias report as the operator keeps it', () => {
  it('keeps only the aliases and targets of the config the sidecar is bound to, and states it knows', () => {
    const report = readAliasReport(
      {
        aliases: [
          {
            alias: 'claude-sonnet',
            targets: [
              { route: 'gamma-direct', model: 'claude-sonnet-4-5', state: 'cooling_down' },
              { route: 'gamma-direct', model: 'claude-opus-4-1', state: 'healthy' }, // not a target of the alias
              { route: 'gamma', model: 'claude-sonnet-4-5@20250929', state: 'on_fire' as State }, // a state this operator does not know
            ],
            degradedSinceUnixMs: 0,
          },
          { alias: 'not-configured', targets: [{ route: 'beta', model: 'gpt-4o', state: 'healthy' }], degradedSinceUnixMs: 0 },
          { alias: '__proto__', targets: [], degradedSinceUnixMs: 0 },
        ],
      },
      models,
    )!;
    expect([...report.keys()]).toEqual(['claude-sonnet']);
    expect([...report.get('claude-sonnet')!.targets]).toEqual([['gamma-direct\u0000claude-sonnet-4-5', 'cooling_down']]);
    // A config without aliases keeps nothing; so does a report of none of its aliases.
    expect(readAliasReport({ aliases: [] }, models)).toBeUndefined();
    expect(readAliasReport({ aliases: [{ alias: 'claude-sonnet', targets: [], degradedSinceUnixMs: 5 }] }, undefined)).toBeUndefined();
  });
});

describe('status.models across sidecars', () => {
  const a = sidecar(['circuit_open', 'healthy', 'healthy'], T0 + 10_500);
  const b = sidecar(['cooling_down', 'healthy', 'circuit_open'], T0 + 40_000);
  const c = sidecar(['healthy', 'healthy', 'healthy']);

  it('counts each target’s state over the reporting sidecars, shows the worst, and when fallback began', () => {
    const { models: status, recheckInMs } = aliasStatus(models, [a, b, c], undefined, { now: T0 + 60_000, degradedAfterMs: MINUTES_3 });
    expect(status).toEqual([
      {
        alias: 'claude-sonnet',
        sidecars: 3,
        servedBelowFirstPriority: 2,
        // a's time, to the second (the status shows whole seconds)
        fallbackSince: '2026-11-29T10:00:10Z',
        degraded: false,
        targets: [
          { route: 'gamma-direct', model: 'claude-sonnet-4-5', priority: 0, state: 'circuit_open', healthy: 1, coolingDown: 1, circuitOpen: 1 },
          { route: 'gamma', model: 'claude-sonnet-4-5@20250929', priority: 1, state: 'healthy', healthy: 3, coolingDown: 0, circuitOpen: 0 },
          { route: 'gamma-cloudb', model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', priority: 1, state: 'circuit_open', healthy: 2, coolingDown: 0, circuitOpen: 1 },
        ],
      },
    ]);
    // Degraded at 10:00:10.5 + 3 min = 10:03:10.5, 130.5 s after 10:01:00: the controller looks again then.
    expect(recheckInMs).toBe(130_500);
  });

  it('is degraded once fallback has lasted the set time, and then needs no second look', () => {
    const at = aliasStatus(models, [a, b, c], undefined, { now: T0 + 191_000, degradedAfterMs: MINUTES_3 });
    expect(at.models[0]).toMatchObject({ fallbackSince: '2026-11-29T10:00:10Z', degraded: true });
    expect(at.recheckInMs).toBeUndefined();
    // Exactly at 10:03:10.5 it is degraded; a millisecond before it is not. The status's second changes nothing.
    const previous = [{ alias: 'claude-sonnet', fallbackSince: '2026-11-29T10:00:10Z', targets: [] }];
    expect(aliasStatus(models, [a], previous, { now: T0 + 190_500, degradedAfterMs: MINUTES_3 }).models[0]!.degraded).toBe(true);
    expect(aliasStatus(models, [a], previous, { now: T0 + 190_499, degradedAfterMs: MINUTES_3 }).recheckInMs).toBe(1);
  });

  it('keeps the episode’s start while any sidecar still falls back, and ends it when none does', () => {
    const previous: ModelAliasStatus[] = [{ alias: 'claude-sonnet', fallbackSince: '2026-11-29T09:59:00Z', degraded: false, targets: [] }];
    // a recovered; b still falls back (since 10:00:40 by its own account): the alias has been falling back since 9:59, 2 of its 3 minutes.
    const still = aliasStatus(models, [b, c], previous, { now: T0 + 60_000, degradedAfterMs: MINUTES_3 });
    expect(still.models[0]).toMatchObject({ servedBelowFirstPriority: 1, fallbackSince: '2026-11-29T09:59:00Z', degraded: false, sidecars: 2 });
    expect(still.recheckInMs).toBe(60_000);
    const over = aliasStatus(models, [c], previous, { now: T0 + 60_000, degradedAfterMs: MINUTES_3 });
    expect(over.models[0]).toEqual(expect.objectContaining({ servedBelowFirstPriority: 0, degraded: false }));
    expect(over.models[0]!.fallbackSince).toBeUndefined();
    expect(over.recheckInMs).toBeUndefined();
  });

  it('never dates fallback after now, whatever a sidecar’s clock says', () => {
    const ahead = sidecar(['circuit_open', 'healthy', 'healthy'], T0 + 3_600_000);
    expect(aliasStatus(models, [ahead], undefined, { now: T0, degradedAfterMs: MINUTES_3 }).models[0]!.fallbackSince).toBe('2026-11-29T10:00:00Z');
  });

  it('shows every target as unknown while no sidecar reports, and nothing without aliases', () => {
    const { models: status } = aliasStatus(models, [], undefined, { now: T0, degradedAfterMs: MINUTES_3 });
    expect(status[0]).toMatchObject({ sidecars: 0, servedBelowFirstPriority: 0, degraded: false });
    expect(status[0]!.targets.map((t) => [t.state, t.healthy, t.coolingDown, t.circuitOpen])).toEqual([
      ['unknown', 0, 0, 0],
      ['unknown', 0, 0, 0],
      ['unknown', 0, 0, 0],
    ]);
    expect(aliasStatus(undefined, [a], undefined, { now: T0, degradedAfterMs: MINUTES_3 })).toEqual({ models: [], recheckInMs: undefined });
  });

  it('compares equal whatever order the API server returns the keys in', () => {
    const { models: status } = aliasStatus(models, [a, b, c], undefined, { now: T0 + 60_000, degradedAfterMs: MINUTES_3 });
    const reordered = JSON.parse(JSON.stringify(status, (_, v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v)));
    expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(status));
    expect(comparableAliasStatus(reordered)).toEqual(comparableAliasStatus(status));
    expect(comparableAliasStatus(status)).not.toEqual(comparableAliasStatus([{ ...status[0]!, degraded: true }]));
  });
});

describe('AliasDegraded and AliasRecovered', () => {
  const a = sidecar(['circuit_open', 'healthy', 'healthy'], T0);
  const c = sidecar(['healthy', 'healthy', 'healthy']);

  it('warns once an alias turns degraded, naming since when, how many sidecars and its first-priority targets', () => {
    const { models: status } = aliasStatus(models, [a, c], undefined, { now: T0 + 200_000, degradedAfterMs: MINUTES_3 });
    expect(aliasEvents(status, () => false, MINUTES_3)).toEqual([
      {
        alias: 'claude-sonnet',
        type: 'Warning',
        reason: 'AliasDegraded',
        note: 'Alias claude-sonnet has been served below its first priority for more than 3m, since 2026-11-29T10:00:00Z, by 1 of 2 sidecars; first priority: gamma-direct claude-sonnet-4-5 circuit_open',
      },
    ]);
    // Already announced: nothing.
    expect(aliasEvents(status, () => true, MINUTES_3)).toEqual([]);
  });

  it('says when it recovers, or when no sidecar reports it any more', () => {
    const recovered = aliasStatus(models, [c], undefined, { now: T0, degradedAfterMs: MINUTES_3 }).models;
    expect(aliasEvents(recovered, () => true, MINUTES_3)).toEqual([
      { alias: 'claude-sonnet', type: 'Normal', reason: 'AliasRecovered', note: 'Alias claude-sonnet is served by its first priority again on every reporting sidecar (1)' },
    ]);
    const silent = aliasStatus(models, [], undefined, { now: T0, degradedAfterMs: MINUTES_3 }).models;
    expect(aliasEvents(silent, () => true, MINUTES_3)[0]!.note).toBe('No sidecar reports alias claude-sonnet any more; it no longer counts as degraded');
    expect(aliasEvents(silent, () => false, MINUTES_3)).toEqual([]);
  });

  it('writes the threshold as people do', () => {
    expect([duration(180_000), duration(90_000), duration(1_500), duration(1_000)]).toEqual(['3m', '1m30s', '1.5s', '1s']);
  });
});
