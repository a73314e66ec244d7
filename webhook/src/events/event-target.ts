// Which object an Event about a pod should be attached to: the pod's controlling owner when it has one (a
// ReplicaSet, Job, StatefulSet…), because a pod being admitted does not exist yet and users look at the
// workload; else the pod itself, when it has a name.

import type { V1Pod } from '@kubernetes/client-node';
import type { ObjectReference } from '../../../kube-client/event-recorder.ts';

export function eventTarget(pod: V1Pod, namespace: string): ObjectReference | undefined {
  const owners = pod.metadata?.ownerReferences ?? [];
  const owner = owners.find((o) => o.controller) ?? owners[0];
  if (owner) return { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, namespace, uid: owner.uid };
  const name = pod.metadata?.name;
  if (!name) return undefined;
  return { apiVersion: 'v1', kind: 'Pod', name, namespace, ...(pod.metadata?.uid ? { uid: pod.metadata.uid } : {}) };
}
