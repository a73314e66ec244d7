// A call's W3C trace context at each of its edges, in one place (ADR 1700): taken from the caller's traceparent
// and tracestate, sent upstream as the call's own span, and named on the caller's answer (X-Proxy-Span-Id,
// X-Proxy-Trace-Id) so that every answer, a refusal's too, can be looked up.

import { headerValue } from '../../../contracts/header-value.ts';
import { formatTraceparent, startSpanContext, type TraceContext } from '../spans/trace-context.ts';

/** The call's span context: a child of the caller's traceparent when it sent a valid one, else a new trace. */
export function callTrace(headers: Record<string, string | string[] | undefined>): TraceContext {
  return startSpanContext(headerValue(headers, 'traceparent'), headerValue(headers, 'tracestate'));
}

/** The call's span as the upstream request's parent (the caller's own traceparent is not forwarded). */
export function setUpstreamTrace(headers: Record<string, string>, trace: TraceContext): void {
  headers.traceparent = formatTraceparent(trace);
  if (trace.tracestate) headers.tracestate = trace.tracestate;
}

/** The span and trace ids on the caller's answer, set on headers being built (no object of their own). */
export function setAnswerTrace(headers: Record<string, unknown>, trace: TraceContext): void {
  headers['x-proxy-span-id'] = trace.spanId;
  headers['x-proxy-trace-id'] = trace.traceId;
}
