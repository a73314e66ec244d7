// Whether a pod's ProxyConfig (its tollgate.dev/proxy-config annotation, else `default`) has its sidecar read the
// node's Tetragon agent, for the audit fan-out or for provenance: only then does the injected sidecar get the
// node's address and, when the chart allows it, the Tetragon socket (ADR 1102; provenance since ADR 1606, which
// found a provenance-only sidecar dialling its own pod). Cached briefly like the namespace labels; a lookup that
// fails means "no agent" (a pod is never refused for it) and is logged by the caller.

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
      const pc = await api.get<{ spec?: { audit?: { enabled?: boolean }; provenance?: { enabled?: boolean } } }>(path);
      const on = (section: { enabled?: boolean } | undefined) => section !== undefined && section.enabled !== false;
      enabled = on(pc.spec?.audit) || on(pc.spec?.provenance);
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
    if (cache.size >= maxEntries) cache.clear();
    cache.set(key, { enabled, expires: now + ttlMs });
    return enabled;
  };
}
