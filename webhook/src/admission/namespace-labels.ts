// The AdmissionRequest names the pod's namespace but does not carry its labels, and the namespace opt-in is a
// label. A short-lived cache keeps a burst of pods (a Deployment scaling up) to one GET.

import type { KubeApi } from '../../../kube-client/api-client.ts';

export type NamespaceLabelLookup = (namespace: string) => Promise<Record<string, string>>;

export function cachedNamespaceLabels(api: KubeApi, ttlMs = 5_000, maxEntries = 2_000): NamespaceLabelLookup {
  const cache = new Map<string, { labels: Record<string, string>; expires: number }>();
  return async (namespace) => {
    const now = Date.now();
    const hit = cache.get(namespace);
    if (hit && hit.expires > now) return hit.labels;
    const ns = await api.get<{ metadata?: { labels?: Record<string, string> } }>(`/api/v1/namespaces/${encodeURIComponent(namespace)}`);
    const labels = ns.metadata?.labels ?? {};
    if (cache.size >= maxEntries) cache.clear();
    cache.set(namespace, { labels, expires: now + ttlMs });
    return labels;
  };
}
