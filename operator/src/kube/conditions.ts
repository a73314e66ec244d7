// metav1.Condition handling per KEP-1623: a list keyed by type; lastTransitionTime moves only when the
// status changes, so "Ready since" stays meaningful across reconciles that merely repeat the verdict.

import type { Condition } from '../../../crds/generated/proxy-config-types.ts';

// The shape is the API's (crds/ is the source of truth); re-exported for the operator's callers.
export type { Condition } from '../../../crds/generated/proxy-config-types.ts';

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MAX_MESSAGE = 32_768;

/**
 * Returns a new condition list with `input` set. Other types are kept in order; an existing condition of
 * the same type keeps its lastTransitionTime unless the status changed.
 */
export function setCondition(conditions: readonly Condition[] | undefined, input: ConditionInput, now: string): Condition[] {
  if (!REASON.test(input.reason)) throw new Error(`condition reason ${JSON.stringify(input.reason)} must be CamelCase`);
  const message = input.message.length > MAX_MESSAGE ? `${input.message.slice(0, MAX_MESSAGE - 3)}...` : input.message;
  const list = [...(conditions ?? [])];
  const index = list.findIndex((c) => c.type === input.type);
  const existing = index >= 0 ? list[index] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    ...(input.observedGeneration !== undefined ? { observedGeneration: input.observedGeneration } : {}),
    lastTransitionTime: existing && existing.status === input.status ? existing.lastTransitionTime : now,
    reason: input.reason,
    message,
  };
  if (index >= 0) list[index] = next;
  else list.push(next);
  return list;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
