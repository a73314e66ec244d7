// The node's credentials, generated per bring-up with the production contracts/pki.ts: one CA for the API
// server's serving certificate and every client certificate, each component as the user Kubernetes' default
// RBAC and the Node authorizer expect, and the service-account signing key.

import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, type KeyPairPem } from '../../contracts/pki.ts';
import { renderKubeconfig } from '../control-plane/kubeconfig.ts';
import { NODE_NAME, paths, PORTS, type NodeNetwork } from './node-layout.ts';

// Long enough for a node someone keeps for a few weeks of trying things out.
const VALIDITY_HOURS = 24 * 30;

/** The client identities, named as the default ClusterRoleBindings (and the Node authorizer) know them. */
export const CLIENTS = {
  admin: { user: 'tollgate-admin', groups: ['system:masters'] },
  kubelet: { user: `system:node:${NODE_NAME}`, groups: ['system:nodes'] },
  kubeProxy: { user: 'system:kube-proxy', groups: [] },
  scheduler: { user: 'system:kube-scheduler', groups: [] },
  controllerManager: { user: 'system:kube-controller-manager', groups: [] },
  // The API server's identity towards the kubelet (exec, logs).
  apiServerKubeletClient: { user: 'kube-apiserver-kubelet-client', groups: ['system:masters'] },
} as const;

export type ClientName = keyof typeof CLIENTS;

export interface NodePki {
  caCert: string;
  caPem: string;
  apiServerCert: string;
  apiServerKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
  apiServerKubeletClientCert: string;
  apiServerKubeletClientKey: string;
  kubeconfig: Record<Exclude<ClientName, 'apiServerKubeletClient'>, string>;
  admin: KeyPairPem;
}

function write(path: string, content: string): string {
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

export async function createNodePki(net: NodeNetwork): Promise<NodePki> {
  mkdirSync(paths.pki, { recursive: true, mode: 0o700 });
  mkdirSync(paths.kubeconfigs, { recursive: true, mode: 0o700 });
  const ca = await createCertificateAuthority({ commonName: 'tollgate-node-ca', validityHours: VALIDITY_HOURS });
  const serving = await issueCertificate(ca, {
    commonName: 'kube-apiserver',
    dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
    ipAddresses: [net.nodeAddress, net.kubernetesServiceIp, '127.0.0.1'],
    usage: 'server',
    validityHours: VALIDITY_HOURS,
  });
  const issued = {} as Record<ClientName, KeyPairPem>;
  for (const [name, client] of Object.entries(CLIENTS) as Array<[ClientName, (typeof CLIENTS)[ClientName]]>) {
    issued[name] = await issueCertificate(ca, { commonName: client.user, organizations: [...client.groups], usage: 'client', validityHours: VALIDITY_HOURS });
  }
  const sa = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const server = `https://${net.nodeAddress}:${PORTS.apiServer}`;
  const kubeconfigFor = (name: Exclude<ClientName, 'apiServerKubeletClient'>) =>
    write(join(paths.kubeconfigs, `${name}.kubeconfig`), renderKubeconfig({ server, caPem: ca.certPem, user: CLIENTS[name].user, ...issued[name] }));
  return {
    caCert: write(join(paths.pki, 'ca.crt'), ca.certPem),
    caPem: ca.certPem,
    apiServerCert: write(join(paths.pki, 'apiserver.crt'), serving.certPem),
    apiServerKey: write(join(paths.pki, 'apiserver.key'), serving.keyPem),
    serviceAccountKey: write(join(paths.pki, 'sa.key'), sa.privateKey),
    serviceAccountPub: write(join(paths.pki, 'sa.pub'), sa.publicKey),
    apiServerKubeletClientCert: write(join(paths.pki, 'apiserver-kubelet-client.crt'), issued.apiServerKubeletClient.certPem),
    apiServerKubeletClientKey: write(join(paths.pki, 'apiserver-kubelet-client.key'), issued.apiServerKubeletClient.keyPem),
    kubeconfig: {
      admin: kubeconfigFor('admin'),
      kubelet: kubeconfigFor('kubelet'),
      kubeProxy: kubeconfigFor('kubeProxy'),
      scheduler: kubeconfigFor('scheduler'),
      controllerManager: kubeconfigFor('controllerManager'),
    },
    admin: issued.admin,
  };
}
