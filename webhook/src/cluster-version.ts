// Whether the cluster runs native sidecars: initContainers with restartPolicy Always are on by default from
// Kubernetes 1.29 (beta, SidecarContainers gate) and GA in 1.33. 1.28 has them behind an alpha gate only,
// which "auto" does not assume.

import type { KubeApi } from '../../kube-client/api-client.ts';

export function supportsNativeSidecars(version: { major: string; minor: string }): boolean {
  const major = Number.parseInt(version.major, 10);
  const minor = Number.parseInt(version.minor, 10); // "29+" on some managed clusters
  return major > 1 || (major === 1 && minor >= 29);
}

export async function clusterSupportsNativeSidecars(api: KubeApi): Promise<boolean> {
  return supportsNativeSidecars(await api.get<{ major: string; minor: string }>('/version'));
}
