// The pods of one node as the API server lists them (the agent's ServiceAccount may get, list and watch pods),
// indexed by container id: what Tetragon's pod watcher gives it to name an event's pod and container.

import { readFileSync } from 'node:fs';
import { request } from 'node:https';

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface PodContainer {
  namespace: string;
  pod: string;
  container: string;
  /** `containerd://<id>` as the container status says. */
  containerId: string;
  image: string;
  imageId: string;
  labels: Record<string, string>;
}

interface ContainerStatus {
  name: string;
  containerID?: string;
  image: string;
  imageID: string;
}
interface PodList {
  items: Array<{
    metadata: { name: string; namespace: string; labels?: Record<string, string> };
    status: { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[]; ephemeralContainerStatuses?: ContainerStatus[] };
  }>;
}

function get<T>(path: string): Promise<T> {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) throw new Error('node agent: KUBERNETES_SERVICE_HOST is not set (not in a pod?)');
  const token = readFileSync(`${SERVICE_ACCOUNT}/token`, 'utf8').trim();
  const ca = readFileSync(`${SERVICE_ACCOUNT}/ca.crt`);
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, ca, headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, timeout: 5_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) reject(new Error(`GET ${path}: ${res.statusCode} ${body.slice(0, 300)}`));
        else resolve(JSON.parse(body) as T);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** Container id (64 hex digits) → the pod container it is, for the pods scheduled on `nodeName`. */
export async function listNodeContainers(nodeName: string): Promise<Map<string, PodContainer>> {
  const list = await get<PodList>(`/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`);
  const byId = new Map<string, PodContainer>();
  for (const pod of list.items) {
    const { containerStatuses = [], initContainerStatuses = [], ephemeralContainerStatuses = [] } = pod.status;
    for (const c of [...containerStatuses, ...initContainerStatuses, ...ephemeralContainerStatuses]) {
      const id = c.containerID?.replace(/^[a-z]+:\/\//, '');
      if (!id) continue;
      byId.set(id, {
        namespace: pod.metadata.namespace,
        pod: pod.metadata.name,
        container: c.name,
        containerId: c.containerID!,
        image: c.image,
        imageId: c.imageID,
        labels: pod.metadata.labels ?? {},
      });
    }
  }
  return byId;
}
