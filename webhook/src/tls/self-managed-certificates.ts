// Self-managed TLS for the webhook: CA and serving certificate generated at run time and kept in a Secret,
// the CA bundle patched into the MutatingWebhookConfiguration (again whenever it drifts, e.g. a `helm upgrade`
// blanked it), certificates renewed before expiry, and the serving certificate handed to the running server
// without a restart. Every replica runs the same loop; optimistic concurrency on the Secret (resourceVersion)
// makes them converge on one certificate without leader election.

import type { V1MutatingWebhookConfiguration, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { hasOwnerReference, type OwnerReference, withOwnerReference } from '../../../kube-client/owner-reference.ts';
import type { KeyPairPem } from '../../../contracts/pki.ts';
import { caBundlePem, renewCertificates, type CertificateState, type RenewalPolicy } from './certificate-renewal.ts';
import { secretFromState, stateFromSecret } from './certificate-secret.ts';

export interface SelfManagedCertificateOptions {
  api: KubeApi;
  logger: Logger;
  namespace: string;
  secretName: string;
  webhookConfigurationName: string;
  /** Named in the Secret's ownerReferences, so uninstalling the chart deletes the Secret (ADR 0807). */
  owner?: OwnerReference;
  dnsNames: string[];
  ipAddresses?: string[];
  caValidityHours?: number;
  servingValidityHours?: number;
  renewFraction?: number;
  propagationMs?: number;
  /** How often to check expiry and caBundle drift. */
  intervalMs?: number;
  /** Called with every serving certificate this replica should now present (the first call before serving). */
  onServingCertificate(keyPair: KeyPairPem): void;
}

export interface SelfManagedCertificates {
  /** One pass: renew what is due, persist it, re-patch the caBundle if it drifted, hand over the certificate. */
  reconcile(force?: 'ca' | 'serving'): Promise<void>;
  start(): Promise<void>;
  stop(): void;
  /** The CA bundle the last pass found in (or patched into) the configuration (PEM); '' when it is not in place. */
  readonly caBundle: string;
}

export function selfManagedCertificates(opts: SelfManagedCertificateOptions): SelfManagedCertificates {
  return new CertificateReconciler(opts);
}

/** The Secret that holds the CA and serving certificate, shared by every replica. */
class CertificateSecret {
  readonly #api: KubeApi;
  readonly #opts: SelfManagedCertificateOptions;
  readonly #collection: string;
  readonly #path: string;

  constructor(opts: SelfManagedCertificateOptions) {
    this.#api = opts.api;
    this.#opts = opts;
    this.#collection = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/secrets`;
    this.#path = `${this.#collection}/${encodeURIComponent(opts.secretName)}`;
  }

  async read(): Promise<V1Secret | undefined> {
    try {
      return await this.#api.get<V1Secret>(this.#path);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Writes the state; false when another replica wrote first (the caller re-reads and starts over). */
  async write(state: CertificateState, existing: V1Secret | undefined): Promise<boolean> {
    const opts = this.#opts;
    const body = secretFromState(state, {
      name: opts.secretName,
      namespace: opts.namespace,
      labels: { 'app.kubernetes.io/part-of': 'tollgate', 'app.kubernetes.io/component': 'webhook' },
      ...(existing?.metadata?.resourceVersion ? { resourceVersion: existing.metadata.resourceVersion } : {}),
    });
    // A PUT replaces metadata: keep whatever owners the Secret already has, and add ours.
    const owners = existing?.metadata?.ownerReferences;
    body.metadata = withOwnerReference({ ...body.metadata, ...(owners ? { ownerReferences: owners } : {}) }, opts.owner);
    try {
      if (existing) await this.#api.put(this.#path, body);
      else await this.#api.post(this.#collection, body);
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }
}

/** Patches every webhook of the configuration whose caBundle differs; true when the bundle is in place. */
async function publishBundle(opts: SelfManagedCertificateOptions, log: Logger, bundle: string): Promise<boolean> {
  const path = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${encodeURIComponent(opts.webhookConfigurationName)}`;
  let config: V1MutatingWebhookConfiguration;
  try {
    config = await opts.api.get<V1MutatingWebhookConfiguration>(path);
  } catch (error) {
    if (isStatus(error, 404)) {
      log.warn({ name: opts.webhookConfigurationName }, 'MutatingWebhookConfiguration not found; caBundle not published');
      return false;
    }
    throw error;
  }
  const wanted = Buffer.from(bundle).toString('base64');
  const ops: object[] = [];
  (config.webhooks ?? []).forEach((webhook, i) => {
    if (webhook.clientConfig.caBundle === wanted) return;
    // The test op pins the index to the name: a concurrent edit that reorders webhooks fails the patch.
    ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: webhook.name });
    ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: wanted });
  });
  if (ops.length === 0) return true;
  await opts.api.patch(path, ops, { contentType: 'application/json-patch+json' });
  log.info({ name: opts.webhookConfigurationName, webhooks: ops.length / 2 }, 'caBundle patched into the webhook configuration');
  return true;
}

/** One replica's loop: a pass at a time, every intervalMs, each converging on what the Secret holds. */
class CertificateReconciler implements SelfManagedCertificates {
  readonly #opts: SelfManagedCertificateOptions;
  readonly #log: Logger;
  readonly #secret: CertificateSecret;
  #timer: NodeJS.Timeout | undefined;
  #servedCertPem: string | undefined;
  #published = '';
  #running: Promise<void> | undefined;

  constructor(opts: SelfManagedCertificateOptions) {
    this.#opts = opts;
    this.#log = opts.logger.child({ component: 'webhook-certificates' });
    this.#secret = new CertificateSecret(opts);
  }

  get caBundle(): string {
    return this.#published;
  }

  reconcile(force?: 'ca' | 'serving'): Promise<void> {
    // One pass at a time per replica; a forced request waits for the running pass and then runs its own.
    const next = (this.#running ?? Promise.resolve()).then(() => this.#reconcileOnce(force));
    // The queue's own link never rejects: a failed pass is the caller's to handle (through `next`), and a
    // rejected link nobody awaits would be an unhandled rejection, which ends the process.
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#running = settled;
    void settled.then(() => {
      if (this.#running === settled) this.#running = undefined;
    });
    return next;
  }

  async start(): Promise<void> {
    await this.reconcile();
    const tick = () => {
      this.#timer = setTimeout(() => {
        this.reconcile()
          .catch((error: unknown) => this.#log.error({ err: error }, 'webhook certificate reconcile failed'))
          .finally(() => {
            if (this.#timer) tick();
          });
      }, this.#opts.intervalMs ?? 30_000);
      this.#timer.unref();
    };
    tick();
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #reconcileOnce(force?: 'ca' | 'serving'): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await this.#pass(attempt === 0 ? force : undefined)) return;
    }
    throw new Error(`could not update Secret ${this.#opts.namespace}/${this.#opts.secretName}: conflicting writers`);
  }

  /** Renews what is due, adopts, publishes and hands over; false when the Secret changed and the pass must start over. */
  async #pass(force: 'ca' | 'serving' | undefined): Promise<boolean> {
    const opts = this.#opts;
    const secret = await this.#secret.read();
    let { state, changes } = await renewCertificates(stateFromSecret(secret), this.#policy(force));
    if (changes.length > 0) {
      if (await this.#secret.write(state, secret)) this.#log.info({ changes }, 'webhook certificates renewed');
      return false; // re-read: what is stored (ours or another replica's) is what gets published and served
    }
    if (secret && !hasOwnerReference(secret.metadata, opts.owner)) {
      // Written before the chart named an owner: adopt it so `helm uninstall` takes it along.
      if (await this.#secret.write(state, secret)) this.#log.info({ secret: `${opts.namespace}/${opts.secretName}`, owner: opts.owner?.name }, 'owner reference added');
      return false;
    }
    const bundle = caBundlePem(state);
    const inPlace = await publishBundle(opts, this.#log, bundle);
    // Readiness follows this: a configuration that lost our bundle (or is gone) means admissions would fail TLS.
    this.#published = inPlace ? bundle : '';
    if (inPlace && state.bundlePublishedAt === undefined) {
      state = { ...state, bundlePublishedAt: Date.now() };
      if (!(await this.#secret.write(state, secret))) return false;
    }
    this.#hand(state);
    return true;
  }

  #policy(force: 'ca' | 'serving' | undefined): RenewalPolicy {
    const opts = this.#opts;
    return {
      now: Date.now(),
      caValidityHours: opts.caValidityHours ?? 24 * 365,
      servingValidityHours: opts.servingValidityHours ?? 24 * 7,
      renewFraction: opts.renewFraction ?? 1 / 3,
      propagationMs: opts.propagationMs ?? 60_000,
      dnsNames: opts.dnsNames,
      ipAddresses: opts.ipAddresses ?? [],
      ...(force ? { force } : {}),
    };
  }

  #hand(state: CertificateState): void {
    const serving = state.serving;
    if (!serving) return;
    if (serving.certPem === this.#servedCertPem) return;
    this.#servedCertPem = serving.certPem;
    this.#opts.onServingCertificate(serving);
    this.#log.info('serving certificate loaded');
  }
}
