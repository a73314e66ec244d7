// Certificates for Tollgate's own TLS: the webhook's serving certificate, the operator's config-push
// channel, and the test control plane. ECDSA P-256 keys through WebCrypto: generation takes milliseconds,
// so certificates can be short-lived and rotated often instead of baked in at build time.

import 'reflect-metadata'; // @peculiar/x509 resolves its ASN.1 classes through tsyringe, which needs it
import { createPrivateKey, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

type CryptoKey = webcrypto.CryptoKey;

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface CertificateRequest {
  commonName: string;
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client';
  validityHours?: number;
}

const SIGNING = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
// Backdate notBefore so a peer whose clock runs slightly behind does not reject a fresh certificate.
const CLOCK_SKEW_MS = 5 * 60_000;

function subject(commonName: string, organizations: string[] = []): string {
  const escape = (value: string) => value.replace(/([,+"\\<>;=])/g, '\\$1');
  return [`CN=${escape(commonName)}`, ...organizations.map((o) => `O=${escape(o)}`)].join(', ');
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }) as string;
}

async function importKeyPem(keyPem: string): Promise<CryptoKey> {
  const der = createPrivateKey(keyPem).export({ format: 'der', type: 'pkcs8' });
  return webcrypto.subtle.importKey('pkcs8', der, SIGNING, true, ['sign']);
}

function validity(hours: number): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: new Date(now - CLOCK_SKEW_MS), notAfter: new Date(now + hours * 3_600_000) };
}

export async function createCertificateAuthority(opts: { commonName: string; validityHours?: number }): Promise<KeyPairPem> {
  const keys = await webcrypto.subtle.generateKey(SIGNING, true, ['sign', 'verify']);
  const name = subject(opts.commonName);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: name,
    issuer: name,
    ...validity(opts.validityHours ?? 24 * 365),
    signingAlgorithm: SIGNING,
    publicKey: keys.publicKey,
    signingKey: keys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

export async function issueCertificate(ca: KeyPairPem, req: CertificateRequest): Promise<KeyPairPem> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const keys = await webcrypto.subtle.generateKey(SIGNING, true, ['sign', 'verify']);
  const altNames: x509.JsonGeneralName[] = [
    ...(req.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(req.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([req.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth], false),
    await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
  ];
  if (altNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: subject(req.commonName, req.organizations),
    issuer: caCert.subject,
    ...validity(req.validityHours ?? 24 * 30),
    signingAlgorithm: SIGNING,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions,
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

export function certificateNotAfter(certPem: string): Date {
  return new Date(new X509Certificate(certPem).validTo);
}

/** True when `certPem` was signed by the CA in `caPem` (used to notice a caBundle that drifted). */
export function isIssuedBy(certPem: string, caPem: string): boolean {
  const cert = new X509Certificate(certPem);
  const ca = new X509Certificate(caPem);
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

function serial(): string {
  // 16 random bytes with the top bit cleared: a positive serial, as RFC 5280 requires
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f;
  return Buffer.from(bytes).toString('hex');
}
