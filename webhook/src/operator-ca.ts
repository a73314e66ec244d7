// The operator's CA certificate: watched through the API in the ConfigMap the operator publishes it in (ADR
// 0809), or read from a file and re-read when it changes (outside a cluster). It may not exist yet when the
// webhook starts (the operator creates it): admission then fails with 500 and the failurePolicy applies, rather
// than injecting a sidecar that could never verify the operator.

import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import type { KubeApi, KubeObject } from '../../kube-client/api-client.ts';
import { Informer } from '../../kube-client/informer.ts';
import { AdmissionUnavailableError } from './admission/pod-admission.ts';

export interface OperatorCa {
  /** The PEM; throws AdmissionUnavailableError when there is none. */
  current(): string;
  /** Whether current() would return a certificate. */
  loaded(): boolean;
  /** Where it comes from, for the readiness probe's answer. */
  describe(): string;
  stop(): void;
}

const PEM = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

/** The ConfigMap key the operator writes the CA under (operator/src/tls/ca-publication.ts). */
const CA_KEY = 'ca.crt';

/**
 * The CA from the operator's ConfigMap, watched (list and watch of that one name, which is all the webhook's
 * Role allows), so it is loaded the moment the operator writes it. A deleted ConfigMap leaves the loaded CA in
 * place: running replicas keep injecting what they had (ADR 0808).
 */
export function operatorCaFromConfigMap(opts: { api: KubeApi; namespace: string; name: string; logger: Logger }): OperatorCa {
  const { logger, namespace, name } = opts;
  const where = `ConfigMap ${namespace}/${name}`;
  let pem: string | undefined;
  const informer = new Informer<KubeObject & { data?: Record<string, string> }>({
    api: opts.api,
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
    fieldSelector: `metadata.name=${name}`,
    logger: logger.child({ informer: where }),
  });
  const take = (cm: { data?: Record<string, string> }) => {
    const text = cm.data?.[CA_KEY];
    if (!text || !PEM.test(text)) {
      logger.warn({ configMap: where }, `operator CA ConfigMap holds no PEM certificate under ${CA_KEY}`);
      return;
    }
    if (text !== pem) logger.info({ configMap: where }, pem === undefined ? 'operator CA loaded' : 'operator CA reloaded');
    pem = text;
  };
  informer.on({ add: take, update: take });
  informer.start();
  return {
    current() {
      if (pem === undefined) throw new AdmissionUnavailableError(`operator CA (${where}) is not available yet`);
      return pem;
    },
    loaded: () => pem !== undefined,
    describe: () => where,
    stop() {
      void informer.stop();
    },
  };
}

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
    describe: () => path,
    stop() {
      unwatchFile(path, load);
    },
  };
}
