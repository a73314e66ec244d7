// The Ready condition every reconciler here reports, as kubebuilder's do: this pass's verdict set over the
// object's conditions with its observedGeneration, the status written through the status subresource only when
// it differs, and an Accepted/Rejected Event only when Ready itself changed, so a new leader repeats none.

import type { EventInput, ObjectReference } from '../../../kube-client/event-recorder.ts';
import { type KubeApi, isStatus, splitKey } from '../../../kube-client/api-client.ts';
import { rfc3339 } from '../../../kube-client/micro-time.ts';
import { type Condition, findCondition, setCondition } from './conditions.ts';

export interface Verdict {
  ready: boolean;
  reason: string;
  message: string;
}

/** A kind's API coordinates, as crds/index.ts gives them. */
export interface KindCoordinates {
  group: string;
  version: string;
  apiVersion: string;
  kind: string;
  plural: string;
}

interface NamedObject {
  metadata: { name: string; namespace: string; uid?: string; resourceVersion?: string };
}

export function objectReference(kind: KindCoordinates, object: NamedObject): ObjectReference {
  const { name, namespace, uid, resourceVersion } = object.metadata;
  return { apiVersion: kind.apiVersion, kind: kind.kind, name, namespace, ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) };
}

/**
 * The conditions with Ready set to the verdict, and whether Ready changed: its status, reason or observed
 * generation, and its message where the message says what the user acts on (`compareMessage`).
 */
export function setReady(
  conditions: readonly Condition[] | undefined,
  verdict: Verdict,
  at: { generation: number | undefined; compareMessage: boolean },
): { conditions: Condition[]; changed: boolean } {
  const before = findCondition(conditions, 'Ready');
  const next = setCondition(
    conditions,
    {
      type: 'Ready',
      status: verdict.ready ? 'True' : 'False',
      ...(at.generation !== undefined ? { observedGeneration: at.generation } : {}),
      reason: verdict.reason,
      message: verdict.message,
    },
    rfc3339(),
  );
  const after = findCondition(next, 'Ready')!;
  const changed =
    !before ||
    before.status !== after.status ||
    before.reason !== after.reason ||
    before.observedGeneration !== after.observedGeneration ||
    (at.compareMessage && before.message !== after.message);
  return { conditions: next, changed };
}

/** The Event that announces a changed Ready condition. */
export function verdictEvent(regarding: ObjectReference, verdict: Verdict, generation: number | undefined): EventInput {
  const note = verdict.ready ? `Generation ${generation ?? '?'} accepted: ${verdict.message}` : `Generation ${generation ?? '?'} rejected (${verdict.reason}): ${verdict.message}`;
  return { regarding, type: verdict.ready ? 'Normal' : 'Warning', reason: verdict.ready ? 'Accepted' : 'Rejected', action: 'Reconcile', note };
}

/** PATCHes the status subresource of the object at `key`; false when it was deleted meanwhile (its delete event reconciles again). */
export async function writeStatus(api: KubeApi, kind: KindCoordinates, key: string, status: object): Promise<boolean> {
  const { namespace, name } = splitKey(key);
  try {
    await api.patch(`/apis/${kind.group}/${kind.version}/namespaces/${namespace}/${kind.plural}/${name}/status`, { status });
    return true;
  } catch (error) {
    if (isStatus(error, 404)) return false;
    throw error;
  }
}
