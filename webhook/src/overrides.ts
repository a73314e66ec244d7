// Per-pod overrides by annotation, validated. An invalid value is never ignored or clamped: the pod is refused
// with a message naming the annotation, so the user finds the typo at `kubectl apply` time.

import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATIONS } from './annotations.ts';
import { parseQuantity } from './quantity.ts';
import { SIDECAR_HEALTH_PORT, type ResolvedSidecar, type ResourceAmounts, type SidecarDefaults } from './sidecar-settings.ts';

export interface OverrideProblem {
  annotation: string;
  message: string;
}

export type OverrideResult = { ok: true; sidecar: ResolvedSidecar } | { ok: false; problems: OverrideProblem[] };

// registry[:port]/path[:tag][@digest]; lowercase path components as the distribution spec requires.
const IMAGE_REFERENCE =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::\d{1,5})?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const BOOLEAN_VALUES = ['true', 'false'];
// Non-root without NET_BIND_SERVICE cannot bind below 1024.
const MIN_PORT = 1024;

function quoted(value: string): string {
  return JSON.stringify(value);
}

/** Checks the value of tollgate.dev/inject alone: it decides whether the other annotations matter at all. */
export function injectAnnotationProblem(pod: V1Pod): OverrideProblem | undefined {
  const value = pod.metadata?.annotations?.[ANNOTATIONS.inject];
  if (value === undefined || BOOLEAN_VALUES.includes(value)) return undefined;
  return {
    annotation: ANNOTATIONS.inject,
    message: `annotation ${ANNOTATIONS.inject}: ${quoted(value)} is not "true" or "false"`,
  };
}

function resolveResource(
  pod: V1Pod,
  annotation: string,
  kind: keyof ResourceAmounts,
  defaults: SidecarDefaults['resources'],
  problems: OverrideProblem[],
): { request: string; limit: string } {
  const fallback = { request: defaults.requests[kind], limit: defaults.limits[kind] };
  const value = pod.metadata?.annotations?.[annotation];
  if (value === undefined) return fallback;
  const amount = parseQuantity(value);
  const minimum = kind === 'cpu' ? 0.001 : 1024 * 1024;
  if (amount === undefined || amount < minimum) {
    const example = kind === 'cpu' ? '100m or 0.5' : '64Mi or 1Gi';
    problems.push({
      annotation,
      message: `annotation ${annotation}: ${quoted(value)} is not a ${kind} quantity of at least ${kind === 'cpu' ? '1m' : '1Mi'} (e.g. ${example})`,
    });
    return fallback;
  }
  // The annotation sets the request; a default limit below it is raised to match, or the pod would be invalid.
  const defaultLimit = parseQuantity(defaults.limits[kind]);
  const limit = defaultLimit !== undefined && defaultLimit >= amount ? defaults.limits[kind] : value;
  return { request: value, limit };
}

function appPorts(pod: V1Pod): Set<number> {
  const ports = new Set<number>();
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]) {
    for (const p of c.ports ?? []) ports.add(p.containerPort);
  }
  return ports;
}

function resolvePort(pod: V1Pod, defaults: SidecarDefaults, problems: OverrideProblem[]): number {
  const annotation = ANNOTATIONS.sidecarPort;
  const value = pod.metadata?.annotations?.[annotation];
  const port = value === undefined ? defaults.port : /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (value !== undefined && !(port >= MIN_PORT && port <= 65535)) {
    problems.push({
      annotation,
      message: `annotation ${annotation}: ${quoted(value)} is not a port number between ${MIN_PORT} and 65535 (the sidecar runs as non-root)`,
    });
    return defaults.port;
  }
  if (port === SIDECAR_HEALTH_PORT) {
    problems.push({ annotation, message: `annotation ${annotation}: port ${port} is the sidecar's health port; choose another` });
    return defaults.port;
  }
  // Containers of a pod share one network namespace: two listeners on one port fail at run time, so refuse now.
  if (appPorts(pod).has(SIDECAR_HEALTH_PORT)) {
    problems.push({ annotation, message: `a container already uses port ${SIDECAR_HEALTH_PORT}, which the sidecar's health listener needs` });
  }
  if (appPorts(pod).has(port)) {
    problems.push({
      annotation,
      message:
        value === undefined
          ? `a container already uses port ${port}, the sidecar's port: set annotation ${annotation} to a free port`
          : `annotation ${annotation}: port ${port} is already used by a container of this pod`,
    });
  }
  return port;
}

function resolveBoolean(pod: V1Pod, annotation: string, fallback: boolean, problems: OverrideProblem[]): boolean {
  const value = pod.metadata?.annotations?.[annotation];
  if (value === undefined) return fallback;
  if (!BOOLEAN_VALUES.includes(value)) {
    problems.push({ annotation, message: `annotation ${annotation}: ${quoted(value)} is not "true" or "false"` });
    return fallback;
  }
  return value === 'true';
}

function resolveNative(pod: V1Pod, defaults: SidecarDefaults, nativeSidecarSupported: boolean, problems: OverrideProblem[]): boolean {
  const annotation = ANNOTATIONS.nativeSidecar;
  const value = pod.metadata?.annotations?.[annotation];
  const mode = value ?? defaults.nativeSidecar;
  if (!['auto', 'true', 'false'].includes(mode)) {
    problems.push({ annotation, message: `annotation ${annotation}: ${quoted(mode)} is not "auto", "true" or "false"` });
    return false;
  }
  if (mode === 'true' && !nativeSidecarSupported) {
    problems.push({
      annotation: value === undefined ? 'nativeSidecar (chart value)' : annotation,
      message: `${value === undefined ? 'the chart value sidecar.nativeSidecar' : `annotation ${annotation}`}: "true" needs Kubernetes 1.29 or later (initContainers with restartPolicy Always); this cluster does not support native sidecars`,
    });
    return false;
  }
  return mode === 'true' || (mode === 'auto' && nativeSidecarSupported);
}

export function resolveSidecar(pod: V1Pod, defaults: SidecarDefaults, nativeSidecarSupported: boolean): OverrideResult {
  const problems: OverrideProblem[] = [];
  const annotations = pod.metadata?.annotations ?? {};

  let image = defaults.image;
  const imageOverride = annotations[ANNOTATIONS.sidecarImage];
  if (imageOverride !== undefined) {
    if (imageOverride.length > 0 && imageOverride.length <= 512 && IMAGE_REFERENCE.test(imageOverride)) image = imageOverride;
    else
      problems.push({
        annotation: ANNOTATIONS.sidecarImage,
        message: `annotation ${ANNOTATIONS.sidecarImage}: ${quoted(imageOverride)} is not an image reference (e.g. registry.example.com/tollgate/sidecar:1.2.3)`,
      });
  }

  const cpu = resolveResource(pod, ANNOTATIONS.sidecarCpu, 'cpu', defaults.resources, problems);
  const memory = resolveResource(pod, ANNOTATIONS.sidecarMemory, 'memory', defaults.resources, problems);
  const port = resolvePort(pod, defaults, problems);
  const native = resolveNative(pod, defaults, nativeSidecarSupported, problems);
  const injectEnv = resolveBoolean(pod, ANNOTATIONS.injectEnv, false, problems);

  const proxyConfig = annotations[ANNOTATIONS.proxyConfig];
  if (proxyConfig !== undefined && !(proxyConfig.length <= 253 && DNS1123_SUBDOMAIN.test(proxyConfig))) {
    problems.push({
      annotation: ANNOTATIONS.proxyConfig,
      message: `annotation ${ANNOTATIONS.proxyConfig}: ${quoted(proxyConfig)} is not a ProxyConfig name (lowercase letters, digits, '-' and '.', at most 253 characters)`,
    });
  }

  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    sidecar: {
      image,
      port,
      resources: {
        requests: { cpu: cpu.request, memory: memory.request },
        limits: { cpu: cpu.limit, memory: memory.limit },
      },
      native,
      injectEnv,
      ...(proxyConfig === undefined ? {} : { proxyConfig }),
    },
  };
}
