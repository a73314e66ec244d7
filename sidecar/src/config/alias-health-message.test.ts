import { describe, expect, it } from 'vitest';
import { withAliasDefaults } from '../../../contracts/model-aliases.ts';
import { MAX_ALIAS_REPORT_BYTES } from '../../../contracts/push-protocol.ts';
import { parseRuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import { ConfigStore } from './config-store.ts';
import { aliasHealthMessage } from './alias-health-message.ts';
import { TargetHealth } from '../fallback/target-health.ts';

const NOW = Date.parse('2026-11-29T10:00:00.000Z');

const sonnet = {
  targets: [
    { route: 'gamma-direct', model: 'claude-sonnet-4-5' },
    { route: 'gamma', model: 'claude-sonnet-4-5@20250929', priority: 1 },
    { route: 'beta', model: 'gpt-4o', priority: 2 },
  ],
};

describe('the alias health report a sidecar sends the operator', () => {
  it('is nothing while the config has no alias', () => {
    expect(aliasHealthMessage({ store: new ConfigStore(), targetHealth: new TargetHealth(), client: { breakerOpen: () => false } }, NOW)).toBeUndefined();
  });

  it("names each target's state and since when calls are answered below the first priority", () => {
    const store = new ConfigStore(parseRuntimeConfigPatch({ models: { 'claude-sonnet': sonnet } }));
    const targetHealth = new TargetHealth();
    const alias = withAliasDefaults(sonnet);
    targetHealth.coolDown(alias.targets[1]!, NOW + 30_000);
    targetHealth.served('claude-sonnet', alias, 2, NOW - 5_000);
    const message = aliasHealthMessage({ store, targetHealth, client: { breakerOpen: (route) => route === 'gamma-direct' } }, NOW);
    expect(message).toEqual({
      aliases: [
        {
          alias: 'claude-sonnet',
          targets: [
            { route: 'gamma-direct', model: 'claude-sonnet-4-5', state: 'circuit_open' },
            { route: 'gamma', model: 'claude-sonnet-4-5@20250929', state: 'cooling_down' },
            { route: 'beta', model: 'gpt-4o', state: 'healthy' },
          ],
          degradedSinceUnixMs: NOW - 5_000,
        },
      ],
    });
    // Served by the first priority again: not degraded.
    targetHealth.served('claude-sonnet', alias, 0, NOW);
    expect(aliasHealthMessage({ store, targetHealth, client: { breakerOpen: () => false } }, NOW)!.aliases[0]!.degradedSinceUnixMs).toBe(0);
  });

  it('stays below the size the operator takes, leaving out the aliases past it', () => {
    // 256 aliases of 16 targets with long model ids: far more than fits.
    const model = (i: number, j: number) => `m${i}-${j}-${'x'.repeat(200)}`;
    const models = Object.fromEntries(
      Array.from({ length: 256 }, (_, i) => [`alias-${i}`, { targets: Array.from({ length: 16 }, (_, j) => ({ route: 'gamma-direct', model: model(i, j) })) }]),
    );
    const store = new ConfigStore(parseRuntimeConfigPatch({ models }));
    const message = aliasHealthMessage({ store, targetHealth: new TargetHealth(), client: { breakerOpen: () => false } }, NOW)!;
    expect(JSON.stringify(message).length).toBeLessThanOrEqual(MAX_ALIAS_REPORT_BYTES);
    expect(message.aliases.length).toBeGreaterThan(0);
    expect(message.aliases.length).toBeLessThan(256);
    expect(message.aliases[0]!.alias).toBe('alias-0');
  });
});
