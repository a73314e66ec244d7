// The operator's view of connected sidecars: which ProxyConfig each one is bound to, which snapshot version
// it was sent, acknowledged or rejected, and the latest snapshot of every ProxyConfig. Changes are pushed
// per namespace after a debounce (100 ms of quiet, at most 1 s after the first change), so a burst of edits
// becomes one push while any single change still reaches every sidecar well within two seconds.

import type { Logger } from 'pino';
import { CONFIG_REVISION, FIRST_CONFIG_REVISION, patchForRevision } from '../../../contracts/config-revisions.ts';
import type { RuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import type { ModelAliasesConfig } from '../../../contracts/model-aliases.ts';
import type { AliasHealthReportMessage, AuditReport } from '../../../contracts/push-protocol.ts';
import { readAliasReport, type SidecarAliasHealth } from './alias-reports.ts';
import { BUILTIN_SOURCE, selectConfig } from './config-selection.ts';
import { BUILTIN_SNAPSHOT, redactSnapshot, type Snapshot } from './snapshot.ts';

export interface SidecarConnection {
  id: string;
  /** From the token review. */
  namespace: string;
  podName: string;
  podUid?: string;
  /** The pod's tollgate.dev/proxy-config annotation when it connected. */
  annotation?: string;
  /** The runtime config revision the sidecar understands (its Hello); absent: FIRST_CONFIG_REVISION (ADR 0723). */
  configRevision?: number;
  /** The sidecar's software version (its Hello), for logs. */
  sidecarVersion?: string;
  /** Sends one snapshot on the stream; throws when the stream is gone. */
  send(snapshot: Snapshot): void;
  /** Ends the stream from the operator's side (the registry dropped it). */
  close?(reason: string): void;
}

/**
 * A sidecar runs one stream; a second appears briefly when it reconnects before the operator has noticed the
 * old one is dead. More than this from one pod is a misbehaving or hostile pod holding operator memory.
 */
export const MAX_STREAMS_PER_POD = 4;
export const STREAM_REPLACED = 'too many streams from this pod; the oldest was closed';

export interface SidecarCounts {
  connected: number;
  current: number;
}

export interface RegistryListener {
  /** Connected/current counts of a ProxyConfig changed (never called for the built-in source). */
  countsChanged(source: string): void;
  /** A debounced push of `version` went out to `sidecars` sidecars bound to `source`. */
  pushed(source: string, version: string, sidecars: number): void;
  /** A sidecar refused a snapshot (once per sidecar and version). */
  rejected(source: string, pod: { namespace: string; name: string; uid?: string | undefined }, version: string, reason: string): void;
  /** A sidecar of an older config revision was sent `version` without `fields` (once per stream and version). */
  withheld(source: string, pod: { namespace: string; name: string; uid?: string | undefined }, version: string, revision: number, fields: string[]): void;
}

/** Counts for the operator's metrics: every snapshot sent, applied (ack) or refused (nack) by a sidecar. */
export interface SnapshotCounter {
  snapshotPushed(): void;
  snapshotAcked(): void;
  snapshotNacked(): void;
}

/** A snapshot as sidecars of one older config revision get it, and what was left out of it. */
interface OlderSnapshot {
  snapshot: Snapshot;
  withheld: string[];
}

interface ConnectionState {
  conn: SidecarConnection;
  source: string;
  sentVersion?: string;
  ackedVersion?: string;
  rejectedVersion?: string | undefined;
  /** The last version whose withheld fields were reported. */
  withheldVersion?: string;
  audit?: AuditReport;
  /** What of the audit report the ProxyConfig's status shows; a change re-reconciles it. */
  auditSummary?: string;
  /** The latest alias health report, as far as the bound ProxyConfig's aliases go (ADR 0724). */
  aliases?: SidecarAliasHealth | undefined;
  aliasSummary?: string | undefined;
}

export interface RegistryOptions {
  /** Whether a ProxyConfig `namespace/name` exists (the informer's cache). */
  exists: (key: string) => boolean;
  listener: RegistryListener;
  logger: Logger;
  debounceMs?: number;
  maxDelayMs?: number;
  counter?: SnapshotCounter | undefined;
}

export class SidecarRegistry {
  #opts: Required<Omit<RegistryOptions, 'counter'>>;
  #connections = new Map<string, ConnectionState>();
  /** Pod → its streams, oldest first: a connect looks at its pod's, not at every stream (2,000 reconnecting at once). */
  #byPod = new Map<string, Set<ConnectionState>>();
  #snapshots = new Map<string, Snapshot>();
  #pending = new Map<string, { timer: NodeJS.Timeout; firstAt: number }>();
  /** Snapshots as sidecars of older config revisions get them, by revision; dropped with the snapshot. */
  #older = new WeakMap<Snapshot, Map<number, OlderSnapshot>>();
  /** Each snapshot's model aliases, read once; dropped with the snapshot. */
  #models = new WeakMap<Snapshot, ModelAliasesConfig | undefined>();

  readonly #counter: SnapshotCounter | undefined;

  constructor({ counter, ...opts }: RegistryOptions) {
    this.#opts = { debounceMs: 100, maxDelayMs: 1000, ...opts };
    this.#counter = counter;
  }

  /** Push streams open now. */
  get size(): number {
    return this.#connections.size;
  }

  /** Binds a new sidecar and sends it its snapshot at once (when one is known). */
  connect(conn: SidecarConnection): string {
    this.#evictOldestOfPod(conn);
    const state: ConnectionState = { conn, source: this.#select(conn) };
    this.#connections.set(conn.id, state);
    const key = podKey(conn);
    const streams = this.#byPod.get(key);
    if (streams) streams.add(state);
    else this.#byPod.set(key, new Set([state]));
    this.#opts.logger.info(
      { pod: `${conn.namespace}/${conn.podName}`, source: state.source || '(built-in)', configRevision: revisionOf(conn), sidecarVersion: conn.sidecarVersion || undefined },
      'sidecar connected',
    );
    this.#sendCurrent(state);
    this.#countsChanged(state.source);
    return state.source;
  }

  disconnect(id: string): void {
    const state = this.#connections.get(id);
    if (!state) return;
    this.#connections.delete(id);
    const streams = this.#byPod.get(podKey(state.conn));
    streams?.delete(state);
    if (streams?.size === 0) this.#byPod.delete(podKey(state.conn));
    this.#opts.logger.info({ pod: `${state.conn.namespace}/${state.conn.podName}` }, 'sidecar disconnected');
    this.#countsChanged(state.source);
  }

  ack(id: string, version: string): void {
    const state = this.#connections.get(id);
    if (!state) return;
    state.ackedVersion = version;
    this.#counter?.snapshotAcked();
    if (state.rejectedVersion === version) state.rejectedVersion = undefined;
    this.#countsChanged(state.source);
  }

  nack(id: string, version: string, reason: string): void {
    const state = this.#connections.get(id);
    if (!state) return;
    const first = state.rejectedVersion !== version;
    state.rejectedVersion = version;
    this.#counter?.snapshotNacked();
    const { conn } = state;
    this.#opts.logger.warn({ pod: `${conn.namespace}/${conn.podName}`, version, reason }, 'sidecar rejected config snapshot');
    if (first && state.source !== BUILTIN_SOURCE) {
      this.#opts.listener.rejected(state.source, { namespace: conn.namespace, name: conn.podName, uid: conn.podUid }, version, reason);
    }
    this.#countsChanged(state.source);
  }

  /** The sidecar's latest audit delivery report; the ProxyConfig is reconciled when its verdict may change. */
  auditReport(id: string, report: AuditReport): void {
    const state = this.#connections.get(id);
    if (!state) return;
    state.audit = report;
    const summary = JSON.stringify([report.streamConnected, report.sinks.map((s) => [s.name, s.failing, s.lastError])]);
    if (summary === state.auditSummary) return;
    state.auditSummary = summary;
    this.#countsChanged(state.source);
  }

  /** The latest audit report of every connected sidecar bound to `source`. */
  auditReports(source: string): { pod: string; report: AuditReport }[] {
    return [...this.#connections.values()].filter((s) => s.source === source && s.audit).map((s) => ({ pod: `${s.conn.namespace}/${s.conn.podName}`, report: s.audit! }));
  }

  /** The sidecar's latest alias health report; the ProxyConfig is reconciled when what its status shows may change. */
  aliasHealthReport(id: string, report: AliasHealthReportMessage): void {
    const state = this.#connections.get(id);
    if (!state) return;
    const aliases = readAliasReport(report, this.aliasModels(state.source));
    const summary = JSON.stringify([...(aliases ?? [])].map(([name, alias]) => [name, alias.degradedSince, [...alias.targets]]));
    state.aliases = aliases;
    if (summary === state.aliasSummary) return;
    state.aliasSummary = summary;
    this.#countsChanged(state.source);
  }

  /** The latest alias health of every connected sidecar bound to `source` that reported one. */
  aliasReports(source: string): SidecarAliasHealth[] {
    return [...this.#connections.values()].filter((s) => s.source === source && s.aliases).map((s) => s.aliases!);
  }

  /** The model aliases of `source`'s latest good snapshot: what its sidecars run (undefined: none). */
  aliasModels(source: string): ModelAliasesConfig | undefined {
    const snapshot = this.#snapshots.get(source);
    if (!snapshot) return undefined;
    if (!this.#models.has(snapshot)) {
      const models = (JSON.parse(snapshot.configJson) as RuntimeConfigPatch).models;
      this.#models.set(snapshot, models && Object.keys(models).length > 0 ? models : undefined);
    }
    return this.#models.get(snapshot);
  }

  /** Records the latest good snapshot of a ProxyConfig and schedules a push to its sidecars. */
  publish(snapshot: Snapshot): void {
    const before = this.#snapshots.get(snapshot.source);
    this.#snapshots.set(snapshot.source, snapshot);
    if (before?.version !== snapshot.version) {
      this.#opts.logger.debug({ snapshot: redactSnapshot(snapshot) }, 'snapshot published');
      this.#schedule(namespaceOf(snapshot.source));
    }
  }

  /** The ProxyConfig is gone: forget its snapshot and rebind its sidecars (to `default` or built-ins). */
  withdraw(source: string): void {
    this.#snapshots.delete(source);
    this.#schedule(namespaceOf(source));
  }

  /** Re-evaluates bindings in a namespace (a ProxyConfig appeared or disappeared). */
  rebind(namespace: string): void {
    this.#schedule(namespace);
  }

  snapshot(source: string): Snapshot | undefined {
    return this.#snapshots.get(source);
  }

  counts(source: string): SidecarCounts {
    const version = this.#snapshots.get(source)?.version;
    let connected = 0;
    let current = 0;
    for (const state of this.#connections.values()) {
      if (state.source !== source) continue;
      connected += 1;
      if (version !== undefined && state.ackedVersion === version) current += 1;
    }
    return { connected, current };
  }

  /** Sources with at least one connected sidecar. */
  sources(): Set<string> {
    return new Set([...this.#connections.values()].map((s) => s.source));
  }

  close(): void {
    for (const { timer } of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
    this.#connections.clear();
    this.#byPod.clear();
    this.#snapshots.clear();
  }

  /** Makes room for one more stream of conn's pod, oldest first (Set order is connection order). */
  #evictOldestOfPod(conn: SidecarConnection): void {
    const same = [...(this.#byPod.get(podKey(conn)) ?? [])];
    for (const old of same.slice(0, Math.max(0, same.length - MAX_STREAMS_PER_POD + 1))) {
      this.#opts.logger.warn({ pod: `${conn.namespace}/${conn.podName}`, streams: same.length + 1 }, 'too many push streams from one pod; closing the oldest');
      this.disconnect(old.conn.id);
      old.conn.close?.(STREAM_REPLACED);
    }
  }

  #select(conn: SidecarConnection): string {
    return selectConfig(conn.namespace, conn.annotation, this.#opts.exists);
  }

  #schedule(namespace: string): void {
    const now = Date.now();
    const pending = this.#pending.get(namespace);
    const firstAt = pending?.firstAt ?? now;
    if (pending) clearTimeout(pending.timer);
    const delay = Math.max(0, Math.min(this.#opts.debounceMs, firstAt + this.#opts.maxDelayMs - now));
    const timer = setTimeout(() => {
      this.#pending.delete(namespace);
      this.#flush(namespace);
    }, delay);
    this.#pending.set(namespace, { timer, firstAt });
  }

  #flush(namespace: string): void {
    const pushed = new Map<string, { version: string; count: number }>();
    const touched = new Set<string>();
    for (const state of [...this.#connections.values()]) {
      if (state.conn.namespace !== namespace) continue;
      const source = this.#select(state.conn);
      if (source !== state.source) {
        touched.add(state.source);
        touched.add(source);
        this.#opts.logger.info({ pod: `${namespace}/${state.conn.podName}`, from: state.source || '(built-in)', to: source || '(built-in)' }, 'sidecar rebound');
        state.source = source;
        // Its aliases were the other config's: its next report says how it serves this one's.
        state.aliases = undefined;
        state.aliasSummary = undefined;
      }
      const sent = this.#sendCurrent(state);
      if (sent) {
        const entry = pushed.get(source) ?? { version: sent.version, count: 0 };
        entry.count += 1;
        pushed.set(source, entry);
        touched.add(source);
      }
    }
    for (const [source, { version, count }] of pushed) {
      if (source !== BUILTIN_SOURCE) this.#opts.listener.pushed(source, version, count);
    }
    for (const source of touched) this.#countsChanged(source);
  }

  /** Sends the bound source's snapshot if this sidecar has not been sent that version yet. */
  #sendCurrent(state: ConnectionState): Snapshot | undefined {
    const snapshot = state.source === BUILTIN_SOURCE ? BUILTIN_SNAPSHOT : this.#snapshots.get(state.source);
    if (!snapshot || state.sentVersion === snapshot.version) return undefined;
    try {
      state.conn.send(this.#forRevision(state, snapshot));
      state.sentVersion = snapshot.version;
      this.#counter?.snapshotPushed();
      return snapshot;
    } catch (error) {
      this.#opts.logger.warn({ pod: `${state.conn.namespace}/${state.conn.podName}`, err: (error as Error).message }, 'could not send snapshot; dropping the connection');
      this.disconnect(state.conn.id);
      return undefined;
    }
  }

  /**
   * The snapshot as the sidecar's config revision can take it (ADR 0723): what it predates is left out, under
   * the same version (for a given sidecar, one version is always one content), and reported once per version.
   */
  #forRevision(state: ConnectionState, snapshot: Snapshot): Snapshot {
    const revision = revisionOf(state.conn);
    if (revision >= CONFIG_REVISION) return snapshot;
    let byRevision = this.#older.get(snapshot);
    if (!byRevision) this.#older.set(snapshot, (byRevision = new Map<number, OlderSnapshot>()));
    let adapted = byRevision.get(revision);
    if (!adapted) {
      const { patch, withheld } = patchForRevision(JSON.parse(snapshot.configJson) as RuntimeConfigPatch, revision);
      adapted = { snapshot: withheld.length ? { ...snapshot, configJson: JSON.stringify(patch) } : snapshot, withheld };
      byRevision.set(revision, adapted);
    }
    if (adapted.withheld.length && state.withheldVersion !== snapshot.version) {
      state.withheldVersion = snapshot.version;
      const { conn } = state;
      this.#opts.logger.warn(
        { pod: `${conn.namespace}/${conn.podName}`, version: snapshot.version, configRevision: revision, withheld: adapted.withheld },
        'config withheld from an older sidecar',
      );
      if (state.source !== BUILTIN_SOURCE) {
        this.#opts.listener.withheld(state.source, { namespace: conn.namespace, name: conn.podName, uid: conn.podUid }, snapshot.version, revision, adapted.withheld);
      }
    }
    return adapted.snapshot;
  }

  #countsChanged(source: string): void {
    if (source !== BUILTIN_SOURCE) this.#opts.listener.countsChanged(source);
  }
}

function podKey(conn: SidecarConnection): string {
  return conn.podUid ?? `${conn.namespace}/${conn.podName}`;
}

function revisionOf(conn: SidecarConnection): number {
  return conn.configRevision || FIRST_CONFIG_REVISION;
}

function namespaceOf(source: string): string {
  return source.slice(0, source.indexOf('/'));
}
