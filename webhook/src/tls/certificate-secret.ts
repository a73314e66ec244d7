// The self-managed certificate state as a Secret (so every replica serves the same certificate and a restart
// keeps it), and its mapping to and from CertificateState.

import type { V1Secret } from '@kubernetes/client-node';
import type { CertificateState } from './certificate-renewal.ts';

export const PUBLISHED_AT_ANNOTATION = 'tollgate.dev/ca-bundle-published-at';

const b64 = (text: string) => Buffer.from(text).toString('base64');
const unb64 = (text: string | undefined) => (text === undefined ? undefined : Buffer.from(text, 'base64').toString('utf8'));

function splitPems(bundle: string | undefined): string[] {
  return (bundle ?? '').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n?/g)?.map((p) => (p.endsWith('\n') ? p : `${p}\n`)) ?? [];
}

export function stateFromSecret(secret: V1Secret | undefined): CertificateState {
  const data = secret?.data ?? {};
  const caCert = unb64(data['ca.crt']);
  const caKey = unb64(data['ca.key']);
  const tlsCert = unb64(data['tls.crt']);
  const tlsKey = unb64(data['tls.key']);
  const publishedAt = Date.parse(secret?.metadata?.annotations?.[PUBLISHED_AT_ANNOTATION] ?? '');
  return {
    ...(caCert && caKey ? { ca: { certPem: caCert, keyPem: caKey } } : {}),
    ...(tlsCert && tlsKey ? { serving: { certPem: tlsCert, keyPem: tlsKey } } : {}),
    trustedCas: splitPems(unb64(data['ca-bundle.crt'])),
    ...(Number.isFinite(publishedAt) ? { bundlePublishedAt: publishedAt } : {}),
  };
}

export function secretFromState(state: CertificateState, meta: { name: string; namespace: string; resourceVersion?: string; labels?: Record<string, string> }): V1Secret {
  const data: Record<string, string> = { 'ca-bundle.crt': b64(state.trustedCas.join('')) };
  if (state.ca) Object.assign(data, { 'ca.crt': b64(state.ca.certPem), 'ca.key': b64(state.ca.keyPem) });
  if (state.serving) Object.assign(data, { 'tls.crt': b64(state.serving.certPem), 'tls.key': b64(state.serving.keyPem) });
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: meta.name,
      namespace: meta.namespace,
      ...(meta.resourceVersion ? { resourceVersion: meta.resourceVersion } : {}),
      ...(meta.labels ? { labels: meta.labels } : {}),
      ...(state.bundlePublishedAt !== undefined ? { annotations: { [PUBLISHED_AT_ANNOTATION]: new Date(state.bundlePublishedAt).toISOString() } } : {}),
    },
    data,
  };
}
