// Kubernetes Events through events.k8s.io/v1 (regarding, related, action, reason, note), for the operator and
// the webhook alike. Recording is best effort: a failed Event is logged and never fails a reconcile or an
// admission. Notes are plain text; callers must not put credential values in them (they never have them at
// hand: only Secret names and keys).

import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeApi } from './api-client.ts';
import { microTime } from './micro-time.ts';

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventInput {
  regarding: ObjectReference;
  related?: ObjectReference;
  type: 'Normal' | 'Warning';
  /** CamelCase: Accepted, Rejected, Pushed, SidecarRejected, Injected, Skipped, SidecarMissing. */
  reason: string;
  /** What the component did: Reconcile, Push, Apply, Inject. */
  action: string;
  note: string;
}

const NOTE_LIMIT = 1024; // the API server refuses longer notes

export interface EventRecorderOptions {
  /** Which component reports: tollgate.dev/operator, tollgate.dev/webhook. */
  reportingController: string;
  /** Which replica reports (the pod name). */
  reportingInstance: string;
  logger: Logger;
}

export class EventRecorder {
  #api: KubeApi;
  #opts: EventRecorderOptions;

  constructor(api: KubeApi, opts: EventRecorderOptions) {
    this.#api = api;
    this.#opts = opts;
  }

  async record(input: EventInput): Promise<void> {
    const ns = input.regarding.namespace;
    const note = input.note.length > NOTE_LIMIT ? `${input.note.slice(0, NOTE_LIMIT - 3)}...` : input.note;
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${input.regarding.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`, namespace: ns },
      eventTime: microTime(),
      reportingController: this.#opts.reportingController,
      reportingInstance: this.#opts.reportingInstance.slice(0, 128),
      regarding: input.regarding,
      ...(input.related ? { related: input.related } : {}),
      type: input.type,
      reason: input.reason,
      action: input.action,
      note,
    };
    try {
      await this.#api.post(`/apis/events.k8s.io/v1/namespaces/${ns}/events`, body);
    } catch (error) {
      this.#opts.logger.warn(
        { err: error instanceof Error ? error.message : String(error), reason: input.reason, object: `${ns}/${input.regarding.name}` },
        'could not record event',
      );
    }
  }
}
