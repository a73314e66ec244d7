// The push server's TLS certificate: either files given on the command line, or a CA and serving certificate
// the operator generates and keeps in a Secret of its own namespace (tls.crt, tls.key, ca.crt), shared by
// every replica and renewed when less than a third of its life is left. Sidecars trust ca.crt.

import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { certificateNotAfter, createCertificateAuthority, issueCertificate } from '../../../contracts/pki.ts';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { hasOwnerReference, type OwnerReference, withOwnerReference } from '../../../kube-client/owner-reference.ts';

export type TlsSource =
  | { kind: 'files'; certFile: string; keyFile: string; /** The CA sidecars trust (cert-manager's ca.crt), published for the webhook. */ caFile?: string }
  | { kind: 'secret'; namespace: string; name: string; dnsNames: string[]; ipAddresses: string[] };

export interface ServingCertificate {
  certPem: string;
  keyPem: string;
  /** The CA sidecars must trust, when the operator manages it. */
  caPem?: string;
}

const VALIDITY_HOURS = 24 * 365;

/** `owner`, when given, is named in the generated Secret's ownerReferences (ADR 0807); an older Secret gets it here. */
export async function loadServingCertificate(source: TlsSource, api: KubeApi, logger: Logger, owner?: OwnerReference): Promise<ServingCertificate> {
  if (source.kind === 'files') {
    const [certPem, keyPem, caPem] = await Promise.all([
      readFile(source.certFile, 'utf8'),
      readFile(source.keyFile, 'utf8'),
      // Some issuers write no ca.crt; the webhook then reports what it waits for, and the push still serves.
      source.caFile
        ? readFile(source.caFile, 'utf8').catch((error: unknown) => {
            logger.warn({ file: source.caFile, err: (error as Error).message }, 'cannot read the CA file (--tls-ca); the webhook cannot give sidecars a CA');
            return undefined;
          })
        : undefined,
    ]);
    return { certPem, keyPem, ...(caPem ? { caPem } : {}) };
  }
  const path = `/api/v1/namespaces/${source.namespace}/secrets/${source.name}`;
  let existing: { metadata: { resourceVersion?: string; ownerReferences?: OwnerReference[] }; data?: Record<string, string> } | undefined;
  try {
    existing = await api.get(path);
  } catch (error) {
    if (!isStatus(error, 404)) throw error;
  }
  const decode = (key: string) => (existing?.data?.[key] ? Buffer.from(existing.data[key], 'base64').toString('utf8') : undefined);
  const certPem = decode('tls.crt');
  const keyPem = decode('tls.key');
  const caPem = decode('ca.crt');
  if (certPem && keyPem && caPem && !expiresSoon(certPem)) {
    if (existing && !hasOwnerReference(existing.metadata, owner)) {
      // Written before the chart named an owner: adopt it, keeping the certificate sidecars already trust.
      await api.put(path, { apiVersion: 'v1', kind: 'Secret', ...existing, metadata: withOwnerReference(existing.metadata, owner) });
      logger.info({ secret: `${source.namespace}/${source.name}`, owner: owner?.name }, 'owner reference added');
    }
    return { certPem, keyPem, caPem };
  }

  const ca = await createCertificateAuthority({ commonName: 'tollgate-operator-ca', validityHours: VALIDITY_HOURS });
  const leaf = await issueCertificate(ca, {
    commonName: source.dnsNames[0] ?? 'tollgate-operator',
    dnsNames: source.dnsNames,
    ipAddresses: source.ipAddresses,
    usage: 'server',
    validityHours: VALIDITY_HOURS,
  });
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: {
      name: source.name,
      namespace: source.namespace,
      labels: { 'app.kubernetes.io/managed-by': 'tollgate-operator' },
      ...(existing ? { resourceVersion: existing.metadata.resourceVersion } : {}),
      ...(existing?.metadata.ownerReferences ? { ownerReferences: existing.metadata.ownerReferences } : {}),
    },
    data: {
      'tls.crt': Buffer.from(leaf.certPem).toString('base64'),
      'tls.key': Buffer.from(leaf.keyPem).toString('base64'),
      'ca.crt': Buffer.from(ca.certPem).toString('base64'),
    },
  };
  secret.metadata = withOwnerReference(secret.metadata, owner);
  if (existing) await api.put(path, secret);
  else await api.post(`/api/v1/namespaces/${source.namespace}/secrets`, secret);
  logger.info({ secret: `${source.namespace}/${source.name}`, dnsNames: source.dnsNames }, 'generated push server certificate');
  return { certPem: leaf.certPem, keyPem: leaf.keyPem, caPem: ca.certPem };
}

/** The CA the leader keeps in the Secret, if there is one yet (self-managed certificates only). */
export async function storedCa(source: TlsSource, api: KubeApi): Promise<string | undefined> {
  if (source.kind !== 'secret') return undefined;
  try {
    const secret = await api.get<{ data?: Record<string, string> }>(`/api/v1/namespaces/${source.namespace}/secrets/${source.name}`);
    const ca = secret.data?.['ca.crt'];
    return ca ? Buffer.from(ca, 'base64').toString('utf8') : undefined;
  } catch (error) {
    if (isStatus(error, 404)) return undefined;
    throw error;
  }
}

function expiresSoon(certPem: string): boolean {
  try {
    const notAfter = certificateNotAfter(certPem).getTime();
    return notAfter - Date.now() < (VALIDITY_HOURS * 3_600_000) / 3;
  } catch {
    return true;
  }
}
