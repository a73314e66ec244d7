// What the process knows of each alias target's health, beyond its route's circuit breaker: a target that
// answered 429 is cooling down until its Retry-After has passed, and each alias remembers which priority served
// its last call and since when calls have gone to a priority below its first. Bounded by the config: only the
// targets and aliases it names are kept (at most 256 aliases of 16 targets).

import type { AliasTarget, ModelAlias } from '../../../contracts/model-aliases.ts';

/** A target's state for reports: `circuit_open` when its route's breaker is open. */
export type TargetState = 'healthy' | 'cooling_down' | 'circuit_open';

export interface AliasHealthReport {
  alias: string;
  targets: { route: string; model: string; priority: number; state: TargetState; coolingUntil: string | null }[];
  /** Priority of the target that answered the alias's last call; null before its first. */
  servedPriority: number | null;
  /** When calls began to be served below the alias's first priority (ISO time), or null while they are not. */
  degradedSince: string | null;
}

interface Served {
  priority: number;
  degradedSince: number | null;
}

export function targetKey(target: Pick<AliasTarget, 'route' | 'model'>): string {
  return `${target.route}\u0000${target.model}`;
}

/** The first priority of an alias: its preferred targets. */
export function topPriority(alias: ModelAlias): number {
  let top = Number.POSITIVE_INFINITY;
  for (const target of alias.targets) if (target.priority < top) top = target.priority;
  return top;
}

export class TargetHealth {
  readonly #coolingUntil = new Map<string, number>();
  readonly #served = new Map<string, Served>();

  /** The target answered 429: skip it until `until` (epoch ms). */
  coolDown(target: AliasTarget, until: number): void {
    const key = targetKey(target);
    if ((this.#coolingUntil.get(key) ?? 0) < until) this.#coolingUntil.set(key, until);
  }

  /** When the target's cool-down ends (epoch ms), or 0 when it is not cooling down. */
  coolingUntil(target: AliasTarget, now: number): number {
    const key = targetKey(target);
    const until = this.#coolingUntil.get(key);
    if (until === undefined) return 0;
    if (until > now) return until;
    this.#coolingUntil.delete(key);
    return 0;
  }

  /** The alias's call was answered by a target of `priority`. */
  served(alias: string, definition: ModelAlias, priority: number, now: number): void {
    const below = priority > topPriority(definition);
    const previous = this.#served.get(alias);
    const degradedSince = below ? (previous?.degradedSince ?? now) : null;
    if (previous === undefined) this.#served.set(alias, { priority, degradedSince });
    else {
      previous.priority = priority;
      previous.degradedSince = degradedSince;
    }
  }

  /** Each alias of the config with its targets' states; forgets what the config no longer names. */
  report(models: Readonly<Record<string, ModelAlias>>, breakerOpen: (route: string) => boolean, now: number): AliasHealthReport[] {
    const keep = new Set<string>();
    const reports: AliasHealthReport[] = [];
    for (const [alias, definition] of Object.entries(models)) {
      const served = this.#served.get(alias);
      reports.push({
        alias,
        targets: definition.targets.map((target) => {
          keep.add(targetKey(target));
          const until = this.coolingUntil(target, now);
          const state: TargetState = breakerOpen(target.route) ? 'circuit_open' : until > 0 ? 'cooling_down' : 'healthy';
          return { route: target.route, model: target.model, priority: target.priority, state, coolingUntil: until > 0 ? new Date(until).toISOString() : null };
        }),
        servedPriority: served?.priority ?? null,
        degradedSince: served?.degradedSince == null ? null : new Date(served.degradedSince).toISOString(),
      });
    }
    for (const key of this.#coolingUntil.keys()) if (!keep.has(key)) this.#coolingUntil.delete(key);
    for (const alias of this.#served.keys()) if (!Object.hasOwn(models, alias)) this.#served.delete(alias);
    return reports;
  }
}
