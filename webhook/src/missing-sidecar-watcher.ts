// With failurePolicy Ignore, a pod admitted while the webhook was unreachable starts without the sidecar and
// nobody is told. This watcher lists and watches pods and reports each opted-in pod that lacks the sidecar as
// a Warning Event (reason SidecarMissing) on its owner. It keeps no copy of the pods: only the UIDs already
// reported, bounded. Each replica reports independently; an Event twice is cheaper than a leader election.

import { CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { NamespaceLabelLookup } from './admission/namespace-labels.ts';
import { eventTarget } from './events/event-target.ts';
import type { EventRecorder } from './events/event-recorder.ts';
import { skipReason } from './predicates.ts';

export interface MissingSidecarWatcherOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  ownNamespace: string;
  namespaceLabels: NamespaceLabelLookup;
  events: EventRecorder;
  maxRemembered?: number;
}

export interface MissingSidecarWatcher {
  start(): Promise<void>;
  stop(): void;
}

const MAX_BACKOFF_MS = 30_000;

export function missingSidecarWatcher(opts: MissingSidecarWatcherOptions): MissingSidecarWatcher {
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const log = opts.logger.child({ component: 'missing-sidecar-watcher' });
  const reported = new Set<string>();
  const maxRemembered = opts.maxRemembered ?? 10_000;
  let stopped = false;
  let abort: AbortController | undefined;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;

  async function check(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid;
    const namespace = pod.metadata?.namespace;
    if (!uid || !namespace || reported.has(uid)) return;
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed' || pod.metadata?.deletionTimestamp) return;
    const namespaceLabels = await opts.namespaceLabels(namespace);
    // No skip reason means: opted in, eligible, and not carrying the sidecar.
    if (skipReason({ pod, namespace, namespaceLabels, ownNamespace: opts.ownNamespace }) !== undefined) return;
    if (reported.size >= maxRemembered) reported.delete(reported.values().next().value!);
    reported.add(uid);
    const target = eventTarget(pod, namespace);
    log.warn({ namespace, pod: pod.metadata?.name }, 'opted-in pod is running without the Tollgate sidecar');
    if (target) {
      opts.events.record({
        regarding: target,
        type: 'Warning',
        reason: 'SidecarMissing',
        action: 'Inject',
        note: `pod ${pod.metadata?.name} opted in to Tollgate but has no sidecar (admitted while the webhook was unavailable under failurePolicy Ignore); recreate it to inject`,
      });
    }
  }

  function handle(pod: V1Pod): void {
    check(pod).catch((error: unknown) => log.warn({ err: error, pod: pod.metadata?.name }, 'missing-sidecar check failed'));
  }

  function scheduleRestart(reason: unknown): void {
    if (stopped) return;
    failures += 1;
    // Exponential backoff with full jitter, so replicas do not hammer a recovering API server in step.
    const delay = Math.random() * Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(failures, 10));
    if (reason) log.warn({ err: reason, delayMs: Math.round(delay) }, 'pod watch ended; restarting');
    retry = setTimeout(() => void run(), delay);
    retry.unref();
  }

  async function run(): Promise<void> {
    if (stopped) return;
    try {
      const list = await core.listPodForAllNamespaces();
      for (const pod of list.items) handle(pod);
      let resourceVersion = list.metadata?.resourceVersion;
      const watch = new Watch(opts.kubeConfig);
      abort = await watch.watch(
        '/api/v1/pods',
        { allowWatchBookmarks: true, resourceVersion },
        (phase, obj: V1Pod) => {
          failures = 0;
          if (obj?.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
          if (phase === 'ADDED' || phase === 'MODIFIED') handle(obj);
        },
        // Done (timeout, 410 Gone, network): relist and watch again. A relist re-checks every pod, but the
        // reported set keeps Events from repeating.
        (error: unknown) => scheduleRestart(error),
      );
    } catch (error) {
      scheduleRestart(error);
    }
  }

  return {
    async start() {
      stopped = false;
      await run();
    },
    stop() {
      stopped = true;
      clearTimeout(retry);
      abort?.abort();
    },
  };
}
