// Where the operator keeps the cluster's budget ledger durably: in the API server, as ConfigMaps of its own
// namespace (ADR 1302, ADR 1307), written by the leader only. The ledger is a log of patches of absolute values
// (ledger-state.ts) on top of a base:
//
// - `tollgate-budget-log-<seq>`: one patch per write, created (never updated), in sequence. What one patch
//   holds is written whole or not at all, so a report's spend and its pod's watermark are never apart.
// - `tollgate-budget-base-<gen>-<i>`: the whole ledger as of patch <gen>, in parts of at most MAX_PART_BYTES,
//   written by a compaction; `tollgate-budget-ledger` (the manifest) names the base generation and its parts.
//   Switching the manifest is what makes a new base count; the parts and patches it replaces are deleted after.
//
// The leader reads the base named in the manifest and every patch after it. Every object is labelled
// tollgate.dev/budget-ledger=true and carries the generation of the base it belongs to, so one
// deletecollection removes what a compaction replaced. A ledger written by an older operator (one ConfigMap per
// BudgetPolicy, ADR 1302) is read as the base until the first compaction, and then kept as it was, so a
// rollback to that release finds the spend it had left. Creating a patch
// with a sequence number that exists (a deposed leader still writing) and updating a manifest that changed are
// conflicts: the ledger is read again.
//
// The ledger outlives the release (ADR 0811): unlike everything else the operator creates, its ConfigMaps name
// no owner, so `helm uninstall` and a reinstall keep every user's spend in the period. Deleting it is a choice:
// `kubectl delete configmaps -n <namespace> -l tollgate.dev/budget-ledger=true`.

import { type KubeApi, isStatus } from '../../../kube-client/api-client.ts';
import type { OwnerReference } from '../../../kube-client/owner-reference.ts';
import { type LedgerPatch, LedgerState, type PolicyPatch } from './ledger-state.ts';

export const LEDGER_LABEL = 'tollgate.dev/budget-ledger';
const PART_LABEL = 'tollgate.dev/budget-ledger-part';
const BASE_LABEL = 'tollgate.dev/budget-ledger-base';
export const MANIFEST_NAME = 'tollgate-budget-ledger';
const LOG_PREFIX = 'tollgate-budget-log-';
const BASE_PREFIX = 'tollgate-budget-base-';
const DATA_KEY = 'ledger.json';
/** A ConfigMap holds at most 1 MiB; parts and patches stay well below it. */
export const MAX_PART_BYTES = 700 * 1024;

export class LedgerConflictError extends Error {}

/**
 * The store no longer holds the base the leader wrote (a Redis that came back empty: a deleted pod's emptyDir, a
 * FLUSHALL). The leader holds the whole ledger in memory and writes it again as a new base.
 */
export class LedgerLostError extends Error {}

export interface LedgerConfigMap {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; ownerReferences?: OwnerReference[] };
  data?: Record<string, string>;
}

interface Manifest {
  v: 2;
  /** Sequence number of the last patch the base includes. */
  base: number;
  parts: number;
}

export interface LoadedLedger {
  state: LedgerState;
  /** Generation of the base (0: none yet). */
  base: number;
  /** The next patch's sequence number. */
  next: number;
  /** Of the manifest; undefined before the first compaction. */
  manifestVersion: string | undefined;
  /** Patches after the base, and their bytes: what the next compaction folds in. */
  patches: number;
  patchBytes: number;
  /** A ledger of an older operator was read: compact now, so its ConfigMaps can go. */
  legacy: boolean;
}

/**
 * Where the leader keeps the ledger: this file's ConfigMaps (budgets.store configmaps) or a Redis-compatible
 * store (redis-ledger-store.ts, ADR 1314). Both write a patch whole or not at all, refuse a patch number that
 * exists and a compaction over a base that changed (LedgerConflictError), and read back what they acknowledged.
 */
export interface LedgerBackend {
  /** Where the ledger is, for the operator's log. */
  readonly where: string;
  load(): Promise<LoadedLedger>;
  writePatch(seq: number, base: number, json: string): Promise<void>;
  compact(gen: number, parts: string[], previous: { base: number; manifestVersion: string | undefined }): Promise<string>;
}

export class LedgerStore implements LedgerBackend {
  readonly #api: KubeApi;
  readonly #namespace: string;
  readonly #owner: OwnerReference | undefined;

  /**
   * `owner`: the operator's Deployment. Ledger objects written by releases that named it as their owner (ADR 0807)
   * lose that reference when the leader loads them, so the garbage collector no longer deletes them with it.
   */
  constructor(api: KubeApi, namespace: string, owner?: OwnerReference) {
    this.#api = api;
    this.#namespace = namespace;
    this.#owner = owner;
  }

  get where(): string {
    return `ConfigMaps of namespace ${this.#namespace}`;
  }

  #path(name?: string): string {
    return `/api/v1/namespaces/${this.#namespace}/configmaps${name ? `/${name}` : ''}`;
  }

  async load(): Promise<LoadedLedger> {
    // The manifest first: its resourceVersion guards the next compaction, and patches listed after it are newer.
    const manifestMap = await this.#get(MANIFEST_NAME);
    const items = await this.#list();
    for (const cm of items) await this.#disown(cm);
    const { stale, ...read } = readLedger(manifestMap, items);
    // What a crash between writing and deleting left behind; harmless, but not worth keeping.
    await Promise.all(stale.map((name) => this.#delete(name)));
    return { ...read, manifestVersion: manifestMap?.metadata.resourceVersion };
  }

  /** Creates patch `seq` (JSON of a LedgerPatch). A patch of that number already there is a LedgerConflictError. */
  async writePatch(seq: number, base: number, json: string): Promise<void> {
    try {
      await this.#api.post(this.#path(), this.#configMap(`${LOG_PREFIX}${String(seq).padStart(12, '0')}`, { [PART_LABEL]: 'log', [BASE_LABEL]: String(base) }, json));
    } catch (error) {
      if (isStatus(error, 409)) throw new LedgerConflictError(`budget ledger patch ${seq} exists already: another operator replica wrote it`);
      throw error;
    }
  }

  /**
   * Writes the whole ledger as of patch `gen` as the new base, switches the manifest to it (with the manifest's
   * resourceVersion: a changed manifest is a LedgerConflictError), then deletes the base and patches it replaces
   * (an older operator's ledger stays, for a rollback). Returns the manifest's new resourceVersion.
   */
  async compact(gen: number, parts: string[], previous: { base: number; manifestVersion: string | undefined }): Promise<string> {
    for (const [i, json] of parts.entries()) await this.#put(this.#configMap(`${BASE_PREFIX}${gen}-${i}`, { [PART_LABEL]: 'base', [BASE_LABEL]: String(gen) }, json));
    const manifest: Manifest = { v: 2, base: gen, parts: parts.length };
    const body = this.#configMap(MANIFEST_NAME, { [PART_LABEL]: 'manifest' }, JSON.stringify(manifest));
    let written: LedgerConfigMap;
    try {
      written = previous.manifestVersion
        ? await this.#api.put<LedgerConfigMap>(this.#path(MANIFEST_NAME), { ...body, metadata: { ...body.metadata, resourceVersion: previous.manifestVersion } })
        : await this.#api.post<LedgerConfigMap>(this.#path(), body);
    } catch (error) {
      if (isStatus(error, 409)) throw new LedgerConflictError('the budget ledger manifest was changed by someone else (another operator replica?)');
      throw error;
    }
    await this.#deleteWhere(`${LEDGER_LABEL}=true,${BASE_LABEL}=${previous.base}`);
    return written.metadata.resourceVersion ?? '';
  }

  #configMap(name: string, labels: Record<string, string>, json: string): LedgerConfigMap {
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      // No ownerReferences (ADR 0811): the ledger outlives the operator's Deployment.
      metadata: {
        name,
        namespace: this.#namespace,
        labels: { [LEDGER_LABEL]: 'true', ...labels, 'app.kubernetes.io/part-of': 'tollgate', 'app.kubernetes.io/component': 'budget-ledger' },
      },
      data: { [DATA_KEY]: json },
    };
  }

  /**
   * A ledger object written by a release that owned it by the operator's Deployment (this one, or one
   * uninstalled since: same name, another UID) is released from it when the leader loads it, so a ledger that
   * no write touches again outlives an uninstall too.
   */
  async #disown(cm: LedgerConfigMap): Promise<void> {
    const owners = cm.metadata.ownerReferences ?? [];
    const kept = owners.filter((ref) => !this.#isOperatorDeployment(ref));
    if (kept.length === owners.length) return;
    try {
      await this.#api.put(this.#path(cm.metadata.name), { ...cm, apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...cm.metadata, ownerReferences: kept } });
    } catch (error) {
      // Changed or deleted meanwhile (a compaction, another replica): the next load looks again.
      if (!isStatus(error, 409) && !isStatus(error, 404)) throw error;
    }
  }

  #isOperatorDeployment(ref: OwnerReference): boolean {
    return !!this.#owner && ref.kind === 'Deployment' && ref.apiVersion.startsWith('apps/') && (ref.uid === this.#owner.uid || ref.name === this.#owner.name);
  }

  /** Creates, or replaces what an interrupted compaction left under the same name. */
  async #put(body: LedgerConfigMap): Promise<void> {
    try {
      await this.#api.post(this.#path(), body);
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      await this.#api.put(this.#path(body.metadata.name), body);
    }
  }

  async #get(name: string): Promise<LedgerConfigMap | undefined> {
    try {
      return await this.#api.get<LedgerConfigMap>(this.#path(name));
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async #list(): Promise<LedgerConfigMap[]> {
    const out: LedgerConfigMap[] = [];
    let cont: string | undefined;
    do {
      // Parts are up to 700 KB each: small pages keep one response to a few MB.
      const page = await this.#api.get<{ items: LedgerConfigMap[]; metadata?: { continue?: string } }>(this.#path(), {
        query: { labelSelector: `${LEDGER_LABEL}=true`, limit: 8, continue: cont },
      });
      out.push(...page.items);
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return out;
  }

  async #delete(name: string): Promise<void> {
    try {
      await this.#api.request('DELETE', this.#path(name));
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
  }

  async #deleteWhere(labelSelector: string): Promise<void> {
    await this.#api.request('DELETE', this.#path(), { query: { labelSelector } });
  }
}

/** Whether `name` belongs to the patch layout (manifest, base part, patch) rather than an older operator's ledger. */
export function inPatchLayout(name: string): boolean {
  return name === MANIFEST_NAME || name.startsWith(LOG_PREFIX) || name.startsWith(BASE_PREFIX);
}

/**
 * The ledger held by `items` (every ConfigMap labelled tollgate.dev/budget-ledger=true) under the manifest
 * `manifestMap`, read as a new leader reads it; `stale` names the objects a compaction replaced. Without I/O, so a
 * test can read a cluster's ledger as the operator does.
 */
export function readLedger(manifestMap: LedgerConfigMap | undefined, items: LedgerConfigMap[]): Omit<LoadedLedger, 'manifestVersion'> & { stale: string[] } {
  const manifest = manifestMap ? (JSON.parse(manifestMap.data?.[DATA_KEY] ?? '{}') as Manifest) : undefined;
  const base = manifest?.base ?? 0;
  const parts = new Map<number, LedgerPatch>();
  const patches: { seq: number; patch: LedgerPatch; bytes: number }[] = [];
  const legacy: Record<string, PolicyPatch>[] = [];
  const stale: string[] = [];
  for (const cm of items) {
    const name = cm.metadata.name;
    const text = cm.data?.[DATA_KEY] ?? '';
    if (name === MANIFEST_NAME) continue;
    if (name.startsWith(LOG_PREFIX)) {
      const seq = Number(name.slice(LOG_PREFIX.length));
      if (seq > base) patches.push({ seq, patch: JSON.parse(text) as LedgerPatch, bytes: text.length });
      else stale.push(name);
    } else if (name.startsWith(BASE_PREFIX)) {
      const [gen, index] = name.slice(BASE_PREFIX.length).split('-').map(Number) as [number, number];
      if (manifest && gen === base) parts.set(index, JSON.parse(text) as LedgerPatch);
      else stale.push(name);
    } else if (!manifest) {
      const doc = legacyPatch(text);
      if (doc) legacy.push(doc);
    }
    // An older operator's ledger under a manifest is neither read nor deleted: it is what that release reads
    // again after a `helm rollback` (ADR 1307).
  }
  if (manifest && parts.size !== manifest.parts) {
    throw new Error(`the budget ledger's base ${base} has ${parts.size} of its ${manifest.parts} parts in the API server; it cannot be read`);
  }
  const state = new LedgerState();
  for (const doc of legacy) state.applyPatch({ v: 2, policies: doc });
  for (let i = 0; i < parts.size; i++) state.applyPatch(parts.get(i)!);
  patches.sort((a, b) => a.seq - b.seq);
  for (const { patch } of patches) state.applyPatch(patch);
  return {
    state,
    base,
    next: Math.max(base, patches.at(-1)?.seq ?? 0) + 1,
    patches: patches.length,
    patchBytes: patches.reduce((n, p) => n + p.bytes, 0),
    legacy: legacy.length > 0,
    stale,
  };
}

/** A ledger ConfigMap of an older operator (one per policy, ADR 1302) as a patch of its policy, or undefined. */
function legacyPatch(text: string): Record<string, PolicyPatch> | undefined {
  interface LegacyDoc {
    policy?: unknown;
    periods?: Record<string, Record<string, { spent: string; limitUsed: string; alerted: number }>>;
    grantsUsed?: Record<string, Record<string, string>>;
    applied?: Record<string, { seq: number; pod: string; at: string }>;
  }
  let doc: LegacyDoc;
  try {
    doc = JSON.parse(text) as LegacyDoc;
  } catch {
    return undefined;
  }
  if (typeof doc.policy !== 'string') return undefined;
  const periods: NonNullable<PolicyPatch['periods']> = {};
  for (const [iso, users] of Object.entries(doc.periods ?? {})) {
    periods[iso] = Object.fromEntries(Object.entries(users).map(([user, u]) => [user, [u.spent, u.limitUsed, u.alerted] as [string, string, number]]));
  }
  const applied: NonNullable<PolicyPatch['applied']> = {};
  for (const [uid, w] of Object.entries(doc.applied ?? {})) applied[uid] = [w.seq, w.pod, Date.parse(w.at)];
  return { [doc.policy]: { periods, grants: doc.grantsUsed ?? {}, applied } };
}
