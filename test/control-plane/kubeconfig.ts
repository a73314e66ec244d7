// The kubeconfig document for a client-certificate user of the test cluster: written to a file for kubectl
// and helm, and parsed by @kubernetes/client-node for in-process clients, so both see the same thing.

import { stringify } from 'yaml';

export interface KubeconfigInput {
  server: string;
  caPem: string;
  user: string;
  certPem: string;
  keyPem: string;
}

const base64 = (pem: string) => Buffer.from(pem, 'utf8').toString('base64');

export function renderKubeconfig(input: KubeconfigInput): string {
  const cluster = 'tollgate-test';
  const context = `${input.user}@${cluster}`;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: cluster, cluster: { server: input.server, 'certificate-authority-data': base64(input.caPem) } }],
    users: [
      {
        name: input.user,
        user: { 'client-certificate-data': base64(input.certPem), 'client-key-data': base64(input.keyPem) },
      },
    ],
    contexts: [{ name: context, context: { cluster, user: input.user } }],
    'current-context': context,
  });
}
