// Whether a pod's ProxyConfig (its tollgate.dev/proxy-config annotation, else `default`) turns the audit
// fan-out on: only then does the injected sidecar get the node's address and, when the chart allows it, the
// Tetragon socket. Cached briefly like the namespace labels; a lookup that fails means "no audit" (a pod is
// never refused for it) and is logged by the caller.

import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { PROXY_CONFIG } from '../../../crds/index.ts';

export type AuditLookup = (namespace: string, proxyConfig: string) => Promise<boolean>;

export function cachedAuditLookup(kubeConfig: KubeConfig, ttlMs = 5_000, maxEntries = 2_000): AuditLookup {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const cache = new Map<string, { enabled: boolean; expires: number }>();
  return async (namespace, name) => {
    const key = `${namespace}/${name}`;
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && hit.expires > now) return hit.enabled;
    let enabled = false;
    try {
      const pc = (await api.getNamespacedCustomObject({ group: PROXY_CONFIG.group, version: PROXY_CONFIG.version, namespace, plural: PROXY_CONFIG.plural, name })) as {
        spec?: { audit?: { enabled?: boolean } };
      };
      enabled = pc.spec?.audit !== undefined && pc.spec.audit.enabled !== false;
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
    }
    if (cache.size >= maxEntries) cache.clear();
    cache.set(key, { enabled, expires: now + ttlMs });
    return enabled;
  };
}
