// cert-manager mode on real files and a real HTTPS listener: a renewed Secret volume (files replaced the way
// kubelet does it, by swapping a symlinked directory) is picked up and served without a restart.

import { mkdtempSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildWebhookApp, reloadServingCertificate } from '../app.ts';
import { createCertificateAuthority, issueCertificate, type KeyPairPem } from '../../../contracts/pki.ts';
import { TEST_DEFAULTS } from '../../testdata/sidecar-defaults.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { certificateFiles, type CertificateFiles } from './certificate-files.ts';

const silent = pino({ level: 'silent' });
let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function leaf(commonName: string): Promise<KeyPairPem> {
  const ca = await createCertificateAuthority({ commonName: `${commonName}-ca` });
  return issueCertificate(ca, { commonName, ipAddresses: ['127.0.0.1'], usage: 'server' });
}

/** Lays out a folder like a kubelet Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>. */
function writeVolume(dir: string, pair: KeyPairPem, generation: number): void {
  const version = join(dir, `..v${generation}`);
  mkdirSync(version);
  writeFileSync(join(version, 'tls.crt'), pair.certPem);
  writeFileSync(join(version, 'tls.key'), pair.keyPem);
  const tmpLink = join(dir, '..data_tmp');
  symlinkSync(`..v${generation}`, tmpLink);
  renameSync(tmpLink, join(dir, '..data'));
  if (generation === 1) {
    symlinkSync('..data/tls.crt', join(dir, 'tls.crt'));
    symlinkSync('..data/tls.key', join(dir, 'tls.key'));
  }
}

function servedCommonName(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()!.subject);
      socket.end();
    });
    socket.on('error', reject);
  });
}

describe('certificate files (cert-manager mode)', () => {
  it('serves the renewed certificate after the volume is swapped, without restarting', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-webhook-tls-'));
    writeVolume(dir, await leaf('first'), 1);

    let app: ReturnType<typeof buildWebhookApp> | undefined;
    const files: CertificateFiles = certificateFiles({
      directory: dir,
      logger: silent,
      pollIntervalMs: 200,
      onServingCertificate: (pair) => {
        if (app) reloadServingCertificate(app, pair);
      },
    });
    const initial = await files.load();
    app = buildWebhookApp({
      logger: silent,
      tls: initial,
      admission: {
        logger: silent,
        ownNamespace: 'tollgate-system',
        defaults: () => TEST_DEFAULTS,
        operatorCaPem: () => '',
        nativeSidecarSupported: () => true,
        namespaceLabels: async () => ({}),
      },
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    cleanup.push(() => app.close());
    await files.start();
    cleanup.push(() => files.stop());
    const port = (app.server.address() as { port: number }).port;
    expect(await servedCommonName(port)).toBe('CN=first');

    writeVolume(dir, await leaf('second'), 2);
    const name = await waitFor(
      'the new certificate to be served',
      async () => {
        const served = await servedCommonName(port);
        return served === 'CN=second' && served;
      },
      10_000,
    );
    expect(name).toBe('CN=second');
  });

  it('refuses to start without readable certificate files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-webhook-tls-'));
    const seen: string[] = [];
    const files = certificateFiles({ directory: dir, logger: silent, onServingCertificate: (p) => seen.push(p.certPem) });
    await expect(files.start()).rejects.toThrow(/ENOENT/);
    expect(seen).toEqual([]);
  });
});
