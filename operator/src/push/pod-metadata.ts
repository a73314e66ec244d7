// What the operator keeps of every pod (metadata only, PartialObjectMetadata): what selects a connecting
// sidecar's ProxyConfig (the tollgate.dev/proxy-config annotation) and BudgetPolicies (its labels), and its UID,
// which must be the one its token is bound to. A few hundred bytes a pod.

import type { KubeObject } from '../../../kube-client/api-client.ts';
import { PROXY_CONFIG_ANNOTATION } from './config-selection.ts';

export type PodMetadata = KubeObject & { metadata: { name: string; namespace: string } };

export function slimPodMetadata(pod: PodMetadata): PodMetadata {
  const { name, namespace, uid, resourceVersion, labels, annotations, deletionTimestamp } = pod.metadata;
  const annotation = annotations?.[PROXY_CONFIG_ANNOTATION];
  return {
    metadata: {
      name,
      namespace,
      ...(uid ? { uid } : {}),
      ...(resourceVersion ? { resourceVersion } : {}),
      ...(labels ? { labels } : {}),
      ...(annotation !== undefined ? { annotations: { [PROXY_CONFIG_ANNOTATION]: annotation } } : {}),
      ...(deletionTimestamp ? { deletionTimestamp } : {}),
    },
  };
}
