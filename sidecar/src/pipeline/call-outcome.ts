// How a metered call ends, shared by the native /proxy routes and the /v1 gateway so both record the same
// span for the same outcome and settle the upstream's breaker the same way.

import { callerGone } from './caller-connection.ts';
import type { ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import type { SpanStatus } from '../spans/span.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import type { UsageExtractor } from '../usage/usage-extractor.ts';
import { estimateUsage } from '../usage/usage-estimate.ts';
import type { AnswerToolCalls } from '../tool-calls/tool-call-collector.ts';
import type { MeteredCall } from '../metering/call-meter.ts';

/** How the relay read the upstream on after the caller left (ADR 1305). */
export interface ReadAfterLeaving {
  /** Upstream bytes read after the caller left. */
  bytes: number;
  /** The response was read to its end (its body's end, or its last event): nothing was cut. */
  complete: boolean;
  /** The caller gets the answer only once it is whole (a translated JSON answer): one who left had none of it. */
  answerWithheld?: boolean;
}

/**
 * A response body that ended (or was cut): reads the usage, settles the breaker (a stream that broke is an
 * upstream failure; a caller who left says nothing about the upstream) and records the span. A caller who
 * left is charged what the provider reported when the relay read on to it, else an estimate, marked on the
 * span (ADR 1305).
 */
export function finishRelayedCall(opts: {
  call: MeteredCall;
  upstream: UpstreamResponse;
  extractor: UsageExtractor;
  prices: PriceTable;
  status: SpanStatus;
  /** Why the stream ended early, as seen by the relay (socket error, client gone). */
  streamError?: string | undefined;
  /** A failure found by a later stage (a translator that met an in-stream error event). */
  laterFailure?: string | undefined;
  /** Set when the caller left before its answer was whole. */
  afterLeaving?: ReadAfterLeaving | undefined;
  /** Input tokens the request stands for, asked only for an estimate. */
  estimateInput?: (() => number) | undefined;
  /** The tool calls the caller received, read while provenance is on (ADR 1603). */
  toolCalls?: AnswerToolCalls | undefined;
}): void {
  const leaving = opts.status === 'client_aborted' ? opts.afterLeaving : undefined;
  if (leaving !== undefined) return finishAfterCallerLeft(opts, leaving);
  const result = opts.extractor.end(opts.streamError);
  const error = opts.streamError ?? result.streamError ?? opts.laterFailure;
  const status: SpanStatus = opts.status === 'ok' && error ? 'error' : opts.status;
  opts.upstream.settle(status === 'client_aborted' ? 'abandoned' : status === 'error' ? 'failure' : 'success');
  opts.call.finish({
    prices: opts.prices,
    usage: result.usage,
    usageEstimated: result.usageEstimated === true,
    responseModel: result.responseModel,
    charge: result.charge,
    status,
    statusCode: opts.upstream.statusCode,
    error: error ? `upstream_stream_error: ${error}` : null,
    toolCalls: opts.toolCalls,
  });
}

function finishAfterCallerLeft(opts: Parameters<typeof finishRelayedCall>[0], leaving: ReadAfterLeaving): void {
  // Ended without the relay's reason: whether the stream reached its own last event is the extractor's to say.
  const result = opts.extractor.end();
  // The stream reached its own end (its last event, or the body's end): the provider's usage is the bill.
  const reported = result.streamError === undefined && result.usage !== null;
  // A caller that stops reading at the stream's last event (SDKs do, at `data: [DONE]`) has had the whole
  // answer: nothing came after it left, so the call is complete, not aborted.
  const whole = reported && leaving.bytes === 0 && leaving.answerWithheld !== true;
  // Estimated only when the proxy stopped reading before the response's end: one that ended without usage is
  // recorded as it would be had the caller stayed.
  const estimated = !reported && !leaving.complete && opts.upstream.statusCode < 400 && opts.estimateInput !== undefined;
  const usage = estimated ? estimateUsage(result.usage, opts.estimateInput!, result.streamEvents ?? 0) : result.usage;
  const why = opts.streamError ?? 'client went away';
  const error = whole
    ? null
    : estimated
      ? `upstream_stream_error: ${why}; usage_estimated: the provider's usage did not arrive before the proxy stopped reading`
      : `upstream_stream_error: ${why}`;
  opts.upstream.settle(whole ? 'success' : 'abandoned');
  opts.call.finish({
    prices: opts.prices,
    usage,
    usageEstimated: estimated,
    responseModel: result.responseModel,
    ...(estimated ? {} : { charge: result.charge }),
    status: whole ? 'ok' : 'client_aborted',
    statusCode: opts.upstream.statusCode,
    error,
    toolCalls: opts.toolCalls,
  });
}

/** A call that failed before a response was relayed: the span says whether the caller left, was refused, or the proxy failed. */
export function finishFailedCall(call: MeteredCall, prices: PriceTable, error: ProxyError, res: ServerResponse): void {
  if (call.finished) return;
  const aborted = callerGone(res);
  call.finish({
    prices,
    usage: null,
    status: aborted ? 'client_aborted' : error.isClientError ? 'rejected' : 'error',
    statusCode: null,
    error: `${error.code}: ${error.message}`,
  });
}
