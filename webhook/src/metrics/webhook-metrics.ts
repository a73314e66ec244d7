// The webhook's Prometheus metrics, served on its HTTPS port next to /mutate (docs/observability.md#webhook):
// admissions by outcome and skip reason, and when its certificates expire.

import { X509Certificate } from 'node:crypto';
import { collectDefaultMetrics, Counter, Gauge, Registry, type RegistryContentType } from 'prom-client';
import { MetricsExposition } from '../../../contracts/metrics-exposition.ts';
import type { SkipReason } from '../predicates.ts';

export type AdmissionOutcome = 'injected' | 'skipped' | 'refused' | 'error';

const SKIP_REASONS: readonly SkipReason[] = ['SystemNamespace', 'TollgateNamespace', 'OptedOut', 'NotOptedIn', 'HostNetwork', 'AlreadyInjected'];

/** PEM certificates in use now; read at scrape time. */
export interface CertificateSource {
  serving?: () => string | undefined;
  ca?: () => string | undefined;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * When the latest certificate in a PEM bundle expires: a CA bundle holds the old CA next to the new one while
 * it rotates, and the new one is what matters. For a serving certificate, the leaf comes first and decides.
 */
function notAfterSeconds(pem: string | undefined, which: 'leaf' | 'latest'): number | undefined {
  if (pem === undefined) return undefined;
  const blocks = which === 'leaf' ? (pem.match(PEM_BLOCK) ?? []).slice(0, 1) : (pem.match(PEM_BLOCK) ?? []);
  let latest: number | undefined;
  for (const block of blocks) {
    try {
      const seconds = Date.parse(new X509Certificate(block).validTo) / 1000;
      if (latest === undefined || seconds > latest) latest = seconds;
    } catch {
      // not a certificate we can read: not reported
    }
  }
  return latest;
}

export class WebhookMetrics {
  readonly registry: Registry<RegistryContentType> = new Registry();
  readonly exposition = new MetricsExposition(this.registry);
  readonly #admissions: Counter<'outcome' | 'reason'>;
  #certificates: CertificateSource = {};

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#admissions = new Counter({
      name: 'tollgate_webhook_admissions_total',
      help: 'Pod admissions by outcome (injected, skipped, refused, error) and, for skips, the reason.',
      labelNames: ['outcome', 'reason'],
      registers,
    });
    // Zero series for every outcome exist from the start, so rate() and absent() behave before the first pod.
    this.#admissions.inc({ outcome: 'injected', reason: '' }, 0);
    for (const reason of SKIP_REASONS) this.#admissions.inc({ outcome: 'skipped', reason }, 0);
    this.#admissions.inc({ outcome: 'refused', reason: '' }, 0);
    this.#admissions.inc({ outcome: 'error', reason: '' }, 0);
    const expiry: Gauge<'certificate'> = new Gauge({
      name: 'tollgate_webhook_certificate_expiry_timestamp_seconds',
      help: "When the webhook's certificates stop being valid (Unix seconds): its serving certificate and, self-managed, its CA.",
      labelNames: ['certificate'],
      registers,
      collect: () => {
        expiry.reset();
        const serving = notAfterSeconds(this.#certificates.serving?.(), 'leaf');
        const ca = notAfterSeconds(this.#certificates.ca?.(), 'latest');
        if (serving !== undefined) expiry.set({ certificate: 'serving' }, serving);
        if (ca !== undefined) expiry.set({ certificate: 'ca' }, ca);
      },
    });
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  watchCertificates(source: CertificateSource): void {
    this.#certificates = source;
  }

  admitted(outcome: AdmissionOutcome, reason: SkipReason | '' = ''): void {
    this.#admissions.inc({ outcome, reason });
  }
}
