// `kubectl wait --for=condition=Established` straight after `kubectl apply` can fail instead of waiting: until
// the API server has written the CRD's first status, .status.conditions is null and kubectl 1.34 answers
// "accessor error: <nil> is of the type <nil>" (seen under load). Polling the condition through the API has
// no such window.

import { ApiextensionsV1Api, type KubeConfig } from '@kubernetes/client-node';
import { waitFor } from '../support/wait-for.ts';

export async function crdEstablished(kubeConfig: KubeConfig, name: string): Promise<void> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  await waitFor(
    `CRD ${name} to be Established`,
    async () => {
      const crd = await api.readCustomResourceDefinition({ name });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    },
    60_000,
  );
}
