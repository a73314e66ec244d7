// Reconciles one ProxyConfig: render the spec, resolve its Secret references, publish the snapshot to the
// sidecar registry, and write status (Ready condition, observedGeneration, sidecar counts, configVersion)
// through the status subresource. Idempotent: it compares before it writes, and Accepted/Rejected events
// are recorded only when the Ready condition itself changes, so a new leader does not repeat them.

import type { Logger } from 'pino';
import { type ModelAliasStatus, PROXY_CONFIG, type ProxyConfig, type ProxyConfigStatus } from '../../../crds/index.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { type KubeApi, objectKey, splitKey } from '../../../kube-client/api-client.ts';
import { type Condition, setCondition } from '../kube/conditions.ts';
import { objectReference, setReady, type Verdict, verdictEvent, writeStatus } from '../kube/ready-condition.ts';
import { AUDIT_CONDITION, auditVerdict } from './audit-condition.ts';
import { aliasEvents, aliasStatus, comparableAliasStatus, DEFAULT_ALIAS_DEGRADED_AFTER_MS } from './alias-status.ts';
import type { EventRecorder, ObjectReference } from '../../../kube-client/event-recorder.ts';
import type { Informer } from '../../../kube-client/informer.ts';
import { rfc3339 } from '../../../kube-client/micro-time.ts';
import { type RegistryListener, SidecarRegistry } from '../push/sidecar-registry.ts';
import { type ReconcileResult, runWorkers, WorkQueue, type Workers } from '../kube/work-queue.ts';
import type { OperatorMetrics } from '../metrics/operator-metrics.ts';
import { buildSnapshot } from '../push/snapshot.ts';
import { referencedSecrets, render, resolveCredentials } from '../render.ts';
import type { SecretObject } from './secret-object.ts';
import { ENFORCEMENT_CONDITION, type EnforcementDeps, reconcileBypassPolicy } from '../enforcement/bypass-enforcement.ts';
import { resolveWithDns } from '../enforcement/provider-dns.ts';

export type CachedProxyConfig = ProxyConfig & { metadata: { name: string; namespace: string } };

export interface ControllerDeps {
  api: KubeApi;
  logger: Logger;
  recorder: EventRecorder;
  proxyConfigs: Informer<CachedProxyConfig>;
  secrets: Informer<SecretObject>;
  registry: SidecarRegistry;
  /** How long an alias may be served below its first priority before AliasDegraded (ADR 0724). */
  aliasDegradedAfterMs: number;
  /** Per ProxyConfig, whether each alias was last announced degraded: no Event twice while the cache lags our writes. */
  aliasAnnounced: Map<string, Map<string, boolean>>;
  /** spec.provenance.enforcement: the Tetragon bypass policy (ADR 1602). */
  enforcement: EnforcementDeps;
}

export function proxyConfigRef(pc: CachedProxyConfig): ObjectReference {
  return objectReference(PROXY_CONFIG, pc);
}

export async function reconcileProxyConfig(key: string, deps: ControllerDeps): Promise<ReconcileResult | void> {
  const { registry, logger } = deps;
  const pc = deps.proxyConfigs.get(key);
  if (!pc || pc.metadata.deletionTimestamp) {
    registry.withdraw(key);
    deps.aliasAnnounced.delete(key);
    // Its bypass policy, if any, goes with it through the owner reference.
    deps.enforcement.recent.delete(key);
    return;
  }
  const generation = pc.metadata.generation;
  const verdict = publish(key, pc, deps);
  // The message names the config version: a new version is news even while Ready stays True.
  const ready = setReady(pc.status?.conditions, verdict, { generation, compareMessage: true });
  const enforcement = await enforceBypassPolicy(pc, ready.conditions, deps);
  // What the sidecars running the last good snapshot report of its aliases; looked at again when one turns degraded.
  const aliases = aliasStatus(registry.aliasModels(key), registry.aliasReports(key), pc.status?.models, { now: Date.now(), degradedAfterMs: deps.aliasDegradedAfterMs });
  const status = statusOf(key, pc, enforcement.conditions, registry, aliases.models);
  // A merge patch keeps a field it does not name: status.models of aliases now gone is removed with null.
  const patch = pc.status?.models && !status.models ? { ...status, models: null } : status;
  if (!sameStatus(pc.status, status) && !(await writeStatus(deps.api, PROXY_CONFIG, key, patch))) return;
  await announceAliases(key, pc, aliases.models, deps);
  await enforcement.announce();
  const recheck = [aliases.recheckInMs, enforcement.requeueAfterMs].filter((ms) => ms !== undefined);
  const next = recheck.length === 0 ? undefined : { requeueAfterMs: Math.min(...recheck) };
  if (!ready.changed) return next;
  if (verdict.ready) logger.info({ proxyConfig: key, generation, version: status.configVersion }, 'ProxyConfig accepted');
  else logger.warn({ proxyConfig: key, generation, reason: verdict.reason, message: verdict.message }, 'ProxyConfig rejected');
  await deps.recorder.record(verdictEvent(proxyConfigRef(pc), verdict, generation));
  return next;
}

/** AliasDegraded / AliasRecovered for each alias whose `degraded` changed since it was last announced (ADR 0724). */
async function announceAliases(key: string, pc: CachedProxyConfig, models: readonly ModelAliasStatus[], deps: ControllerDeps): Promise<void> {
  const before = deps.aliasAnnounced.get(key);
  const announced = (alias: string) => before?.get(alias) ?? pc.status?.models?.find((m) => m.alias === alias)?.degraded === true;
  const events = aliasEvents(models, announced, deps.aliasDegradedAfterMs);
  if (models.length > 0) deps.aliasAnnounced.set(key, new Map(models.map((m) => [m.alias, m.degraded === true])));
  else deps.aliasAnnounced.delete(key);
  for (const event of events) {
    if (event.type === 'Warning') deps.logger.warn({ proxyConfig: key, alias: event.alias, note: event.note }, 'model alias degraded');
    else deps.logger.info({ proxyConfig: key, alias: event.alias, note: event.note }, 'model alias recovered');
    await deps.recorder.record({ regarding: proxyConfigRef(pc), type: event.type, reason: event.reason, action: 'Serve', note: event.note });
  }
}

/**
 * Applies or deletes the bypass policy and sets the BypassEnforcement condition; `announce` records a Warning
 * (or Normal) Event and a log line when the condition's status or reason changed, after the status is written.
 */
async function enforceBypassPolicy(pc: CachedProxyConfig, conditions: Condition[], deps: ControllerDeps) {
  const before = pc.status?.conditions?.find((c) => c.type === ENFORCEMENT_CONDITION);
  const outcome = await reconcileBypassPolicy(pc, deps.enforcement);
  const { condition } = outcome;
  const generation = pc.metadata.generation;
  const next = condition
    ? setCondition(conditions, { type: ENFORCEMENT_CONDITION, ...condition, ...(generation !== undefined ? { observedGeneration: generation } : {}) }, rfc3339())
    : conditions.filter((c) => c.type !== ENFORCEMENT_CONDITION);
  const announce = async () => {
    if (!condition || (before?.status === condition.status && before.reason === condition.reason)) return;
    const key = objectKey(pc);
    if (condition.status === 'True') deps.logger.info({ proxyConfig: key, reason: condition.reason, message: condition.message }, 'bypass policy applied');
    else deps.logger.warn({ proxyConfig: key, reason: condition.reason, message: condition.message }, 'bypass enforcement unavailable');
    const type = condition.status === 'True' ? 'Normal' : 'Warning';
    await deps.recorder.record({
      regarding: proxyConfigRef(pc),
      type,
      reason: condition.status === 'True' ? 'BypassPolicyApplied' : condition.reason,
      action: 'Enforce',
      note: condition.message,
    });
  };
  return { conditions: next, requeueAfterMs: outcome.requeueAfterMs, announce };
}

/** Renders the spec, resolves its Secrets and publishes the snapshot; the verdict says how that went. */
function publish(key: string, pc: CachedProxyConfig, deps: ControllerDeps): Verdict {
  const { namespace } = splitKey(key);
  try {
    const rendered = render(pc.spec);
    const credentials = resolveCredentials(rendered.credentialRefs, (name) => deps.secrets.get(`${namespace}/${name}`));
    if (!credentials.ok) return { ready: false, reason: credentials.reason, message: credentials.message };
    const secrets = referencedSecrets(pc.spec).map((name) => {
      const s = deps.secrets.get(`${namespace}/${name}`);
      return { name, uid: s?.metadata.uid, resourceVersion: s?.metadata.resourceVersion };
    });
    const snapshot = buildSnapshot(key, rendered.patch, credentials.values, secrets);
    deps.registry.publish(snapshot);
    const creds = Object.keys(credentials.values).length;
    return {
      ready: true,
      reason: 'Accepted',
      message: `config version ${snapshot.version} rendered${creds ? ` with ${creds} credential${creds === 1 ? '' : 's'}` : ''}`,
    };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { ready: false, reason: 'InvalidConfig', message: `spec.${error.message}` };
  }
}

/** The status to write: conditions (AuditDelivering only while spec.audit asks for a fan-out), sidecar counts, version. */
function statusOf(key: string, pc: CachedProxyConfig, conditions: Condition[], registry: SidecarRegistry, models: ModelAliasStatus[]): ProxyConfigStatus {
  const generation = pc.metadata.generation;
  const observed = generation !== undefined ? { observedGeneration: generation } : {};
  const withAudit = pc.spec?.audit
    ? setCondition(conditions, { type: AUDIT_CONDITION, ...auditVerdict(registry.auditReports(key)), ...observed }, rfc3339())
    : conditions.filter((c) => c.type !== AUDIT_CONDITION);
  const version = registry.snapshot(key)?.version;
  return {
    ...observed,
    conditions: withAudit,
    sidecars: registry.counts(key),
    ...(version ? { configVersion: version } : {}),
    ...(models.length > 0 ? { models } : {}),
  };
}

function sameStatus(a: ProxyConfigStatus | undefined, b: ProxyConfigStatus): boolean {
  return JSON.stringify(normalise(a)) === JSON.stringify(normalise(b));
}

function normalise(s: ProxyConfigStatus | undefined): unknown {
  if (!s) return null;
  return {
    observedGeneration: s.observedGeneration ?? null,
    conditions: (s.conditions ?? []).map((c) => [c.type, c.status, c.observedGeneration ?? null, c.lastTransitionTime, c.reason, c.message]),
    sidecars: [s.sidecars?.connected ?? 0, s.sidecars?.current ?? 0],
    configVersion: s.configVersion ?? null,
    models: comparableAliasStatus(s.models),
  };
}

/** The ProxyConfig controller while this replica leads: its queue and workers, and the sidecars it pushes to. */
export class ProxyConfigController {
  readonly queue: WorkQueue;
  readonly registry: SidecarRegistry;
  readonly #deps: ControllerDeps;
  #workers: Workers | undefined;

  constructor(
    opts: Omit<ControllerDeps, 'registry' | 'aliasDegradedAfterMs' | 'aliasAnnounced' | 'enforcement'> & {
      metrics?: OperatorMetrics | undefined;
      aliasDegradedAfterMs?: number | undefined;
    },
  ) {
    const { logger, proxyConfigs } = opts;
    this.queue = new WorkQueue(undefined, opts.metrics);
    this.registry = new SidecarRegistry({
      counter: opts.metrics,
      exists: (key) => proxyConfigs.get(key) !== undefined,
      logger: logger.child({ component: 'push' }),
      listener: pushEvents(opts, this.queue),
    });
    this.#deps = {
      ...opts,
      registry: this.registry,
      aliasDegradedAfterMs: opts.aliasDegradedAfterMs ?? DEFAULT_ALIAS_DEGRADED_AFTER_MS,
      aliasAnnounced: new Map(),
      enforcement: { api: opts.api, resolve: resolveWithDns, recent: new Map(), now: Date.now },
    };
  }

  /**
   * The controller's watches, registered once on the informers (which run on every replica): a ProxyConfig,
   * and a Secret it refers to, queue the ProxyConfig on whichever controller leads now (`current`).
   */
  static watch(caches: { proxyConfigs: Informer<CachedProxyConfig>; secrets: Informer<SecretObject> }, current: () => ProxyConfigController | undefined): void {
    const enqueue = (key: string) => current()?.queue.add(key);
    const added = (pc: CachedProxyConfig) => {
      enqueue(objectKey(pc));
      // Sidecars of the namespace may bind to another ProxyConfig now.
      current()?.registry.rebind(pc.metadata.namespace);
    };
    caches.proxyConfigs.on({ add: added, update: (pc) => enqueue(objectKey(pc)), delete: added });
    const secretChanged = (secret: SecretObject) => {
      const ns = secret.metadata.namespace ?? '';
      for (const pc of caches.proxyConfigs.list(ns)) {
        if (referencedSecrets(pc.spec).includes(secret.metadata.name)) enqueue(objectKey(pc));
      }
    };
    caches.secrets.on({ add: secretChanged, update: secretChanged, delete: secretChanged });
  }

  /** Starts `count` workers and queues every ProxyConfig in the cache. */
  start(count: number): void {
    const { logger } = this.#deps;
    this.#workers = runWorkers(
      this.queue,
      count,
      (key) => reconcileProxyConfig(key, this.#deps),
      (key, error, retryInMs) => logger.warn({ proxyConfig: key, err: error instanceof Error ? error.message : String(error), retryInMs }, 'reconcile failed; retrying'),
    );
    for (const pc of this.#deps.proxyConfigs.list()) this.queue.add(objectKey(pc));
  }

  async stop(): Promise<void> {
    await this.#workers?.stop();
    this.registry.close();
  }
}

/** What the registry reports becomes status (counts), a log line and Events on the ProxyConfig. */
function pushEvents(deps: Pick<ControllerDeps, 'logger' | 'recorder' | 'proxyConfigs'>, queue: WorkQueue): RegistryListener {
  const { logger, recorder, proxyConfigs } = deps;
  /** A Warning on the ProxyConfig `source` about one sidecar, with its pod as the related object. */
  function podWarning(source: string, pod: { namespace: string; name: string; uid?: string | undefined }, reason: string, action: string, note: string): void {
    const pc = proxyConfigs.get(source);
    if (!pc) return;
    void recorder.record({
      regarding: proxyConfigRef(pc),
      related: { apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: pod.namespace, ...(pod.uid ? { uid: pod.uid } : {}) },
      type: 'Warning',
      reason,
      action,
      note,
    });
  }
  return {
    countsChanged: (source) => queue.add(source),
    pushed: (source, version, count) => {
      const pc = proxyConfigs.get(source);
      if (!pc) return;
      logger.info({ proxyConfig: source, version, sidecars: count }, 'config pushed');
      void recorder.record({
        regarding: proxyConfigRef(pc),
        type: 'Normal',
        reason: 'Pushed',
        action: 'Push',
        note: `Pushed config version ${version} to ${count} sidecar${count === 1 ? '' : 's'}`,
      });
    },
    rejected: (source, pod, version, reason) =>
      podWarning(source, pod, 'SidecarRejected', 'Apply', `Sidecar of pod ${pod.namespace}/${pod.name} rejected config version ${version}: ${reason}`),
    withheld: (source, pod, version, revision, fields) =>
      podWarning(
        source,
        pod,
        'ConfigWithheld',
        'Push',
        `Sidecar of pod ${pod.namespace}/${pod.name} runs config revision ${revision}, older than these settings of version ${version}: ${fields.join('; ')}. It got the rest; recreate the pod to run them`,
      ),
  };
}
