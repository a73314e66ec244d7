// Where the operator keeps the cluster's budget ledger durably: in the API server, one ConfigMap per
// BudgetPolicy in the operator's own namespace (ADR 1302). No PersistentVolume, nothing outside the cluster,
// and every replica can read it when it becomes the leader. Writes are optimistic (resourceVersion): a
// deposed leader that still writes gets a 409 instead of overwriting its successor's work.
//
// One document holds a policy's current and previous period (spend, limit used, alerts per user), what each
// grant has absorbed, and for every sidecar (pod UID) the last spend report applied to it: the watermark
// that makes a resent report a no-op. Amounts are decimal strings of ledger units (bigint-safe JSON).
//
// The ledger outlives the release (ADR 0811): unlike everything else the operator creates, its ConfigMaps name
// no owner, so `helm uninstall` and a reinstall keep every user's spend in the period. Deleting it is a choice:
// `kubectl delete configmaps -n <namespace> -l tollgate.dev/budget-ledger=true`.

import { createHash } from 'node:crypto';
import { type KubeApi, isStatus } from '../../../kube-client/api-client.ts';
import type { OwnerReference } from '../../../kube-client/owner-reference.ts';

export interface UserUsageDoc {
  spent: string;
  limitUsed: string;
  alerted: number;
}

export interface LedgerDoc {
  /** `<namespace>/<name>` of the BudgetPolicy. */
  policy: string;
  /** Period start (RFC 3339) → user → usage; the current and the previous period only. */
  periods: Record<string, Record<string, UserUsageDoc>>;
  /** user → grant id → units absorbed. */
  grantsUsed: Record<string, Record<string, string>>;
  /** pod UID → the last report of that pod applied here. */
  applied: Record<string, { seq: number; pod: string; at: string }>;
}

export interface StoredLedger {
  doc: LedgerDoc;
  /** Of the ConfigMap; undefined before it is first created. */
  resourceVersion?: string;
}

interface ConfigMap {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  data?: Record<string, string>;
}

export const LEDGER_LABEL = 'tollgate.dev/budget-ledger';
const POLICY_ANNOTATION = 'tollgate.dev/budget-policy';
const DATA_KEY = 'ledger.json';
/** A ConfigMap holds at most 1 MiB; past this the policy has too many users for the API-server ledger. */
export const MAX_LEDGER_BYTES = 900 * 1024;

export class LedgerTooLargeError extends Error {}
export class LedgerConflictError extends Error {}

export function emptyLedger(policy: string): LedgerDoc {
  return { policy, periods: {}, grantsUsed: {}, applied: {} };
}

export function ledgerConfigMapName(policy: string): string {
  return `tollgate-budget-${createHash('sha256').update(policy).digest('hex').slice(0, 20)}`;
}

export class LedgerStore {
  readonly #api: KubeApi;
  readonly #namespace: string;
  readonly #owner: OwnerReference | undefined;

  /**
   * `owner`: the operator's Deployment. Ledgers written by releases that named it as their owner (ADR 0807)
   * lose that reference when listed, so the garbage collector no longer deletes them with the Deployment.
   */
  constructor(api: KubeApi, namespace: string, owner?: OwnerReference) {
    this.#api = api;
    this.#namespace = namespace;
    this.#owner = owner;
  }

  #path(name?: string): string {
    return `/api/v1/namespaces/${this.#namespace}/configmaps${name ? `/${name}` : ''}`;
  }

  /** Every ledger, by policy key. */
  async list(): Promise<Map<string, StoredLedger>> {
    const out = new Map<string, StoredLedger>();
    let cont: string | undefined;
    do {
      const page = await this.#api.get<{ items: ConfigMap[]; metadata?: { continue?: string } }>(this.#path(), {
        query: { labelSelector: `${LEDGER_LABEL}=true`, limit: 200, continue: cont },
      });
      for (const cm of page.items) {
        const stored = parse(await this.#disown(cm));
        if (stored) out.set(stored.doc.policy, stored);
      }
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return out;
  }

  /**
   * A ledger written by a release that owned it by the operator's Deployment (this one, or one uninstalled
   * since: same name, another UID) is released from it now, when the new leader loads it, so an idle policy's
   * ledger outlives an uninstall too. Returned as written (its new resourceVersion).
   */
  async #disown(cm: ConfigMap): Promise<ConfigMap> {
    const owners = cm.metadata.ownerReferences ?? [];
    const kept = owners.filter((ref) => !this.#isOperatorDeployment(ref));
    if (kept.length === owners.length) return cm;
    const metadata = { ...cm.metadata, ownerReferences: kept };
    try {
      return await this.#api.put<ConfigMap>(this.#path(cm.metadata.name), { ...cm, apiVersion: 'v1', kind: 'ConfigMap', metadata });
    } catch (error) {
      // Someone wrote it meanwhile: keep what was listed; this store's next write drops the reference.
      if (isStatus(error, 409)) return cm;
      throw error;
    }
  }

  #isOperatorDeployment(ref: OwnerReference): boolean {
    return !!this.#owner && ref.kind === 'Deployment' && ref.apiVersion.startsWith('apps/') && (ref.uid === this.#owner.uid || ref.name === this.#owner.name);
  }

  async get(policy: string): Promise<StoredLedger | undefined> {
    try {
      return parse(await this.#api.get<ConfigMap>(this.#path(ledgerConfigMapName(policy))));
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Creates or replaces the policy's ledger; returns the new resourceVersion. A 409 is a LedgerConflictError. */
  async write(doc: LedgerDoc, resourceVersion: string | undefined): Promise<string> {
    const text = JSON.stringify(doc);
    if (text.length > MAX_LEDGER_BYTES) {
      throw new LedgerTooLargeError(
        `the ledger of ${doc.policy} is ${text.length} bytes, over the ${MAX_LEDGER_BYTES} a ConfigMap can hold: too many users in one period for the API-server ledger`,
      );
    }
    const name = ledgerConfigMapName(doc.policy);
    const body: ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      // No ownerReferences: a PUT replaces metadata whole, so this also drops one an older release set.
      metadata: {
        name,
        namespace: this.#namespace,
        labels: { [LEDGER_LABEL]: 'true', 'app.kubernetes.io/part-of': 'tollgate', 'app.kubernetes.io/component': 'budget-ledger' },
        annotations: { [POLICY_ANNOTATION]: doc.policy },
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      data: { [DATA_KEY]: text },
    };
    try {
      const written = resourceVersion ? await this.#api.put<ConfigMap>(this.#path(name), body) : await this.#api.post<ConfigMap>(this.#path(), body);
      return written.metadata.resourceVersion ?? '';
    } catch (error) {
      if (isStatus(error, 409)) throw new LedgerConflictError(`the ledger of ${doc.policy} was changed by someone else (another operator replica?)`);
      throw error;
    }
  }

  async delete(policy: string): Promise<void> {
    try {
      await this.#api.request('DELETE', this.#path(ledgerConfigMapName(policy)));
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
  }
}

function parse(cm: ConfigMap): StoredLedger | undefined {
  const text = cm.data?.[DATA_KEY];
  if (!text) return undefined;
  try {
    const doc = JSON.parse(text) as LedgerDoc;
    if (typeof doc.policy !== 'string') return undefined;
    doc.periods ??= {};
    doc.grantsUsed ??= {};
    doc.applied ??= {};
    return { doc, ...(cm.metadata.resourceVersion ? { resourceVersion: cm.metadata.resourceVersion } : {}) };
  } catch {
    return undefined;
  }
}
