// What of a pod's spec would hand a provider credential to a container other than the Tollgate sidecar: the
// check behind "keyless app containers" (docs/security.md), shared by the webhook's unit test and the cluster
// test so both read a pod the same way.

import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';

export interface Credentials {
  /** The Secrets a ProxyConfig names for its keys. */
  secretNames: readonly string[];
  /** The key values themselves. */
  values: readonly string[];
}

function holdsValue(text: string | undefined, credentials: Credentials): boolean {
  return text !== undefined && credentials.values.some((v) => text.includes(v));
}

function volumeReason(volume: V1Volume, sidecarVolumes: ReadonlySet<string>, credentials: Credentials): string | undefined {
  if (sidecarVolumes.has(volume.name)) return `the sidecar's volume ${volume.name}`;
  const secrets = [volume.secret?.secretName, ...(volume.projected?.sources ?? []).map((s) => s.secret?.name)];
  const named = secrets.find((s) => s !== undefined && credentials.secretNames.includes(s));
  return named === undefined ? undefined : `Secret ${named}`;
}

function containerFindings(c: V1Container, volumes: ReadonlyMap<string, V1Volume>, sidecarVolumes: ReadonlySet<string>, credentials: Credentials): string[] {
  const found: string[] = [];
  for (const e of c.env ?? []) {
    if (holdsValue(e.value, credentials)) found.push(`${c.name}: env ${e.name} holds a key`);
    const ref = e.valueFrom?.secretKeyRef?.name;
    if (ref !== undefined && credentials.secretNames.includes(ref)) found.push(`${c.name}: env ${e.name} from Secret ${ref}`);
  }
  for (const from of c.envFrom ?? []) {
    const ref = from.secretRef?.name;
    if (ref !== undefined && credentials.secretNames.includes(ref)) found.push(`${c.name}: envFrom Secret ${ref}`);
  }
  for (const m of [...(c.volumeMounts ?? []), ...(c.volumeDevices ?? [])]) {
    const volume = volumes.get(m.name);
    const reason = volume === undefined ? undefined : volumeReason(volume, sidecarVolumes, credentials);
    if (reason !== undefined) found.push(`${c.name}: mounts ${reason}`);
  }
  if ([...(c.args ?? []), ...(c.command ?? [])].some((a) => holdsValue(a, credentials))) found.push(`${c.name}: a key in its command line`);
  return found;
}

/** Every way the pod gives a container other than `sidecar` a credential; empty when only the sidecar can reach them. */
export function credentialExposure(pod: V1Pod, sidecar: string, credentials: Credentials): string[] {
  const all = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  const volumes = new Map((pod.spec?.volumes ?? []).map((v) => [v.name, v]));
  const sidecarVolumes = new Set(all.filter((c) => c.name === sidecar).flatMap((c) => (c.volumeMounts ?? []).map((m) => m.name)));
  const found = all.filter((c) => c.name !== sidecar).flatMap((c) => containerFindings(c, volumes, sidecarVolumes, credentials));
  // Annotations and labels reach any container through the downward API.
  for (const [key, value] of Object.entries({ ...pod.metadata?.annotations, ...pod.metadata?.labels })) {
    if (holdsValue(value, credentials)) found.push(`pod metadata ${key} holds a key`);
  }
  return found;
}
