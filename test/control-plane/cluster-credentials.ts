// Every credential a throw-away cluster needs, generated per run so nothing long-lived is checked in: one CA
// that signs both the API server's serving certificate and the client certificates (the API server trusts it
// as --client-ca-file), an admin in system:masters, and the key pair that signs service-account tokens.

import { generateKeyPairSync } from 'node:crypto';
import { createCertificateAuthority, issueCertificate, type KeyPairPem } from '../../contracts/pki.ts';

export const ADMIN_USER = 'tollgate-admin';
export const ADMIN_GROUPS = ['system:masters'];

export interface ClusterCredentials {
  ca: KeyPairPem;
  serving: KeyPairPem;
  admin: KeyPairPem;
  serviceAccount: { publicKeyPem: string; privateKeyPem: string };
}

// The first address of --service-cluster-ip-range: in-cluster clients reach `kubernetes.default` there.
export const KUBERNETES_SERVICE_IP = '10.0.0.1';

const VALIDITY_HOURS = 24;

export async function createClusterCredentials(): Promise<ClusterCredentials> {
  const ca = await createCertificateAuthority({ commonName: 'tollgate-test-cluster-ca', validityHours: VALIDITY_HOURS });
  const serving = await issueCertificate(ca, {
    commonName: 'kube-apiserver',
    dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
    ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP],
    usage: 'server',
    validityHours: VALIDITY_HOURS,
  });
  const admin = await issueUserCertificate(ca, ADMIN_USER, ADMIN_GROUPS);
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { ca, serving, admin, serviceAccount: { publicKeyPem: publicKey, privateKeyPem: privateKey } };
}

/** A client certificate the API server maps to user `user` (CN) in `groups` (O). */
export function issueUserCertificate(ca: KeyPairPem, user: string, groups: string[] = []): Promise<KeyPairPem> {
  return issueCertificate(ca, { commonName: user, organizations: groups, usage: 'client', validityHours: VALIDITY_HOURS });
}
