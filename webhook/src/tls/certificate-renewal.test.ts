import { describe, expect, it } from 'vitest';
import { certificateNotAfter, isIssuedBy } from '../../../contracts/pki.ts';
import { caBundlePem, renewCertificates, type RenewalPolicy } from './certificate-renewal.ts';

const HOUR = 3_600_000;
const policy = (now: number, extra: Partial<RenewalPolicy> = {}): RenewalPolicy => ({
  now,
  caValidityHours: 300,
  servingValidityHours: 30,
  renewFraction: 1 / 3,
  propagationMs: 60_000,
  dnsNames: ['tollgate-webhook.tollgate-system.svc'],
  ipAddresses: ['127.0.0.1'],
  ...extra,
});

describe('renewCertificates', () => {
  it('creates a CA and a serving certificate it signed, and trusts the CA', async () => {
    const { state, changes } = await renewCertificates({ trustedCas: [] }, policy(Date.now()));
    expect(changes).toEqual(['ca', 'serving']);
    expect(isIssuedBy(state.serving!.certPem, state.ca!.certPem)).toBe(true);
    expect(caBundlePem(state)).toBe(state.ca!.certPem);
  });

  it('changes nothing while certificates are fresh', async () => {
    const first = await renewCertificates({ trustedCas: [] }, policy(Date.now()));
    const second = await renewCertificates(first.state, policy(Date.now()));
    expect(second.changes).toEqual([]);
    expect(second.state.serving!.certPem).toBe(first.state.serving!.certPem);
  });

  it('renews the serving certificate from the same CA once two thirds of its life are gone', async () => {
    const { state } = await renewCertificates({ trustedCas: [] }, policy(Date.now()));
    const later = Date.now() + 21 * HOUR;
    const renewed = await renewCertificates(state, policy(later));
    expect(renewed.changes).toEqual(['serving']);
    expect(isIssuedBy(renewed.state.serving!.certPem, state.ca!.certPem)).toBe(true);
    expect(caBundlePem(renewed.state)).toBe(caBundlePem(state)); // no caBundle change, no propagation window
  });

  it('rotates the CA in two steps: trust both, switch the serving certificate only after propagation', async () => {
    const { state } = await renewCertificates({ trustedCas: [] }, policy(Date.now()));
    const published = { ...state, bundlePublishedAt: Date.now() };
    const step1 = await renewCertificates(published, policy(Date.now(), { force: 'ca' }));
    expect(step1.changes).toContain('ca');
    expect(step1.state.trustedCas).toHaveLength(2);
    expect(step1.state.bundlePublishedAt).toBeUndefined();
    expect(step1.state.serving!.certPem).toBe(state.serving!.certPem); // still the old CA's certificate

    const notYet = await renewCertificates({ ...step1.state, bundlePublishedAt: Date.now() }, policy(Date.now()));
    expect(notYet.changes).toEqual([]);

    const after = await renewCertificates({ ...step1.state, bundlePublishedAt: Date.now() - 61_000 }, policy(Date.now()));
    expect(after.changes).toEqual(['serving']);
    expect(isIssuedBy(after.state.serving!.certPem, step1.state.ca!.certPem)).toBe(true);
  });

  it('drops an expired CA from the bundle and re-issues a certificate it no longer covers', async () => {
    const { state } = await renewCertificates({ trustedCas: [] }, policy(Date.now()));
    const afterCaExpiry = certificateNotAfter(state.ca!.certPem).getTime() + HOUR;
    const renewed = await renewCertificates(state, policy(afterCaExpiry));
    expect(renewed.changes).toEqual(['ca', 'trust', 'serving']);
    expect(renewed.state.trustedCas).toEqual([renewed.state.ca!.certPem]);
  });
});
