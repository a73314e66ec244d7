// Which ProxyConfig a sidecar gets (docs/decisions/0700): the one its pod's annotation
// tollgate.dev/proxy-config names, in the pod's own namespace; else that namespace's `default`; else the
// built-in defaults (an empty patch). The namespace always comes from the token review, so a pod can only
// ever be bound to a config of its own namespace.

export const PROXY_CONFIG_ANNOTATION = 'tollgate.dev/proxy-config';
export const DEFAULT_PROXY_CONFIG = 'default';
/** The source key of the built-in defaults. */
export const BUILTIN_SOURCE = '';

/**
 * Returns `namespace/name` of the ProxyConfig to use, or BUILTIN_SOURCE. A named ProxyConfig that does not
 * exist (yet) falls through to `default`, so a typo in an annotation degrades to the namespace's
 * config rather than to no config; the operator logs it.
 */
export function selectConfig(namespace: string, annotation: string | undefined, exists: (key: string) => boolean): string {
  const named = annotation?.trim();
  if (named) {
    const key = `${namespace}/${named}`;
    if (exists(key)) return key;
  }
  const fallback = `${namespace}/${DEFAULT_PROXY_CONFIG}`;
  return exists(fallback) ? fallback : BUILTIN_SOURCE;
}
