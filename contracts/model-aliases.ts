// Model aliases: a name callers send as "model" on /v1, served by an ordered list of targets (a route and the
// model id that route receives), with a priority and a weight each. Parsed alike from the config file, the config
// API and a ProxyConfig's spec.models (the section's schema is runtime-config-schema.ts's, ADR 0602); the checks
// that need the whole config (which routes exist) run where the whole config is known (checkModelAliases).

import { ConfigError } from './config-error.ts';
import type { AliasTargetSpec, FallbackTrigger, ModelAliasSpec } from './generated/runtime-config-types.ts';
import { isRecord } from './json-record.ts';
import { FALLBACK_TRIGGERS, MODEL_ALIAS_SCHEMA, MODEL_ID_PATTERN, MODELS_SCHEMA } from './runtime-config-schema.ts';
import { validateSection } from './schema-validate.ts';

export type { FallbackTrigger } from './generated/runtime-config-types.ts';

/** A target with its defaults filled in. */
export interface AliasTarget {
  route: string;
  model: string;
  priority: number;
  weight: number;
}

/** An alias with its defaults filled in: what the gateway reads per call. */
export interface ModelAlias {
  targets: readonly AliasTarget[];
  attempts: number;
  timeoutMs: number;
  fallbackOn: ReadonlySet<FallbackTrigger>;
}

export const DEFAULT_ALIAS_TIMEOUT_MS = 120_000;

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);

/** The `models` section as written: alias name → its spec (defaults left out, as they were given). */
export type ModelAliasesConfig = Record<string, ModelAliasSpec>;

export function parseModelAliases(input: unknown, field: string): ModelAliasesConfig {
  if (!isRecord(input)) throw new ConfigError(field, 'must be a map of alias name to {targets: [...]}');
  const names = Object.keys(input);
  if (names.length > MODELS_SCHEMA.maxProperties!) throw new ConfigError(field, `must have at most ${MODELS_SCHEMA.maxProperties} aliases`);
  const out: ModelAliasesConfig = {};
  for (const name of names) {
    const at = `${field}.${name}`;
    if (!MODEL_ID.test(name)) throw new ConfigError(at, 'is not a model id callers could send: letters, digits and ._:@/+- , at most 256');
    const alias = validateSection<ModelAliasSpec>(MODEL_ALIAS_SCHEMA, input[name], at);
    if (alias.targets.length === 0) throw new ConfigError(`${at}.targets`, 'must name at least one target');
    const seen = new Map<string, number>();
    alias.targets.forEach((target, i) => {
      const key = `${target.route}\u0000${target.model}`;
      const first = seen.get(key);
      if (first !== undefined) throw new ConfigError(`${at}.targets[${i}]`, `repeats targets[${first}] (route ${target.route}, model ${target.model})`);
      seen.set(key, i);
    });
    out[name] = alias;
  }
  return out;
}

/**
 * The checks that need the whole config: every target names a route that exists and that /v1 can call, and no
 * target's model is another alias.
 * `routes` says, for a route name, whether it exists and serves /v1.
 */
export function checkModelAliases(models: ModelAliasesConfig, routes: (name: string) => 'v1' | 'native-only' | undefined, field = 'models'): void {
  for (const [name, alias] of Object.entries(models)) {
    alias.targets.forEach((target: AliasTargetSpec, i) => {
      // A target's model goes to its route as it is; were it another alias, a reader would expect it resolved.
      if (target.model !== name && Object.hasOwn(models, target.model)) {
        throw new ConfigError(`${field}.${name}.targets[${i}].model`, `is the alias ${target.model}: aliases do not chain; name the route's own model id`);
      }
      const kind = routes(target.route);
      const at = `${field}.${name}.targets[${i}].route`;
      if (kind === undefined) throw new ConfigError(at, `names no route (got ${JSON.stringify(target.route)}): a built-in route or one of the config's routes`);
      if (kind === 'native-only') throw new ConfigError(at, `${target.route} is served on /proxy only; /v1 cannot send an alias's calls there`);
    });
  }
}

/** The alias with defaults: priority 0, weight 1, one attempt per target, every trigger. */
export function withAliasDefaults(spec: ModelAliasSpec): ModelAlias {
  return {
    targets: spec.targets.map((target) => ({ route: target.route, model: target.model, priority: target.priority ?? 0, weight: target.weight ?? 1 })),
    attempts: spec.attempts ?? spec.targets.length,
    timeoutMs: spec.timeoutMs ?? DEFAULT_ALIAS_TIMEOUT_MS,
    fallbackOn: new Set(spec.fallbackOn ?? FALLBACK_TRIGGERS),
  };
}
