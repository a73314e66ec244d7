// Events (events.k8s.io/v1) written off the admission path: admission answers first, a bounded queue drains
// in the background. When the queue is full the newest Event is dropped, counted and logged; an Event is a
// courtesy and must never slow down or fail a pod creation.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { EventsV1Api, V1MicroTime, type KubeConfig, type V1ObjectReference } from '@kubernetes/client-node';
import type { Logger } from 'pino';

export interface PodEvent {
  regarding: V1ObjectReference;
  type: 'Normal' | 'Warning';
  reason: string;
  action: string;
  note: string;
}

export interface EventRecorder {
  record(event: PodEvent): void;
  /** Resolves once every queued Event has been written or has failed. */
  flush(): Promise<void>;
  readonly dropped: number;
}

export const REPORTING_CONTROLLER = 'tollgate.dev/webhook';
const NOTE_LIMIT = 1024; // the API server rejects longer notes

export function createEventRecorder(opts: {
  kubeConfig: KubeConfig;
  logger: Logger;
  capacity?: number;
  reportingInstance?: string;
}): EventRecorder {
  const api = opts.kubeConfig.makeApiClient(EventsV1Api);
  const capacity = opts.capacity ?? 1000;
  const instance = (opts.reportingInstance ?? hostname()).slice(0, 128);
  const queue: PodEvent[] = [];
  let dropped = 0;
  let draining: Promise<void> | undefined;

  async function write(event: PodEvent): Promise<void> {
    const namespace = event.regarding.namespace ?? 'default';
    const note = event.note.length > NOTE_LIMIT ? `${event.note.slice(0, NOTE_LIMIT - 1)}…` : event.note;
    await api.createNamespacedEvent({
      namespace,
      body: {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name: `${event.regarding.name ?? 'pod'}.${randomBytes(8).toString('hex')}`, namespace },
        eventTime: new V1MicroTime(),
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: instance,
        action: event.action,
        reason: event.reason,
        type: event.type,
        regarding: event.regarding,
        note,
      },
    });
  }

  async function drain(): Promise<void> {
    for (let event = queue.shift(); event; event = queue.shift()) {
      try {
        await write(event);
      } catch (error) {
        opts.logger.warn({ err: error, reason: event.reason, regarding: event.regarding }, 'failed to write event');
      }
    }
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
