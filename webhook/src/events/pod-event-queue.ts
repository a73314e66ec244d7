// Events written off the admission path: admission answers first, a bounded queue drains in the background
// through the shared events.k8s.io/v1 recorder. When the queue is full the newest Event is dropped, counted and
// logged; an Event is a courtesy and must never slow down or fail a pod creation.

import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { KubeApi } from '../../../kube-client/api-client.ts';
import { EventRecorder, type EventInput } from '../../../kube-client/event-recorder.ts';

export type PodEvent = Omit<EventInput, 'related'>;

/** Pod Events waiting to be written; `record` never blocks (the Kubernetes writer is kube-client's EventRecorder). */
export interface PodEventQueue {
  record(event: PodEvent): void;
  /** Resolves once every queued Event has been written or has failed. */
  flush(): Promise<void>;
  readonly dropped: number;
}

export const REPORTING_CONTROLLER = 'tollgate.dev/webhook';

export function createPodEventQueue(opts: { api: KubeApi; logger: Logger; capacity?: number; reportingInstance?: string }): PodEventQueue {
  const recorder = new EventRecorder(opts.api, {
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: opts.reportingInstance ?? hostname(),
    logger: opts.logger,
  });
  const capacity = opts.capacity ?? 1000;
  const queue: PodEvent[] = [];
  let dropped = 0;
  let draining: Promise<void> | undefined;

  async function drain(): Promise<void> {
    // record() logs and swallows its own failures, so one bad Event never stops the queue.
    for (let event = queue.shift(); event; event = queue.shift()) await recorder.record(event);
    draining = undefined;
  }

  return {
    record(event) {
      if (queue.length >= capacity) {
        dropped += 1;
        opts.logger.warn({ dropped, reason: event.reason }, 'event queue full, event dropped');
        return;
      }
      queue.push(event);
      draining ??= drain();
    },
    async flush() {
      while (draining) await draining;
    },
    get dropped() {
      return dropped;
    },
  };
}
