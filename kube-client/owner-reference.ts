// What the operator and the webhook create at run time (TLS Secrets, the Lease, the push EndpointSlice, the
// budget ledger) names the component's Deployment as its owner, so the garbage collector deletes it when
// `helm uninstall` deletes the Deployment (ADR 0807). Objects written before the reference existed get it on
// their next write; each writer checks with hasOwnerReference and writes when it is missing.

import { setTimeout as sleep } from 'node:timers/promises';
import { isStatus, type KubeApi } from './api-client.ts';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

interface WithOwners {
  ownerReferences?: Array<{ uid?: string }> | undefined;
}

/**
 * The Deployment `name` in `namespace` as an owner. Not a controller reference (the Deployment's controller
 * does not manage these objects) and no blockOwnerDeletion (that would need update on deployments/finalizers,
 * and nothing needs to wait for these objects to go). Transient failures are retried for `withinMs`; a
 * missing Deployment or a refusal fails at once with a message that names the Deployment and the fix.
 */
export async function deploymentOwner(api: KubeApi, namespace: string, name: string, withinMs = 60_000): Promise<OwnerReference> {
  const path = `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments/${encodeURIComponent(name)}`;
  const deadline = Date.now() + withinMs;
  for (let delay = 500; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      const deployment = await api.get<{ metadata: { uid?: string } }>(path);
      if (!deployment.metadata.uid) throw new Error(`Deployment ${namespace}/${name} has no uid`);
      return { apiVersion: 'apps/v1', kind: 'Deployment', name, uid: deployment.metadata.uid };
    } catch (error) {
      if (isStatus(error, 404)) throw new Error(`owner Deployment ${namespace}/${name} not found (--owner-deployment names the Deployment this process runs in)`);
      if (isStatus(error, 403)) throw new Error(`not allowed to get Deployment ${namespace}/${name}: the chart's Role grants get on it by name (--owner-deployment)`);
      if (Date.now() + delay > deadline) throw error;
      await sleep(delay);
    }
  }
}

/** True when `metadata` already names `owner` (by uid), or when there is no owner to name. */
export function hasOwnerReference(metadata: object | undefined, owner: OwnerReference | undefined): boolean {
  return !owner || ((metadata as WithOwners | undefined)?.ownerReferences ?? []).some((ref) => ref.uid === owner.uid);
}

/**
 * `metadata` with `owner` among its ownerReferences, keeping any others. A PUT replaces metadata whole, so
 * every write of an object that may carry the reference goes through here or copies what it read.
 */
export function withOwnerReference<M extends object>(metadata: M, owner: OwnerReference | undefined): M & { ownerReferences?: OwnerReference[] } {
  if (!owner || hasOwnerReference(metadata, owner)) return metadata;
  const existing = (metadata as { ownerReferences?: OwnerReference[] }).ownerReferences ?? [];
  return { ...metadata, ownerReferences: [...existing, { ...owner }] };
}
