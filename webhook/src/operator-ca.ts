// The operator's CA certificate, read from a file (a mounted Secret or ConfigMap) and re-read when it changes.
// It may not exist yet when the webhook starts (the operator creates it): admission then fails with 500 and
// the failurePolicy applies, rather than injecting a sidecar that could never verify the operator.

import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import { AdmissionUnavailableError } from './admission/pod-admission.ts';

export interface OperatorCa {
  /** The PEM; throws AdmissionUnavailableError when there is none. */
  current(): string;
  /** Whether current() would return a certificate. */
  loaded(): boolean;
  stop(): void;
}

const PEM = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

export function operatorCaFromFile(path: string, logger: Logger, pollMs = 10_000): OperatorCa {
  let pem: string | undefined;
  let reported = false;
  const load = () => {
    try {
      const text = readFileSync(path, 'utf8');
      if (!PEM.test(text)) {
        if (!reported) logger.warn({ path }, 'operator CA file holds no PEM certificate');
        reported = true;
        return;
      }
      if (text !== pem) logger.info({ path }, pem === undefined ? 'operator CA loaded' : 'operator CA reloaded');
      pem = text;
    } catch (error) {
      if (pem === undefined && !reported) logger.warn({ path, err: error }, 'operator CA not readable yet');
      reported = true;
    }
  };
  load();
  watchFile(path, { interval: pollMs, persistent: false }, load);
  return {
    current() {
      if (pem === undefined) throw new AdmissionUnavailableError(`operator CA ${path} is not available yet`);
      return pem;
    },
    loaded() {
      // Asked by the readiness probe: look again now rather than wait for the next poll.
      if (pem === undefined) load();
      return pem !== undefined;
    },
    stop() {
      unwatchFile(path, load);
    },
  };
}
