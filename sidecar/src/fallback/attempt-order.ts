// The order in which one call tries an alias's targets: by priority, lowest first; within a priority in a
// weighted random order, so the targets share the calls by weight; and a target that is cooling down or behind
// an open breaker after every one that is not, since a lower priority is used only when every target above it
// is failing.

import type { AliasTarget, ModelAlias } from '../../../contracts/model-aliases.ts';

/**
 * The alias's targets in the order one call tries them. `available` says whether a target can be tried now;
 * `random` returns a number in [0, 1) (Math.random, or a seeded one in tests).
 */
export function attemptOrder(alias: ModelAlias, available: (target: AliasTarget) => boolean, random: () => number = Math.random): AliasTarget[] {
  // A weighted random permutation (Efraimidis and Spirakis): each target draws u^(1/weight), the highest first.
  const keyed = alias.targets.map((target) => ({ target, up: available(target), key: Math.pow(random(), 1 / target.weight) }));
  keyed.sort((a, b) => (a.up !== b.up ? (a.up ? -1 : 1) : a.target.priority !== b.target.priority ? a.target.priority - b.target.priority : b.key - a.key));
  return keyed.map((entry) => entry.target);
}
