// The shape of a call's span, in one place (ADR 1700), for /proxy and every /v1 API: who made the call and how it
// is traced are the same on every span it makes; where it went (route, provider, model, project) is its target's.
// A call that fails or is refused before it reaches an upstream still gets one span, so every answer's
// X-Proxy-Span-Id can be looked up.

import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { CallMeter, CallStart, MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import type { RouteModule } from '../routes/route-module.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import type { TraceContext } from '../spans/trace-context.ts';

/** Who made the call and how it is traced: the same on each of its spans. */
export interface CallOrigin {
  readonly requestId: string;
  readonly trace: TraceContext;
  /** The span's user: the identity, the header, else the body's user. */
  readonly userId: string | null;
  /** The caller's x-tollgate-project, which wins over the route's configured project. */
  readonly projectHeader: string | null;
}

/** Where a call's span says it went, and what it did there. */
type SpanTarget = Omit<CallStart, 'requestId' | 'trace' | 'userId' | 'projectId'> & { userId?: string | null; projectId?: string | null };

/** The project a call on `route` is billed to: the caller's header, else the route's configured project. */
export function projectOf(origin: CallOrigin, route: RouteModule | undefined, config: RuntimeConfig): string | null {
  return origin.projectHeader ?? (route === undefined ? null : (upstreamOf(route, config)?.project ?? null));
}

/** Starts the call's span; `target` may name a user or project other than the origin's (a deferred result's submitter). */
export function startCallSpan(meter: CallMeter, origin: CallOrigin, target: SpanTarget): MeteredCall {
  return meter.start({
    ...target,
    userId: target.userId === undefined ? origin.userId : target.userId,
    projectId: target.projectId === undefined ? origin.projectHeader : target.projectId,
    requestId: origin.requestId,
    trace: origin.trace,
  });
}

/**
 * The span of a call that failed: the one it had started, else one of its own started now (a call refused
 * before it was planned: a body over the limit, bad JSON, an unknown model), naming what was known of it.
 */
export function failedCallSpan(meter: CallMeter, started: MeteredCall | null, origin: CallOrigin, known: SpanTarget): MeteredCall {
  return started ?? startCallSpan(meter, origin, known);
}

/** A call refused before anything went upstream: its span ends rejected, `error` its stable code and message. */
export function rejectCall(call: MeteredCall, prices: PriceTable, error: string): void {
  if (!call.finished) call.finish({ prices, usage: null, status: 'rejected', statusCode: null, error });
}
