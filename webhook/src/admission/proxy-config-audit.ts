// Whether a pod's ProxyConfig (its tollgate.dev/proxy-config annotation, else `default`) turns the audit
// fan-out on: only then does the injected sidecar get the node's address and, when the chart allows it, the
// Tetragon socket. Cached briefly like the namespace labels; a lookup that fails means "no audit" (a pod is
// never refused for it) and is logged by the caller.

import { PROXY_CONFIG } from '../../../crds/index.ts';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';

export type AuditLookup = (namespace: string, proxyConfig: string) => Promise<boolean>;

export function cachedAuditLookup(api: KubeApi, ttlMs = 5_000, maxEntries = 2_000): AuditLookup {
  const cache = new Map<string, { enabled: boolean; expires: number }>();
  return async (namespace, name) => {
    const key = `${namespace}/${name}`;
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && hit.expires > now) return hit.enabled;
    let enabled = false;
    try {
      const path = `/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}/namespaces/${encodeURIComponent(namespace)}/${PROXY_CONFIG.plural}/${encodeURIComponent(name)}`;
      const pc = await api.get<{ spec?: { audit?: { enabled?: boolean } } }>(path);
      enabled = pc.spec?.audit !== undefined && pc.spec.audit.enabled !== false;
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
    if (cache.size >= maxEntries) cache.clear();
    cache.set(key, { enabled, expires: now + ttlMs });
    return enabled;
  };
}
