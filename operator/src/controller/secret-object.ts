// How Secrets are kept in the operator's cache: identity, revision and data only. Annotations are dropped
// because `kubectl apply` leaves a copy of the whole Secret, values included, in last-applied-configuration.

import type { KubeObject } from '../kube/api-client.ts';

export interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

export function slimSecret(secret: SecretObject): SecretObject {
  const { name, namespace, uid, resourceVersion } = secret.metadata;
  return {
    metadata: { name, ...(namespace ? { namespace } : {}), ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) },
    ...(secret.type ? { type: secret.type } : {}),
    ...(secret.data ? { data: secret.data } : {}),
  };
}
