// How a metered call ends, shared by the native /proxy routes and the /v1 gateway so both record the same
// span for the same outcome and settle the upstream's breaker the same way.

import { callerGone } from '../http/caller-connection.ts';
import type { ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import type { SpanStatus } from '../spans/span.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import type { UsageExtractor } from '../usage/extractor.ts';
import type { MeteredCall } from './call-meter.ts';

/**
 * A response body that ended (or was cut): reads the usage, settles the breaker (a stream that broke is an
 * upstream failure; a caller who left says nothing about the upstream) and records the span.
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
}): void {
  const callerLeft = opts.status === 'client_aborted';
  // A caller that stops reading at the stream's last event (SDKs do, at `data: [DONE]`) has had the whole
  // answer: when the extractor saw the stream's end marker, the call is complete, not aborted.
  const result = opts.extractor.end(callerLeft ? undefined : opts.streamError);
  const completeBeforeLeaving = callerLeft && result.streamError === undefined && result.usage !== null;
  const streamError = completeBeforeLeaving ? undefined : (opts.streamError ?? result.streamError);
  const error = streamError ?? opts.laterFailure;
  const reported: SpanStatus = completeBeforeLeaving ? 'ok' : opts.status;
  const status: SpanStatus = reported === 'ok' && error ? 'error' : reported;
  opts.upstream.settle(status === 'client_aborted' ? 'abandoned' : status === 'error' ? 'failure' : 'success');
  opts.call.finish({
    prices: opts.prices,
    usage: result.usage,
    responseModel: result.responseModel,
    status,
    statusCode: opts.upstream.statusCode,
    error: error ? `upstream_stream_error: ${error}` : null,
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
