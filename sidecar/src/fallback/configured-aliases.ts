// The config's model aliases with their defaults filled in, made once per config: a call only looks its alias up.

import { checkModelAliases, withAliasDefaults, type ModelAlias } from '../../../contracts/model-aliases.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { routeCatalog } from '../routes/route-catalog.ts';

const byConfig = new WeakMap<RuntimeConfig, ReadonlyMap<string, ModelAlias>>();
const NONE: ReadonlyMap<string, ModelAlias> = new Map();

export function configuredAliases(config: RuntimeConfig): ReadonlyMap<string, ModelAlias> {
  let aliases = byConfig.get(config);
  if (aliases === undefined) {
    const entries = Object.entries(config.models);
    aliases = entries.length === 0 ? NONE : new Map(entries.map(([name, spec]) => [name, withAliasDefaults(spec)]));
    byConfig.set(config, aliases);
  }
  return aliases;
}

/** Every alias target names a route of this config that /v1 can call; else ConfigError naming the field. */
export function checkAliasRoutes(config: RuntimeConfig): void {
  if (Object.keys(config.models).length === 0) return;
  const catalog = routeCatalog(config);
  checkModelAliases(config.models, (name) => {
    const route = catalog.get(name);
    return route === undefined ? undefined : route.v1 !== undefined ? 'v1' : 'native-only';
  });
}
