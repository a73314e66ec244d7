// Reconciles one ProxyConfig: render the spec, resolve its Secret references, publish the snapshot to the
// sidecar registry, and write status (Ready condition, observedGeneration, sidecar counts, configVersion)
// through the status subresource. Idempotent: it compares before it writes, and Accepted/Rejected events
// are recorded only when the Ready condition itself changes, so a new leader does not repeat them.

import type { Logger } from 'pino';
import { PROXY_CONFIG, type ProxyConfig, type ProxyConfigStatus } from '../../../crds/index.ts';
import { ConfigError } from '../../../contracts/config-error.ts';
import { type KubeApi, isStatus, splitKey } from '../../../kube-client/api-client.ts';
import { findCondition, setCondition } from '../kube/conditions.ts';
import { AUDIT_CONDITION, auditVerdict } from './audit-condition.ts';
import type { EventRecorder, ObjectReference } from '../../../kube-client/event-recorder.ts';
import type { Informer } from '../../../kube-client/informer.ts';
import { rfc3339 } from '../../../kube-client/micro-time.ts';
import type { SidecarRegistry } from '../push/sidecar-registry.ts';
import { buildSnapshot } from '../push/snapshot.ts';
import { referencedSecrets, render, resolveCredentials } from '../render.ts';
import type { SecretObject } from './secret-object.ts';

export type CachedProxyConfig = ProxyConfig & { metadata: { name: string; namespace: string } };

export interface ControllerDeps {
  api: KubeApi;
  logger: Logger;
  recorder: EventRecorder;
  proxyConfigs: Informer<CachedProxyConfig>;
  secrets: Informer<SecretObject>;
  registry: SidecarRegistry;
}

type Verdict = { ready: true; reason: 'Accepted'; message: string } | { ready: false; reason: string; message: string };

export function proxyConfigRef(pc: CachedProxyConfig): ObjectReference {
  return {
    apiVersion: PROXY_CONFIG.apiVersion,
    kind: PROXY_CONFIG.kind,
    name: pc.metadata.name,
    namespace: pc.metadata.namespace,
    ...(pc.metadata.uid ? { uid: pc.metadata.uid } : {}),
    ...(pc.metadata.resourceVersion ? { resourceVersion: pc.metadata.resourceVersion } : {}),
  };
}

export async function reconcileProxyConfig(key: string, deps: ControllerDeps): Promise<void> {
  const { registry, logger } = deps;
  const pc = deps.proxyConfigs.get(key);
  if (!pc || pc.metadata.deletionTimestamp) {
    registry.withdraw(key);
    return;
  }
  const { namespace } = splitKey(key);
  const generation = pc.metadata.generation;

  let verdict: Verdict;
  try {
    const rendered = render(pc.spec);
    const credentials = resolveCredentials(rendered.credentialRefs, (name) => deps.secrets.get(`${namespace}/${name}`));
    if (credentials.ok) {
      const secrets = referencedSecrets(pc.spec).map((name) => {
        const s = deps.secrets.get(`${namespace}/${name}`);
        return { name, uid: s?.metadata.uid, resourceVersion: s?.metadata.resourceVersion };
      });
      const snapshot = buildSnapshot(key, rendered.patch, credentials.values, secrets);
      registry.publish(snapshot);
      const creds = Object.keys(credentials.values).length;
      verdict = {
        ready: true,
        reason: 'Accepted',
        message: `config version ${snapshot.version} rendered${creds ? ` with ${creds} credential${creds === 1 ? '' : 's'}` : ''}`,
      };
    } else {
      verdict = { ready: false, reason: credentials.reason, message: credentials.message };
    }
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    verdict = { ready: false, reason: 'InvalidConfig', message: `spec.${error.message}` };
  }

  const before = findCondition(pc.status?.conditions, 'Ready');
  const conditions = setCondition(
    pc.status?.conditions,
    {
      type: 'Ready',
      status: verdict.ready ? 'True' : 'False',
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
      reason: verdict.reason,
      message: verdict.message,
    },
    rfc3339(),
  );
  // AuditDelivering only while spec.audit asks for a fan-out.
  const withAudit = pc.spec?.audit
    ? (() => {
        const audit = auditVerdict(registry.auditReports(key));
        return setCondition(conditions, { type: AUDIT_CONDITION, ...audit, ...(generation !== undefined ? { observedGeneration: generation } : {}) }, rfc3339());
      })()
    : conditions.filter((c) => c.type !== AUDIT_CONDITION);
  const counts = registry.counts(key);
  const version = registry.snapshot(key)?.version;
  const status: ProxyConfigStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions: withAudit,
    sidecars: counts,
    ...(version ? { configVersion: version } : {}),
  };
  if (!sameStatus(pc.status, status)) {
    try {
      await deps.api.patch(`/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}/namespaces/${namespace}/${PROXY_CONFIG.plural}/${pc.metadata.name}/status`, { status });
    } catch (error) {
      if (isStatus(error, 404)) return; // deleted meanwhile; the delete event reconciles again
      throw error;
    }
  }

  const after = findCondition(conditions, 'Ready')!;
  const changed =
    !before || before.status !== after.status || before.reason !== after.reason || before.message !== after.message || before.observedGeneration !== after.observedGeneration;
  if (changed) {
    if (verdict.ready) logger.info({ proxyConfig: key, generation, version }, 'ProxyConfig accepted');
    else logger.warn({ proxyConfig: key, generation, reason: verdict.reason, message: verdict.message }, 'ProxyConfig rejected');
    await deps.recorder.record({
      regarding: proxyConfigRef(pc),
      type: verdict.ready ? 'Normal' : 'Warning',
      reason: verdict.ready ? 'Accepted' : 'Rejected',
      action: 'Reconcile',
      note: verdict.ready ? `Generation ${generation ?? '?'} accepted: ${verdict.message}` : `Generation ${generation ?? '?'} rejected (${verdict.reason}): ${verdict.message}`,
    });
  }
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
  };
}
