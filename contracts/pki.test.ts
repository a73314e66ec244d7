import { X509Certificate } from 'node:crypto';
import { createServer } from 'node:https';
import { connect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { certificateNotAfter, createCertificateAuthority, isIssuedBy, issueCertificate } from './pki.ts';

describe('pki', () => {
  it('issues a serving certificate that a TLS client trusting only the CA accepts for 127.0.0.1', async () => {
    const ca = await createCertificateAuthority({ commonName: 'tollgate-test-ca' });
    const leaf = await issueCertificate(ca, {
      commonName: 'tollgate-webhook',
      dnsNames: ['tollgate-webhook.tollgate.svc'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validityHours: 2,
    });
    const server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const authorized = await new Promise<boolean>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca: ca.certPem }, () => {
          resolve(socket.authorized);
          socket.end();
        });
        socket.on('error', reject);
      });
      expect(authorized).toBe(true);
    } finally {
      server.close();
    }
    expect(isIssuedBy(leaf.certPem, ca.certPem)).toBe(true);
    const hours = (certificateNotAfter(leaf.certPem).getTime() - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(1.9);
    expect(hours).toBeLessThanOrEqual(2);
  });

  it('puts organizations in the subject (Kubernetes reads groups from O) and marks client certificates', async () => {
    const ca = await createCertificateAuthority({ commonName: 'ca' });
    const client = await issueCertificate(ca, { commonName: 'admin', organizations: ['system:masters'], usage: 'client' });
    const cert = new X509Certificate(client.certPem);
    expect(cert.subject).toContain('CN=admin');
    expect(cert.subject).toContain('O=system:masters');
    expect(cert.keyUsage).toContain('1.3.6.1.5.5.7.3.2');
  });

  it('tells a certificate from another CA apart', async () => {
    const a = await createCertificateAuthority({ commonName: 'a' });
    const b = await createCertificateAuthority({ commonName: 'b' });
    const leaf = await issueCertificate(a, { commonName: 'x', usage: 'server' });
    expect(isIssuedBy(leaf.certPem, b.certPem)).toBe(false);
  });
});
