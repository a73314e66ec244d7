// What is told about a finished call after its span is recorded: the metrics, the OTLP export, provenance.
// Here, beside the span, so those observers need nothing of the meter that calls them.

import type { Span } from './span.ts';

/** When a call's phases happened (performance.now()); NaN for a phase that never happened. */
export interface CallTimings {
  /** The call started (request received). */
  readonly start: number;
  /** The request left for the upstream. */
  readonly upstreamStart: number;
  /** The upstream's response headers arrived. */
  readonly upstreamHeaders: number;
  /** The upstream's response ended (or failed). */
  readonly upstreamEnd: number;
}

/**
 * Told about every finished call, after its span is recorded (the metrics, the OTLP export). `model` is the
 * price table's canonical id when an entry priced the call, else null. Must not throw and must not wait.
 */
export interface CallObserver {
  callFinished(span: Span, model: string | null, timings: CallTimings, sampled: boolean): void;
  /** One attempt of a call that fell back (a child of the call's span, no usage); for exporters of spans. */
  attemptFinished?(span: Span, sampled: boolean): void;
}
