// The CA sidecars must trust, published in a ConfigMap of the operator's namespace (ADR 0809). The webhook
// reads it through the API the moment it is written and copies it into every pod it injects, instead of
// waiting for the kubelet to refresh a Secret volume (up to a minute and a half on a fresh install). The
// ConfigMap holds public data only: the webhook needs no access to the Secret that holds the operator's key.
//
// The leader writes it whenever it loads its certificate (create, or replace when the CA differs). Every other
// replica writes it only when it is missing, from the Secret the leader keeps: during a `helm upgrade` from a
// release that did not publish it, the new webhook then becomes Ready as soon as the first new operator
// replica runs, not only once a new replica has taken the Lease.

import type { Logger } from 'pino';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { hasOwnerReference, type OwnerReference, withOwnerReference } from '../../../kube-client/owner-reference.ts';

/** The ConfigMap key; the webhook reads the same one. */
export const CA_KEY = 'ca.crt';

interface ConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: { name: string; namespace: string; resourceVersion?: string; labels?: Record<string, string>; ownerReferences?: OwnerReference[] };
  data?: Record<string, string>;
}

export interface CaPublicationOptions {
  api: KubeApi;
  namespace: string;
  name: string;
  logger: Logger;
  /** Named in the ConfigMap's ownerReferences, so uninstalling deletes it (ADR 0807). */
  owner?: OwnerReference | undefined;
}

export class CaPublication {
  readonly #opts: CaPublicationOptions;

  constructor(opts: CaPublicationOptions) {
    this.#opts = opts;
  }

  get #path(): string {
    return `/api/v1/namespaces/${this.#opts.namespace}/configmaps`;
  }

  /**
   * Makes the ConfigMap hold `caPem`. With `onlyIfMissing`, an existing ConfigMap is left as it is (a standby
   * must never undo the leader's write of a renewed CA with the one it read earlier). A write that races
   * another replica's reads again: the leader's CA is the one that stays.
   */
  async publish(caPem: string, opts: { onlyIfMissing?: boolean } = {}): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#publishOnce(caPem, opts.onlyIfMissing ?? false);
      } catch (error) {
        if (!isStatus(error, 409) || opts.onlyIfMissing || attempt === 3) throw error;
      }
    }
  }

  async #publishOnce(caPem: string, onlyIfMissing: boolean): Promise<void> {
    const { api, name, namespace, logger, owner } = this.#opts;
    let existing: ConfigMap | undefined;
    try {
      existing = await api.get<ConfigMap>(`${this.#path}/${name}`);
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
    if (existing && (onlyIfMissing || (existing.data?.[CA_KEY] === caPem && hasOwnerReference(existing.metadata, owner)))) return;
    const body: ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: withOwnerReference(
        {
          name,
          namespace,
          labels: { 'app.kubernetes.io/part-of': 'tollgate', 'app.kubernetes.io/component': 'operator-ca' },
          ...(existing?.metadata.ownerReferences ? { ownerReferences: existing.metadata.ownerReferences } : {}),
          ...(existing?.metadata.resourceVersion ? { resourceVersion: existing.metadata.resourceVersion } : {}),
        },
        owner,
      ),
      data: { [CA_KEY]: caPem },
    };
    try {
      if (existing) await api.put(`${this.#path}/${name}`, body);
      else await api.post(this.#path, body);
    } catch (error) {
      // A standby that finds it created meanwhile has nothing left to do.
      if (onlyIfMissing && isStatus(error, 409)) return;
      throw error;
    }
    logger.info({ configMap: `${namespace}/${name}` }, existing ? 'operator CA republished' : 'operator CA published');
  }
}
