// The pure patch builder: pod as received + settings → a JSONPatch that is valid against exactly that object
// (arrays and maps created when absent, annotation keys escaped), a skip with its reason, or a refusal.

import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ANNOTATIONS } from './annotations.ts';
import { pointer, type JsonPatchOperation } from './json-patch.ts';
import { injectAnnotationProblem, resolveSidecar, type OverrideProblem } from './overrides.ts';
import { skipReason, type Skip } from './predicates.ts';
import { missingSdkEnv } from './sdk-env.ts';
import { auditAccess, sidecarContainer, sidecarVolumes } from './sidecar-container.ts';
import type { SidecarDefaults } from './sidecar-settings.ts';

export interface InjectionInput {
  pod: V1Pod;
  namespace: string;
  namespaceLabels: Readonly<Record<string, string>>;
  ownNamespace: string;
  defaults: SidecarDefaults;
  /** Kubernetes ≥ 1.29: initContainers with restartPolicy Always are sidecars. */
  nativeSidecarSupported: boolean;
  operatorCaPem: string;
  /** The pod's ProxyConfig enables audit: the sidecar gets the node's IP, and the agent's socket when allowed. */
  audit?: { hostSocketDir?: string };
}

/** The value of the tollgate.dev/status annotation (JSON). */
export interface InjectionStatus {
  version: string;
  container: string;
  image: string;
  native: boolean;
  port: number;
  /** App containers that got the SDK base-URL variables. */
  injectEnv: string[];
}

export type InjectionDecision =
  | { kind: 'inject'; patch: JsonPatchOperation[]; status: InjectionStatus; notes: string[] }
  | { kind: 'skip'; skip: Skip }
  | { kind: 'refuse'; problems: OverrideProblem[]; message: string };

function refuse(problems: OverrideProblem[]): InjectionDecision {
  return { kind: 'refuse', problems, message: `tollgate: ${problems.map((p) => p.message).join('; ')}` };
}

function envOperations(containers: V1Container[], port: number, notes: string[]): { ops: JsonPatchOperation[]; names: string[] } {
  const ops: JsonPatchOperation[] = [];
  const names: string[] = [];
  containers.forEach((container, index) => {
    const missing = missingSdkEnv(container, port);
    if (missing === 'has-env-from') {
      notes.push(`container ${container.name} uses envFrom: SDK base-URL variables not added`);
      return;
    }
    if (missing.length === 0) return;
    names.push(container.name);
    if (container.env === undefined) {
      ops.push({ op: 'add', path: pointer('spec', 'containers', index, 'env'), value: missing });
    } else {
      for (const variable of missing) ops.push({ op: 'add', path: pointer('spec', 'containers', index, 'env', '-'), value: variable });
    }
  });
  return { ops, names };
}

/** The sidecar's place: first among the init containers when native, so the ones after it can already reach the proxy. */
function containerOperation(pod: V1Pod, container: V1Container, native: boolean): JsonPatchOperation {
  if (native) {
    return pod.spec?.initContainers === undefined
      ? { op: 'add', path: '/spec/initContainers', value: [container] }
      : { op: 'add', path: '/spec/initContainers/0', value: container };
  }
  return pod.spec?.containers === undefined ? { op: 'add', path: '/spec/containers', value: [container] } : { op: 'add', path: '/spec/containers/-', value: container };
}

/** Adds annotations, creating metadata.annotations (or metadata) when the pod has none. */
function annotationOperations(pod: V1Pod, annotations: Record<string, string>): JsonPatchOperation[] {
  if (pod.metadata === undefined) return [{ op: 'add', path: '/metadata', value: { annotations } }];
  if (pod.metadata.annotations === undefined) return [{ op: 'add', path: '/metadata/annotations', value: annotations }];
  return Object.entries(annotations).map(([key, value]) => ({ op: 'add', path: pointer('metadata', 'annotations', key), value }));
}

/**
 * Containers of the pod that mount a volume the webhook is about to add. The pod cannot name such a volume
 * itself (that is refused as a clash), but a mount of it is valid once the patch adds it: an app container
 * would then read the sidecar's credential files (tollgate-state) or present its operator token
 * (tollgate-token) and be pushed the keys. Keys stay in the sidecar only if nothing else mounts these.
 */
function reservedMounts(pod: V1Pod, volumes: readonly { name: string }[]): string[] {
  const reserved = new Set(volumes.map((v) => v.name));
  const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  return containers.flatMap((c) => [...(c.volumeMounts ?? []), ...(c.volumeDevices ?? [])].filter((m) => reserved.has(m.name)).map((m) => `container ${c.name} mounts ${m.name}`));
}

export function planInjection(input: InjectionInput): InjectionDecision {
  const { pod } = input;
  const ctx = { pod, namespace: input.namespace, namespaceLabels: input.namespaceLabels, ownNamespace: input.ownNamespace };

  // A malformed opt-in is refused before the predicates read it as "not opted in", unless the namespace is
  // one Tollgate never touches anyway.
  const injectProblem = injectAnnotationProblem(pod);
  const skip = skipReason(ctx);
  if (injectProblem && skip?.reason !== 'SystemNamespace' && skip?.reason !== 'TollgateNamespace') return refuse([injectProblem]);
  if (skip) return { kind: 'skip', skip };

  const resolved = resolveSidecar(pod, input.defaults, input.nativeSidecarSupported);
  if (!resolved.ok) return refuse(resolved.problems);
  const sidecar = resolved.sidecar;

  const volumes = [...sidecarVolumes(), ...(input.audit ? auditAccess(input.audit.hostSocketDir).volumes : [])];
  const taken = new Set((pod.spec?.volumes ?? []).map((v) => v.name));
  const clashes = volumes.filter((v) => taken.has(v.name)).map((v) => v.name);
  if (clashes.length > 0) {
    return refuse([{ annotation: 'spec.volumes', message: `the pod already has volume(s) ${clashes.join(', ')}, reserved for the Tollgate sidecar` }]);
  }

  const mounted = reservedMounts(pod, volumes);
  if (mounted.length > 0) {
    return refuse([{ annotation: 'spec.containers[].volumeMounts', message: `${mounted.join(', ')}: only the Tollgate sidecar may mount its volumes` }]);
  }

  const notes: string[] = [];
  const container = sidecarContainer(sidecar, input.defaults);
  if (input.audit) {
    const audit = auditAccess(input.audit.hostSocketDir);
    container.env = [...(container.env ?? []), ...audit.env];
    container.volumeMounts = [...(container.volumeMounts ?? []), ...audit.mounts];
  }
  const patch: JsonPatchOperation[] = [containerOperation(pod, container, sidecar.native)];

  // A projected service-account token needs spec.serviceAccountName. The ServiceAccount admission plugin
  // fills it in before webhooks run; where it is disabled (envtest-style control planes) we set the same
  // default it would, or the API server rejects the token volume.
  if (!pod.spec?.serviceAccountName && !pod.spec?.serviceAccount && pod.spec !== undefined) {
    patch.push({ op: 'add', path: '/spec/serviceAccountName', value: 'default' });
  }

  if (pod.spec?.volumes === undefined) patch.push({ op: 'add', path: '/spec/volumes', value: volumes });
  else for (const v of volumes) patch.push({ op: 'add', path: '/spec/volumes/-', value: v });

  let injectEnv: string[] = [];
  if (sidecar.injectEnv) {
    const env = envOperations(pod.spec?.containers ?? [], sidecar.port, notes);
    patch.push(...env.ops);
    injectEnv = env.names;
  }

  const status: InjectionStatus = {
    version: input.defaults.version,
    container: container.name,
    image: sidecar.image,
    native: sidecar.native,
    port: sidecar.port,
    injectEnv,
  };
  patch.push(...annotationOperations(pod, { [ANNOTATIONS.status]: JSON.stringify(status), [ANNOTATIONS.operatorCa]: input.operatorCaPem }));
  return { kind: 'inject', patch, status, notes };
}
