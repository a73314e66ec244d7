// cert-manager mode: the serving certificate comes from files (a mounted Secret) and is re-read when they
// change. Kubelet swaps a Secret volume by renaming a `..data` symlink, which fs.watch sees as an event on the
// directory; a slow poll backs it up, because inotify events on symlinked volumes are not guaranteed.

import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { KeyPairPem } from '../../../contracts/pki.ts';

export interface CertificateFilesOptions {
  directory: string;
  certFile?: string;
  keyFile?: string;
  logger: Logger;
  pollIntervalMs?: number;
  onServingCertificate(keyPair: KeyPairPem): void;
}

export interface CertificateFiles {
  /** Reads the files now; throws when they are missing or unreadable. */
  load(): Promise<KeyPairPem>;
  start(): Promise<void>;
  stop(): void;
}

export function certificateFiles(opts: CertificateFilesOptions): CertificateFiles {
  const certPath = join(opts.directory, opts.certFile ?? 'tls.crt');
  const keyPath = join(opts.directory, opts.keyFile ?? 'tls.key');
  const log = opts.logger.child({ component: 'webhook-certificates', directory: opts.directory });
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  let current: string | undefined;
  let debounce: NodeJS.Timeout | undefined;

  async function load(): Promise<KeyPairPem> {
    const [certPem, keyPem] = await Promise.all([readFile(certPath, 'utf8'), readFile(keyPath, 'utf8')]);
    return { certPem, keyPem };
  }

  async function refresh(): Promise<void> {
    let pair: KeyPairPem;
    try {
      pair = await load();
    } catch (error) {
      log.warn({ err: error }, 'cannot read the serving certificate files; keeping the current certificate');
      return;
    }
    const fingerprint = pair.certPem + pair.keyPem;
    if (fingerprint === current) return;
    try {
      opts.onServingCertificate(pair);
      current = fingerprint;
      log.info('serving certificate reloaded from files');
    } catch (error) {
      // A half-written pair (certificate renewed, key not yet) fails here; the next event or poll retries.
      log.warn({ err: error }, 'serving certificate files rejected; keeping the current certificate');
    }
  }

  return {
    load,
    async start() {
      const first = await load();
      opts.onServingCertificate(first);
      current = first.certPem + first.keyPem;
      try {
        watcher = watch(opts.directory, () => {
          clearTimeout(debounce);
          debounce = setTimeout(() => void refresh(), 100);
        });
        watcher.on('error', (error) => log.warn({ err: error }, 'certificate directory watch failed; polling only'));
      } catch (error) {
        log.warn({ err: error }, 'cannot watch the certificate directory; polling only');
      }
      timer = setInterval(() => void refresh(), opts.pollIntervalMs ?? 30_000);
      timer.unref();
    },
    stop() {
      watcher?.close();
      clearInterval(timer);
      clearTimeout(debounce);
    },
  };
}
