// When to make a new CA or serving certificate. The order is what keeps admission working during rotation:
// a new CA is first added to the trusted bundle next to the old one; only once that bundle has been published
// in the webhook configuration for `propagationMs` does the serving certificate switch to the new CA.
// Serving certificates are renewed from the same CA, which needs no bundle change at all.

import { X509Certificate } from 'node:crypto';
import { certificateNotAfter, createCertificateAuthority, isIssuedBy, issueCertificate, type KeyPairPem } from '../../../contracts/pki.ts';

export interface CertificateState {
  /** The CA that signs new serving certificates. */
  ca?: KeyPairPem;
  /** Every CA the API server must trust (PEMs): the signing CA plus older ones still valid. */
  trustedCas: string[];
  serving?: KeyPairPem;
  /** When the webhook configuration's caBundle was first seen to hold the signing CA (ms since epoch). */
  bundlePublishedAt?: number | undefined;
}

export interface RenewalPolicy {
  now: number;
  caValidityHours: number;
  servingValidityHours: number;
  /** Renew when less than this fraction of the validity is left (Vault and cert-manager use about 1/3). */
  renewFraction: number;
  /** How long after publishing a new CA bundle the API server is assumed to have picked it up. */
  propagationMs: number;
  dnsNames: string[];
  ipAddresses: string[];
  /** Forced rotation (a compromised key, or tests): treat this certificate as expiring now. */
  force?: 'ca' | 'serving';
}

export type RenewalChange = 'ca' | 'serving' | 'trust';

function expiresSoon(certPem: string, validityHours: number, policy: RenewalPolicy): boolean {
  const remaining = certificateNotAfter(certPem).getTime() - policy.now;
  return remaining < validityHours * 3_600_000 * policy.renewFraction;
}

function stillValid(certPem: string, now: number): boolean {
  return certificateNotAfter(certPem).getTime() > now;
}

function sameCertificate(a: string, b: string): boolean {
  return new X509Certificate(a).fingerprint256 === new X509Certificate(b).fingerprint256;
}

export async function renewCertificates(current: CertificateState, policy: RenewalPolicy): Promise<{ state: CertificateState; changes: RenewalChange[] }> {
  let state: CertificateState = { ...current, trustedCas: [...current.trustedCas] };
  const changes: RenewalChange[] = [];

  if (!state.ca || policy.force === 'ca' || expiresSoon(state.ca.certPem, policy.caValidityHours, policy)) {
    const ca = await createCertificateAuthority({ commonName: 'tollgate-webhook-ca', validityHours: policy.caValidityHours });
    state = { ...state, ca, trustedCas: [ca.certPem, ...state.trustedCas], bundlePublishedAt: undefined };
    changes.push('ca');
  }
  const ca = state.ca!;

  const kept = state.trustedCas.filter((pem, i, all) => stillValid(pem, policy.now) && all.findIndex((o) => sameCertificate(o, pem)) === i);
  if (!kept.some((pem) => sameCertificate(pem, ca.certPem))) kept.unshift(ca.certPem);
  if (kept.length !== state.trustedCas.length) changes.push('trust');
  state.trustedCas = kept;

  const serving = state.serving;
  const servingTrusted = serving !== undefined && state.trustedCas.some((pem) => isIssuedBy(serving.certPem, pem));
  const caPublished = state.bundlePublishedAt !== undefined && policy.now - state.bundlePublishedAt >= policy.propagationMs;
  const onOldCa = serving !== undefined && !isIssuedBy(serving.certPem, ca.certPem);
  // A certificate from the previous CA stays in use until the new CA has been published long enough, even
  // when it is due for renewal: switching early is exactly the window in which admissions would fail.
  const needServing =
    !serving ||
    !servingTrusted ||
    !stillValid(serving.certPem, policy.now) ||
    policy.force === 'serving' ||
    (onOldCa ? caPublished : expiresSoon(serving.certPem, policy.servingValidityHours, policy));
  if (needServing) {
    const commonName = policy.dnsNames[0] ?? policy.ipAddresses[0] ?? 'tollgate-webhook';
    state.serving = await issueCertificate(ca, {
      commonName,
      dnsNames: policy.dnsNames,
      ipAddresses: policy.ipAddresses,
      usage: 'server',
      validityHours: policy.servingValidityHours,
    });
    changes.push('serving');
  }
  return { state, changes };
}

/** The caBundle the webhook configuration must carry: every trusted CA, concatenated. */
export function caBundlePem(state: CertificateState): string {
  return state.trustedCas.join('');
}
