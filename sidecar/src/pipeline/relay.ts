// The one streaming relay: an upstream response body to the caller, chunk by chunk, read by the usage
// extractor on the way and optionally transformed (a provider's stream translated to OpenAI's). Backpressure,
// the upstream's end and errors, and the caller leaving are handled here once, for /proxy and /v1 alike; the
// call's span ends exactly once.
//
// A call is finished (priced, charged to its user's budget, its span recorded) before the caller can hold its
// whole answer: before the last bytes of a body whose length the upstream declared, or before the end of one it
// did not. A sidecar killed the moment a caller has its answer has the charge on disk (the spend outbox) and
// reports it after a restart; finishing after the last write left a window where a paid call was never charged
// (ADR 1304).
//
// A caller who leaves before its answer is whole does not end the upstream exchange at once: the provider bills
// the call, and its usage often comes last (OpenAI's usage chunk after finish_reason, Anthropic's output count
// in message_delta). The relay reads on, without writing, for at most READ_AFTER_LEAVING_MS and
// READ_AFTER_LEAVING_BYTES; if the usage has not come by then, the call is charged an estimate (ADR 1305). Such
// reads hold upstream connections, so they are bounded per caller and in all (metering/leaving-reads.ts).

import { callerGone, onCallerLeaving } from './caller-connection.ts';
import { keepOwnRateLimitHeaders } from './rate-limit-answer.ts';
import { READ_AFTER_LEAVING_BYTES, READ_AFTER_LEAVING_MS } from './answer-bounds.ts';
import { ServerResponse, type OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { WireFormat } from '../../../contracts/routes.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import { finishRelayedCall, type ReadAfterLeaving } from './call-outcome.ts';
import { LEAVING_READS } from '../metering/leaving-reads.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import type { SpanStatus } from '../spans/span.ts';
import { scrubbingExtractor } from '../upstream/credential-scrub.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import type { AnswerReader } from '../upstream/answer-body.ts';
import { ToolCallTap } from '../tool-calls/tool-call-tap.ts';
import { createUsageExtractor, type UsageExtractor } from '../wire-formats/extractor.ts';

/** Rewrites the bytes the caller receives. A failure it meets ends the caller's stream with its own last words. */
export interface StreamTransform {
  /** Upstream bytes in, bytes for the caller out (often empty: an event may span several reads). */
  write(chunk: Buffer): string;
  /** The upstream ended (`cut` names why, when it ended badly): the transform's last words. */
  end(cut?: string): string;
  /** Set once the transform has sent the caller a failure. */
  readonly failure: string | undefined;
}

export interface RelayOptions {
  res: ServerResponse;
  upstream: UpstreamResponse;
  call: MeteredCall;
  prices: PriceTable;
  extractor: UsageExtractor;
  /** Response headers for the caller (status is the upstream's). */
  headers: OutgoingHttpHeaders;
  transform?: StreamTransform | undefined;
  /**
   * Input tokens the request stands for (usage-estimate.ts), asked only when a cut stream's usage must be
   * estimated; undefined for a call never charged an estimate (a deferred result's submission, ADR 0913).
   */
  estimateInput: (() => number) | undefined;
}

/** What picks a response's extractor beside its wire format and Content-Type. */
export interface ExtractorChoice {
  /** Reads the answer around (or instead of) the format's extractor: a deferred result's (http/deferred-calls.ts). */
  around?: ((extractor: UsageExtractor) => UsageExtractor) | undefined;
  /** The call's operation: an image API answer is read for its images (ADR 0910). */
  operation?: string | undefined;
}

/** The usage extractor for an upstream response in a route's wire format. */
export function responseExtractor(
  format: WireFormat,
  upstream: UpstreamResponse,
  stripInjectedUsage: boolean,
  logger: Logger | undefined,
  { around, operation }: ExtractorChoice = {},
): UsageExtractor {
  const created = createUsageExtractor({
    format,
    contentType: headerValue(upstream.headers, 'content-type'),
    headers: upstream.headers,
    statusCode: upstream.statusCode,
    stripInjectedUsage,
    // Absent options as undefined, not spread in: no objects made for them on every call.
    logger,
    operation,
  });
  const extractor = around === undefined ? created : around(created);
  // Every byte the caller gets passes the extractor first: the proxy's credential is scrubbed there.
  return upstream.scrub === undefined ? extractor : scrubbingExtractor(extractor, upstream.scrub);
}

/** The body length the upstream declared, or -1 (chunked, absent or not a plain number). */
function declaredLength(headers: UpstreamResponse['headers']): number {
  const value = headerValue(headers, 'content-length');
  return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : -1;
}

/** What says 'drain' once the caller has taken what it was sent: an HTTP/1.1 caller's socket, an h2c stream's response. */
function drainSource(res: ServerResponse): NodeJS.EventEmitter {
  return res instanceof ServerResponse && res.socket !== null ? res.socket : res;
}

export function relayStream(options: RelayOptions): Promise<void> {
  return new Promise<void>((resolve) => new StreamRelay(options, resolve).start());
}

/**
 * One answer relayed: the upstream's bytes drive it, handed over by undici's parser (upstream/answer-body.ts),
 * and `done` is called once the call is finished.
 */
class StreamRelay implements AnswerReader {
  readonly #o: RelayOptions;
  readonly #done: () => void;
  readonly #expectedBytes: number;
  #receivedBytes = 0;
  #ended = false;
  /** Upstream bytes received when the caller left; -1 while it is there. */
  #leftAtBytes = -1;
  /** Set once the upstream's response was read to its end, or to its last event. */
  #readToEnd = false;
  #giveUpTimer: NodeJS.Timeout | undefined;
  /** Gives back this call's place among the reads after leaving, once it has one. */
  #releaseLeavingRead: (() => void) | undefined;
  /** Whose reads after leaving this call counts among: its user, else its address, taken while the socket is open. */
  readonly #caller: string;
  /** Reads the caller's bytes for the answer's tool calls, while provenance is on (ADR 1603). */
  readonly #toolCalls: ToolCallTap | null;
  // Writes of one turn leave in one syscall: the headers with the first bytes of a small answer read in one
  // go. Uncorked on the next tick at the latest, and always before the response ends: an end while corked
  // lost the corked writes (the /v1 error event after a stream's first chunks did not reach the caller).
  #corked = false;
  readonly #uncork = (): void => {
    // Once per cork: a second uncork would leave Node's count below zero, and every later write held.
    if (!this.#corked) return;
    this.#corked = false;
    if (!this.#o.res.writableEnded) this.#o.res.uncork();
  };
  /** The caller drained what it was sent: the upstream is read again. */
  readonly #drained = (): void => {
    this.#o.upstream.body.resume();
  };

  constructor(options: RelayOptions, done: () => void) {
    this.#o = options;
    this.#done = done;
    this.#expectedBytes = declaredLength(options.upstream.headers);
    this.#caller = options.call.call.userId ?? options.res.socket?.remoteAddress ?? 'unknown';
    const contentType = options.headers['content-type'];
    this.#toolCalls = options.call.recordsToolCalls ? new ToolCallTap(typeof contentType === 'string' ? contentType : undefined) : null;
  }

  start(): void {
    const { res, upstream } = this.#o;
    keepOwnRateLimitHeaders(res, this.#o.headers);
    res.writeHead(upstream.statusCode, this.#o.headers);
    onCallerLeaving(res, () => this.#onCallerClose());
    // Last: what the upstream sent meanwhile is handed over at once.
    upstream.body.read(this);
  }

  onAnswerEnd(): void {
    if (!this.#ended) this.#complete('');
  }

  #toCaller(bytes: Buffer): Buffer | string {
    return this.#o.transform ? this.#o.transform.write(bytes) : bytes;
  }

  #finish(status: SpanStatus, streamError?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#giveUpTimer);
    this.#releaseLeavingRead?.();
    const { call, upstream, extractor, prices, transform, estimateInput } = this.#o;
    const afterLeaving: ReadAfterLeaving | undefined = this.#leftAtBytes === -1 ? undefined : { bytes: this.#receivedBytes - this.#leftAtBytes, complete: this.#readToEnd };
    const toolCalls = this.#toolCalls?.end();
    finishRelayedCall({ call, upstream, extractor, prices, status, streamError, laterFailure: transform?.failure, afterLeaving, estimateInput, toolCalls });
    this.#done();
  }

  /** Stops reading for a caller who left: what the upstream still owes is estimated. */
  #giveUp(why: string): void {
    if (this.#ended) return;
    this.#o.upstream.body.destroy();
    this.#finish('client_aborted', why);
  }

  /** The upstream's body is all here (`out` is what its last bytes became for the caller): finish, then answer. */
  #complete(out: Buffer | string): void {
    const { res, extractor, transform, upstream } = this.#o;
    if (this.#leftAtBytes !== -1) {
      extractor.flush();
      this.#readToEnd = true;
      this.#finish('client_aborted');
      return;
    }
    const held = this.#toCaller(extractor.flush());
    const last = transform ? `${held as string}${transform.end()}` : held;
    this.#toolCalls?.write(last);
    this.#finish(upstream.statusCode >= 400 ? 'upstream_error' : 'ok');
    if (this.#corked) this.#uncork();
    if (out.length > 0) res.write(out);
    if (last.length > 0) res.end(last);
    else res.end();
  }

  onAnswerData(chunk: Buffer): void {
    if (this.#ended) return;
    const { res, extractor, transform, upstream } = this.#o;
    if (this.#leftAtBytes !== -1) return this.#readOn(chunk);
    const out = this.#toCaller(extractor.write(chunk));
    this.#toolCalls?.write(out);
    if (transform?.failure !== undefined) {
      // The error event is the caller's last; what the upstream still sends after a failure is not an answer.
      this.#finish('error', transform.failure);
      if (this.#corked) this.#uncork();
      res.end(out);
      upstream.body.destroy();
      return;
    }
    this.#receivedBytes += chunk.length;
    // With a declared length the body's end event is still to come; its last bytes must not reach the caller before the charge.
    if (this.#receivedBytes === this.#expectedBytes) return this.#complete(out);
    if (out.length === 0) return;
    if (!this.#corked) {
      this.#corked = true;
      res.cork();
      process.nextTick(this.#uncork);
    }
    if (res.write(out) && res.writableLength < res.writableHighWaterMark) return;
    // A write while corked says true whatever the connection holds (Node counts only the turn's bytes against
    // the mark, and emits no 'drain' after a true): a caller that stopped reading had the whole answer queued
    // for it. The connection's own length decides, once the turn's bytes are on it, and its own 'drain' resumes.
    if (this.#corked) this.#uncork();
    if (res.writableLength < res.writableHighWaterMark) return;
    upstream.body.pause();
    drainSource(res).once('drain', this.#drained);
  }

  /** After the caller left: nobody to answer, only the usage is read, within READ_AFTER_LEAVING_BYTES. */
  #readOn(chunk: Buffer): void {
    this.#o.extractor.write(chunk);
    this.#receivedBytes += chunk.length;
    if (this.#receivedBytes === this.#expectedBytes) this.#complete('');
    else if (this.#receivedBytes - this.#leftAtBytes > READ_AFTER_LEAVING_BYTES) {
      this.#giveUp(`client went away; the upstream sent ${READ_AFTER_LEAVING_BYTES} more bytes without its usage`);
    }
  }

  onAnswerError(error: Error): void {
    if (this.#ended) return;
    const { res, transform } = this.#o;
    if (this.#leftAtBytes !== -1 || callerGone(res)) {
      this.#finish('client_aborted', 'client went away');
      return;
    }
    // Headers are already sent: a pass-through can only cut the connection (the bytes are the provider's);
    // a transform ends its stream with an error event (its text read before the call is finished).
    const lastWords = transform ? transform.end(`upstream connection failed: ${error.message}`) : undefined;
    this.#finish('error', error.message);
    if (this.#corked) this.#uncork();
    if (lastWords !== undefined) res.end(lastWords);
    else res.destroy(error);
  }

  #onCallerClose(): void {
    const { extractor, call, upstream } = this.#o;
    if (this.#ended) return;
    this.#leftAtBytes = this.#receivedBytes;
    // The answer's last event was read already (the caller stopped at [DONE]), or shutdown cut the
    // connection and waits for this call: nothing to read on for.
    if (extractor.sawEnd || call.cutByShutdown) {
      this.#readToEnd = extractor.sawEnd;
      this.#giveUp('client went away');
      return;
    }
    const slot = LEAVING_READS.take(this.#caller);
    if ('refusal' in slot) {
      this.#giveUp(`client went away; not read on for its usage: ${slot.refusal}`);
      return;
    }
    this.#releaseLeavingRead = slot.release;
    call.noteCallerLeft();
    this.#giveUpTimer = setTimeout(() => this.#giveUp(`client went away; the upstream's usage did not arrive within ${READ_AFTER_LEAVING_MS} ms`), READ_AFTER_LEAVING_MS);
    this.#giveUpTimer.unref();
    // Paused for a caller that will never drain.
    upstream.body.resume();
  }
}
