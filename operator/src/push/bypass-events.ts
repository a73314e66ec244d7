// A sidecar's bypass report (proto BypassReport, ADR 1605) as Kubernetes Events: a Warning `ProviderBypass` on the
// sidecar's own Pod, named by the push stream's token review, never by the report. What one sidecar can make the
// operator write is bounded whatever it sends: a report beyond BYPASS_REPORT_LIMITS is refused whole (with a log
// line at most once a minute per pod), one Event a minute per pod, binary and provider (the connects held back are counted in the next one), and
// at most EVENTS_PER_POD_PER_MINUTE per pod. The recorder writes one Event object per call (no series), so
// a repeat within the minute writes nothing.

import type { Logger } from 'pino';
import type { EventRecorder } from '../../../kube-client/event-recorder.ts';
import { BYPASS_REPORT_LIMITS, type BypassEntryMessage, type BypassReportMessage } from '../../../contracts/push-protocol.ts';

export const BYPASS_EVENT_INTERVAL_MS = 60_000;
/** A pod whose processes all bypass the sidecar gets this many Events a minute, not one per binary it can invent. */
export const EVENTS_PER_POD_PER_MINUTE = 10;
/** Pod, binary and provider keys remembered for the rate limit; the oldest is forgotten first. */
const MAX_KEYS = 10_000;

export type BypassEntryOutcome = 'recorded' | 'rate_limited' | 'refused';

export interface BypassEventCounter {
  bypassEntries(outcome: BypassEntryOutcome, count: number): void;
}

/** The reporting sidecar's pod, from its token review. */
export interface BypassPod {
  namespace: string;
  pod: string;
  podUid: string;
}

export interface BypassEventsOptions {
  recorder: Pick<EventRecorder, 'record'>;
  logger: Logger;
  metrics?: BypassEventCounter | undefined;
  now?: () => number;
}

interface KeyState {
  at: number;
  /** Connects reported since the last Event, not in one yet. */
  held: number;
}

export class BypassEvents {
  readonly #opts: BypassEventsOptions;
  readonly #keys = new Map<string, KeyState>();
  /** Per pod uid: when its current minute started and the Events recorded in it. */
  readonly #pods = new Map<string, { since: number; events: number }>();
  /** Per pod uid: when its last refusal was logged and the refused reports since, not logged. */
  readonly #refusalLogs = new Map<string, { at: number; suppressed: number }>();

  constructor(opts: BypassEventsOptions) {
    this.#opts = opts;
  }

  report(pod: BypassPod, report: BypassReportMessage): void {
    const entries: unknown = report?.entries;
    const problem = reportProblem(entries);
    if (problem !== undefined) {
      const count = Array.isArray(entries) ? entries.length : 0;
      this.#opts.metrics?.bypassEntries('refused', count);
      this.#logRefusal(pod, count, problem);
      return;
    }
    for (const entry of entries as BypassEntryMessage[]) this.#entry(pod, entry);
  }

  /** A stream can send refused reports as fast as it likes: one line a minute per pod, counting the others. */
  #logRefusal(pod: BypassPod, entries: number, problem: string): void {
    const now = (this.#opts.now ?? Date.now)();
    const last = this.#refusalLogs.get(pod.podUid);
    if (last && now - last.at < BYPASS_EVENT_INTERVAL_MS) {
      last.suppressed++;
      return;
    }
    this.#refusalLogs.delete(pod.podUid);
    if (this.#refusalLogs.size >= MAX_KEYS) this.#refusalLogs.delete(this.#refusalLogs.keys().next().value!);
    this.#refusalLogs.set(pod.podUid, { at: now, suppressed: 0 });
    this.#opts.logger.warn({ pod: `${pod.namespace}/${pod.pod}`, entries, problem, suppressed: last?.suppressed ?? 0 }, `bypass report refused: ${problem}`);
  }

  #entry(pod: BypassPod, entry: BypassEntryMessage): void {
    const now = (this.#opts.now ?? Date.now)();
    const key = `${pod.podUid}\u0000${entry.binary}\u0000${entry.provider}`;
    const state = this.#keys.get(key);
    const connects = Math.max(1, entry.connects);
    if ((state && now - state.at < BYPASS_EVENT_INTERVAL_MS) || !this.#podAllows(pod.podUid, now)) {
      if (state) state.held += connects;
      this.#opts.metrics?.bypassEntries('rate_limited', 1);
      return;
    }
    const total = connects + (state?.held ?? 0);
    this.#remember(key, { at: now, held: 0 });
    this.#opts.metrics?.bypassEntries('recorded', 1);
    void this.#opts.recorder.record({
      regarding: { apiVersion: 'v1', kind: 'Pod', name: pod.pod, namespace: pod.namespace, uid: pod.podUid },
      type: 'Warning',
      reason: 'ProviderBypass',
      action: 'Connect',
      note: bypassNote(entry, total),
    });
  }

  #podAllows(uid: string, now: number): boolean {
    let minute = this.#pods.get(uid);
    if (!minute || now - minute.since >= BYPASS_EVENT_INTERVAL_MS) {
      this.#pods.delete(uid);
      if (this.#pods.size >= MAX_KEYS) this.#pods.delete(this.#pods.keys().next().value!);
      minute = { since: now, events: 0 };
      this.#pods.set(uid, minute);
    }
    if (minute.events >= EVENTS_PER_POD_PER_MINUTE) return false;
    minute.events++;
    return true;
  }

  #remember(key: string, state: KeyState): void {
    this.#keys.delete(key);
    if (this.#keys.size >= MAX_KEYS) this.#keys.delete(this.#keys.keys().next().value!);
    this.#keys.set(key, state);
  }
}

/** e.g. `process /usr/bin/curl (pid 4242, container app) connected to openai at 162.159.140.245:443 without the sidecar (3 connects)`. */
export function bypassNote(entry: BypassEntryMessage, connects: number): string {
  const container = entry.container === '' ? 'unknown container' : `container ${printable(entry.container)}`;
  return (
    `process ${printable(entry.binary) || '(unknown binary)'} (pid ${entry.pid}, ${container}) connected to ${printable(entry.provider)} at ` +
    `${printable(entry.destination)} without the sidecar (${connects} connect${connects === 1 ? '' : 's'})`
  );
}

/**
 * A file name may hold a line break, which must not start a line of its own in `kubectl describe`, or a C1 control
 * (U+009B is a terminal's CSI) that a terminal would act on.
 */
function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
}

const STRING_FIELDS = ['provider', 'binary', 'container', 'destination'] as const;

/** Why a report cannot be taken as it is, or undefined. */
function reportProblem(entries: unknown): string | undefined {
  if (!Array.isArray(entries)) return 'entries is not a list';
  if (entries.length > BYPASS_REPORT_LIMITS.entries) return `${entries.length} entries, more than ${BYPASS_REPORT_LIMITS.entries}`;
  for (const [index, entry] of (entries as BypassEntryMessage[]).entries()) {
    for (const field of STRING_FIELDS) {
      const value: unknown = entry?.[field];
      if (typeof value !== 'string') return `entries[${index}].${field} is not a string`;
      if (value.length > BYPASS_REPORT_LIMITS[field]) return `entries[${index}].${field} is ${value.length} characters, more than ${BYPASS_REPORT_LIMITS[field]}`;
    }
    if (entry.provider === '' || entry.destination === '') return `entries[${index}] names no provider or destination`;
    if (!Number.isSafeInteger(entry.pid) || !Number.isSafeInteger(entry.connects)) return `entries[${index}] has no whole pid or connects`;
  }
  return undefined;
}
