// With failurePolicy Ignore, a pod admitted while the webhook was unreachable starts without the sidecar and
// nobody is told. This watcher lists and watches pods and reports each opted-in pod that lacks the sidecar as
// a Warning Event (reason SidecarMissing) on its owner. Each replica reports independently; an Event twice is
// cheaper than a leader election.
//
// It runs on the same informer as the operator (kube-client/informer.ts: restarts with backoff, relists on
// 410 Gone, replaces stale watches, ADR 0702). The informer caches only what the skip predicates and the
// Event need from each pod, so a cluster's worth of pods costs a few hundred bytes each.

import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeApi, KubeObject } from '../../kube-client/api-client.ts';
import { Informer } from '../../kube-client/informer.ts';
import type { NamespaceLabelLookup } from './admission/namespace-labels.ts';
import { ANNOTATIONS, SELFTEST_LABEL } from './annotations.ts';
import { eventTarget } from './events/event-target.ts';
import type { PodEventQueue } from './events/pod-event-queue.ts';
import { skipReason } from './predicates.ts';
import { definedFields } from '../../contracts/json-record.ts';

export interface MissingSidecarWatcherOptions {
  api: KubeApi;
  logger: Logger;
  ownNamespace: string;
  namespaceLabels: NamespaceLabelLookup;
  events: PodEventQueue;
  maxRemembered?: number;
}

export interface MissingSidecarWatcher {
  /** Starts listing and watching in the background: a refused list must not hold up the webhook. */
  start(): void;
  stop(): Promise<void>;
}

type WatchedPod = V1Pod & KubeObject;

/** The fields skipReason() and eventTarget() read, and nothing else (annotations can be large). */
export function slimPod(pod: WatchedPod): WatchedPod {
  const { metadata, spec, status } = pod;
  const annotations: Record<string, string> = {};
  for (const key of [ANNOTATIONS.inject, ANNOTATIONS.status]) {
    const value = metadata.annotations?.[key];
    if (value !== undefined) annotations[key] = value;
  }
  return {
    metadata: {
      name: metadata.name,
      ...definedFields({ namespace: metadata.namespace, uid: metadata.uid, resourceVersion: metadata.resourceVersion }),
      annotations,
      // The one label the skip predicates read.
      ...(metadata.labels?.[SELFTEST_LABEL] !== undefined ? { labels: { [SELFTEST_LABEL]: metadata.labels[SELFTEST_LABEL] } } : {}),
      ...(metadata.deletionTimestamp ? { deletionTimestamp: metadata.deletionTimestamp } : {}),
      ...(pod.metadata.ownerReferences ? { ownerReferences: pod.metadata.ownerReferences } : {}),
    },
    spec: {
      containers: (spec?.containers ?? []).map((c) => ({ name: c.name })),
      initContainers: (spec?.initContainers ?? []).map((c) => ({ name: c.name })),
      ...(spec?.hostNetwork ? { hostNetwork: true } : {}),
    },
    ...(status?.phase ? { status: { phase: status.phase } } : {}),
  };
}

export function missingSidecarWatcher(opts: MissingSidecarWatcherOptions): MissingSidecarWatcher {
  const log = opts.logger.child({ component: 'missing-sidecar-watcher' });
  const reported = new Set<string>();
  const maxRemembered = opts.maxRemembered ?? 10_000;
  const pods = new Informer<WatchedPod>({ api: opts.api, path: '/api/v1/pods', logger: log, transform: slimPod });

  async function check(pod: WatchedPod): Promise<void> {
    const { uid, namespace } = pod.metadata;
    if (!uid || !namespace || reported.has(uid)) return;
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed' || pod.metadata.deletionTimestamp) return;
    const namespaceLabels = await opts.namespaceLabels(namespace);
    // No skip reason means: opted in, eligible, and not carrying the sidecar.
    if (skipReason({ pod, namespace, namespaceLabels, ownNamespace: opts.ownNamespace }) !== undefined) return;
    if (reported.size >= maxRemembered) reported.delete(reported.values().next().value!);
    reported.add(uid);
    const target = eventTarget(pod, namespace);
    log.warn({ namespace, pod: pod.metadata.name }, 'opted-in pod is running without the Tollgate sidecar');
    if (target) {
      opts.events.record({
        regarding: target,
        type: 'Warning',
        reason: 'SidecarMissing',
        action: 'Inject',
        note: `pod ${pod.metadata.name} opted in to Tollgate but has no sidecar (admitted while the webhook was unavailable under failurePolicy Ignore); recreate it to inject`,
      });
    }
  }

  function handle(pod: WatchedPod): void {
    check(pod).catch((error: unknown) => log.warn({ err: error, pod: pod.metadata.name }, 'missing-sidecar check failed'));
  }

  pods.on({
    add: handle,
    update: handle,
    delete: (pod) => {
      if (pod.metadata.uid) reported.delete(pod.metadata.uid);
    },
  });

  return {
    start() {
      pods.start();
    },
    stop() {
      return pods.stop();
    },
  };
}
