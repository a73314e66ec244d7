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
  const { api } = opts;
  const secrets = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/secrets`;
  const secretPath = `${secrets}/${encodeURIComponent(opts.secretName)}`;
  const configurationPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${encodeURIComponent(opts.webhookConfigurationName)}`;
  const log = opts.logger.child({ component: 'webhook-certificates' });
  let timer: NodeJS.Timeout | undefined;
  let servedCertPem: string | undefined;
  let published = '';
  let running: Promise<void> | undefined;

  async function readSecret(): Promise<V1Secret | undefined> {
    try {
      return await api.get<V1Secret>(secretPath);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Writes the state; false when another replica wrote first (the caller re-reads and starts over). */
  async function writeSecret(state: CertificateState, existing: V1Secret | undefined): Promise<boolean> {
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
      if (existing) await api.put(secretPath, body);
      else await api.post(secrets, body);
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }

  /** Patches every webhook of the configuration whose caBundle differs; true when the bundle is in place. */
  async function publishBundle(bundle: string): Promise<boolean> {
    let config: V1MutatingWebhookConfiguration;
    try {
      config = await api.get<V1MutatingWebhookConfiguration>(configurationPath);
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
    await api.patch(configurationPath, ops, { contentType: 'application/json-patch+json' });
    log.info({ name: opts.webhookConfigurationName, webhooks: ops.length / 2 }, 'caBundle patched into the webhook configuration');
    return true;
  }

  async function reconcileOnce(force?: 'ca' | 'serving'): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const secret = await readSecret();
      const policy: RenewalPolicy = {
        now: Date.now(),
        caValidityHours: opts.caValidityHours ?? 24 * 365,
        servingValidityHours: opts.servingValidityHours ?? 24 * 7,
        renewFraction: opts.renewFraction ?? 1 / 3,
        propagationMs: opts.propagationMs ?? 60_000,
        dnsNames: opts.dnsNames,
        ipAddresses: opts.ipAddresses ?? [],
        ...(attempt === 0 && force ? { force } : {}),
      };
      let { state, changes } = await renewCertificates(stateFromSecret(secret), policy);
      if (changes.length > 0) {
        if (await writeSecret(state, secret)) log.info({ changes }, 'webhook certificates renewed');
        continue; // re-read: what is stored (ours or another replica's) is what gets published and served
      }
      if (secret && !hasOwnerReference(secret.metadata, opts.owner)) {
        // Written before the chart named an owner: adopt it so `helm uninstall` takes it along.
        if (await writeSecret(state, secret)) log.info({ secret: `${opts.namespace}/${opts.secretName}`, owner: opts.owner?.name }, 'owner reference added');
        continue;
      }
      const bundle = caBundlePem(state);
      const inPlace = await publishBundle(bundle);
      // Readiness follows this: a configuration that lost our bundle (or is gone) means admissions would fail TLS.
      published = inPlace ? bundle : '';
      if (inPlace && state.bundlePublishedAt === undefined) {
        state = { ...state, bundlePublishedAt: Date.now() };
        if (!(await writeSecret(state, secret))) continue;
      }
      hand(state);
      return;
    }
    throw new Error(`could not update Secret ${opts.namespace}/${opts.secretName}: conflicting writers`);
  }

  function hand(state: CertificateState): void {
    const serving = state.serving;
    if (!serving) return;
    if (serving.certPem === servedCertPem) return;
    servedCertPem = serving.certPem;
    opts.onServingCertificate(serving);
    log.info('serving certificate loaded');
  }

  function reconcile(force?: 'ca' | 'serving'): Promise<void> {
    // One pass at a time per replica; a forced request waits for the running pass and then runs its own.
    const next = (running ?? Promise.resolve()).then(() => reconcileOnce(force));
    // The queue's own link never rejects: a failed pass is the caller's to handle (through `next`), and a
    // rejected link nobody awaits would be an unhandled rejection, which ends the process.
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    running = settled;
    void settled.then(() => {
      if (running === settled) running = undefined;
    });
    return next;
  }

  return {
    reconcile,
    async start() {
      await reconcile();
      const tick = () => {
        timer = setTimeout(() => {
          reconcile()
            .catch((error: unknown) => log.error({ err: error }, 'webhook certificate reconcile failed'))
            .finally(() => {
              if (timer) tick();
            });
        }, opts.intervalMs ?? 30_000);
        timer.unref();
      };
      tick();
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
    get caBundle() {
      return published;
    },
  };
}
