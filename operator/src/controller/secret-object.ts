// How Secrets are kept in the operator's cache: identity, revision and data only. Annotations are dropped
// because `kubectl apply` leaves a copy of the whole Secret, values included, in last-applied-configuration.

import type { KubeObject } from '../../../kube-client/api-client.ts';

/**
 * Secrets opt in to being read as credentials with this label set to "true". Without it a ProxyConfig author
 * could name any Secret of the namespace (a Helm release, a service token) and point the upstream baseUrl at
 * a server of their own; and the operator would cache every Secret of the cluster.
 */
export const CREDENTIALS_LABEL = 'tollgate.dev/credentials';
export const CREDENTIALS_LABEL_SELECTOR = `${CREDENTIALS_LABEL}=true`;

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
