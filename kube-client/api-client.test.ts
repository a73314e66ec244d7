// KubeApi's connections to the API server: a loopback HTTPS server with a client-certificate check stands in
// for it, and counts TLS handshakes. Many requests share a few connections; a token read from a file is sent
// as it is at the time of each request; a rotated client certificate is used by the next request.

import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate, type KeyPairPem } from '../contracts/pki.ts';
import { KubeApi } from './api-client.ts';

let ca: KeyPairPem;
let serving: KeyPairPem;
let server: Server | undefined;
const handshakes: string[] = [];
const seen: { user: string; authorization: string | undefined }[] = [];

beforeAll(async () => {
  ca = await createCertificateAuthority({ commonName: 'api-client-test-ca' });
  serving = await issueCertificate(ca, { commonName: 'kube-apiserver', ipAddresses: ['127.0.0.1'], usage: 'server' });
});

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server?.closeAllConnections();
  handshakes.length = 0;
  seen.length = 0;
});

async function startServer(): Promise<string> {
  server = createServer({ key: serving.keyPem, cert: serving.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    seen.push({ user: String(peer.subject?.CN ?? ''), authorization: req.headers.authorization });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"kind":"Status","status":"Success"}');
  });
  server.on('secureConnection', (socket: TLSSocket) => handshakes.push(String(socket.getPeerCertificate().subject?.CN ?? '')));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function kubeConfig(serverUrl: string, user: { certFile?: string; keyFile?: string; authProvider?: { name: string; config: Record<string, string> } }): KubeConfig {
  const dir = mkdtempSync(join(tmpdir(), 'kube-api-test-'));
  const caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, ca.certPem);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: serverUrl, caFile }],
    users: [{ name: 'u', ...user }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

async function clientCertificate(dir: string, cn: string): Promise<{ certFile: string; keyFile: string }> {
  const pair = await issueCertificate(ca, { commonName: cn, usage: 'client' });
  writeFileSync(join(dir, 'tls.crt'), pair.certPem);
  writeFileSync(join(dir, 'tls.key'), pair.keyPem);
  return { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
}

describe('KubeApi connections', () => {
  it('reuses its connections: a burst of 200 requests costs a bounded number of TLS handshakes, not one each', async () => {
    const url = await startServer();
    const dir = mkdtempSync(join(tmpdir(), 'kube-api-cert-'));
    const api = new KubeApi(kubeConfig(url, await clientCertificate(dir, 'operator')));
    await Promise.all(Array.from({ length: 200 }, () => api.post('/apis/authentication.k8s.io/v1/tokenreviews', { spec: {} })));
    for (let i = 0; i < 20; i++) await api.get('/api/v1/namespaces/default');
    expect(seen).toHaveLength(220);
    expect(seen.every((s) => s.user === 'operator')).toBe(true);
    expect(handshakes.length).toBeGreaterThan(0);
    expect(handshakes.length).toBeLessThanOrEqual(32);
  });

  it('sends the token the file holds at each request, and a rotated client certificate on the next connection', async () => {
    const url = await startServer();
    const dir = mkdtempSync(join(tmpdir(), 'kube-api-cert-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'first-token');
    const cert = await clientCertificate(dir, 'before');
    // As loadFromCluster() configures the projected token the kubelet rotates.
    const api = new KubeApi(kubeConfig(url, { ...cert, authProvider: { name: 'tokenFile', config: { tokenFile } } }));
    await api.get('/version');
    writeFileSync(tokenFile, 'second-token');
    await clientCertificate(dir, 'after');
    expect(readFileSync(cert.certFile, 'utf8')).toContain('BEGIN CERTIFICATE');
    await api.get('/version');
    expect(seen.map((s) => s.user)).toEqual(['before', 'after']);
    // client-node caches a token file's content for up to a minute; what it hands over is what is sent.
    expect(seen[0]!.authorization).toBe('Bearer first-token');
    expect(seen[1]!.authorization).toMatch(/^Bearer (first|second)-token$/);
  });
});
