// Between a finished call and where its span goes (the span writer, the OTLP export). With provenance on, a span
// whose connection is not attributed yet is held until it is or until the attribution window has passed, then
// written with what is known (`unattributed` at worst): the call itself never waited (ADR 1600). Held spans are
// bounded; past the bound a span goes on unattributed at once, counted. With provenance off a span passes
// straight through.

import type { CallObserver, CallTimings } from '../spans/call-observer.ts';
import type { Span, SpanProcess } from '../spans/span.ts';
import type { ConnectionTracker } from './connection-tracker.ts';

export interface SpanRecorder {
  record(span: Span): void;
}

export const UNATTRIBUTED: Readonly<SpanProcess> = Object.freeze({
  attribution: 'unattributed',
  pid: null,
  executablePath: null,
  commandArgs: null,
  parentExecutables: [],
  containerName: null,
});

interface Held {
  state: { process: SpanProcess | null };
  releases: (() => void)[];
}

export const MAX_HELD_SPANS = 10_000;

export class SpanGate implements SpanRecorder {
  readonly #inner: SpanRecorder;
  readonly #held = new Map<Span, Held>();
  #tracker: ConnectionTracker | null = null;
  #windowMs = 0;
  #overflow = 0;

  constructor(inner: SpanRecorder) {
    this.#inner = inner;
  }

  /** Provenance on (a tracker and its window) or off (null): spans pass straight through. */
  follow(tracker: ConnectionTracker | null, windowMs: number): void {
    this.#tracker = tracker;
    this.#windowMs = windowMs;
  }

  /** Answers are read for their tool calls while provenance is on (ADR 1603). */
  get recordsToolCalls(): boolean {
    return this.#tracker !== null;
  }

  get held(): number {
    return this.#held.size;
  }

  /** Spans that went on unattributed because too many were held. */
  get overflow(): number {
    return this.#overflow;
  }

  record(span: Span): void {
    const tracker = this.#tracker;
    if (tracker === null) {
      // A call whose answer was read while provenance was still on: off now, the span says nothing of it.
      if (span.toolCalls !== undefined) span.toolCalls = undefined;
      this.#inner.record(span);
      return;
    }
    // With provenance on every span says what tool calls its answer asked for, none included (ADR 1603).
    span.toolCalls ??= [];
    const state = tracker.connectionOf(span.requestId);
    if (state?.process || state === undefined || this.#windowMs === 0 || this.#held.size >= MAX_HELD_SPANS) {
      if (state !== undefined && state.process === null && this.#windowMs > 0) this.#overflow++;
      span.process = state?.process ?? UNATTRIBUTED;
      this.#inner.record(span);
      return;
    }
    const held: Held = { state, releases: [() => this.#inner.record(span)] };
    this.#held.set(span, held);
    const release = () => {
      clearTimeout(timer);
      state.waiters.delete(release);
      if (!this.#held.delete(span)) return;
      span.process = state.process ?? UNATTRIBUTED;
      for (const go of held.releases) go();
    };
    const timer = setTimeout(release, this.#windowMs);
    timer.unref();
    state.waiters.add(release);
  }

  /** An observer that sees each span when the gate lets it go (the OTLP export must carry the process too). */
  delayed(observer: CallObserver): CallObserver {
    return {
      callFinished: (span: Span, model: string | null, timings: CallTimings, sampled: boolean) => {
        const held = this.#held.get(span);
        if (held) held.releases.push(() => observer.callFinished(span, model, timings, sampled));
        else observer.callFinished(span, model, timings, sampled);
      },
      attemptFinished: (span: Span, sampled: boolean) => {
        const held = this.#held.get(span);
        if (held) held.releases.push(() => observer.attemptFinished?.(span, sampled));
        else observer.attemptFinished?.(span, sampled);
      },
    };
  }

  /** Shutdown: every held span goes on now with what is known. */
  releaseAll(): void {
    for (const [span, held] of [...this.#held]) {
      this.#held.delete(span);
      span.process = held.state.process ?? UNATTRIBUTED;
      for (const go of held.releases) go();
    }
  }
}
