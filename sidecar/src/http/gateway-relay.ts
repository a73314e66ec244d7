// The response side of a /v1 call: pass a response in the caller's API through, translate a provider's JSON
// or stream into the caller's API (the route module's translation into the chat pivot, then the caller's
// answer: chat, Responses or Messages), or turn an upstream error into the caller's error shape. Every path
// reads the UPSTREAM bytes with the same usage extractor as the native routes, so the span's tokens and cost
// are the ones a native call would record, and every path ends the call's span exactly once.

import { answerClosed } from '../pipeline/caller-connection.ts';
import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import type { WireFormat } from '../../../contracts/routes.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { ProxyError } from '../errors.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { relayStream, responseExtractor } from '../pipeline/relay.ts';
import { MAX_ERROR_BODY_BYTES } from '../pipeline/answer-bounds.ts';
import { finishRelayedCall } from '../pipeline/call-outcome.ts';
import { readWholeAnswer, type WholeAnswer } from '../pipeline/whole-answer.ts';
import { toolCallsOfAnswer } from '../tool-calls/tool-call-tap.ts';
import { speechExtractor } from '../usage/speech-estimate.ts';
import type { UsageExtractor } from '../usage/usage-extractor.ts';
import type { GatewayPlan } from '../routes/v1-plan.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import type { ResponseShaping } from '../translate/chat-responses.ts';
import type { ChatStreamTranslator } from '../translate/chat-stream.ts';
import { nowSeconds } from '../translate/openai-chat.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { readAnswerWhole } from '../upstream/answer-body.ts';
import type { ApiAnswer, CallerAnswer } from '../gateway-apis/gateway-api.ts';
import { randomId } from '../gateway-apis/gateway-ids.ts';
import { sendJson } from '../pipeline/json-answer.ts';
import { setAnswerTrace } from '../pipeline/trace-headers.ts';
import { downstreamResponseHeaders } from './proxy-headers.ts';

export interface RelayContext {
  /** How the route's answers are framed, for the usage extractor. */
  wire: WireFormat;
  res: ServerResponse;
  upstream: UpstreamResponse;
  call: MeteredCall;
  prices: PriceTable;
  plan: GatewayPlan;
  trace: TraceContext;
  /** How the answer reaches the caller in its API. */
  answer: ApiAnswer;
  /** Told when the usage extractor skips over-size stream events. */
  logger?: Logger;
  /** Input tokens the request stands for, for a stream the caller left before its usage (ADR 1305). */
  estimateInput: () => number;
}

const newToolCallId = (): string => `call_${randomId(24)}`;

function shaping(ctx: RelayContext): ResponseShaping {
  const extensions = ctx.plan.extensions;
  return {
    model: ctx.plan.model,
    created: nowSeconds(),
    jsonMode: ctx.plan.jsonMode,
    headers: ctx.upstream.headers,
    newToolCallId,
    reasoning: extensions?.returnReasoning ?? false,
    singleToolCall: extensions?.singleToolCall ?? false,
  };
}

/** The stream the caller reads: the upstream's bytes, re-framed bytes (Bedrock's) or the translation's. */
function streamTransform(ctx: RelayContext) {
  const { plan } = ctx;
  if (plan.translation === 'passthrough') return plan.reframe?.(plan.route);
  const identity = { id: `chatcmpl-${randomId(24)}`, created: nowSeconds(), model: plan.model, includeUsage: plan.includeUsage };
  return plan.response?.stream(plan.route, identity, shaping(ctx), translatedAnswer(ctx).encoder(plan.model));
}

/** The answer of a plan that translates: one that passes through there is the gateway's own mistake. */
function translatedAnswer(ctx: RelayContext): CallerAnswer {
  const answer = ctx.answer;
  if (answer.passedThrough === true) throw new Error(`${answer.what} passes through, but route ${ctx.plan.route}'s plan translates it`);
  return answer;
}

export function relay(ctx: RelayContext): Promise<void> {
  const { res, upstream, plan } = ctx;
  if (upstream.statusCode >= 400) return relayUpstreamError(ctx);
  if (plan.translation !== 'passthrough' && !plan.stream) return relayTranslatedJson(ctx);
  const transform = streamTransform(ctx);
  const headers: Record<string, string | string[]> =
    transform === undefined
      ? downstreamResponseHeaders(upstream.headers, plan.stripInjectedUsage)
      : { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
  setAnswerTrace(headers, ctx.trace);
  const relayed = relayStream({ res, upstream, call: ctx.call, prices: ctx.prices, extractor: extractorFor(ctx), headers, transform, estimateInput: ctx.estimateInput });
  return transform === undefined ? relayed : relayed.then(() => logTranslationFault(ctx, transform));
}

/** Stable log text (docs/log-messages.md): an upstream answer the translation met an exception in. */
const TRANSLATION_FAULT_LOG = 'upstream answer could not be translated';

/** The exception a stream's translation met: the caller was told in fixed words, the operator gets the detail. */
function logTranslationFault(ctx: RelayContext, transform: ChatStreamTranslator): void {
  const fault = transform.fault;
  if (fault === undefined) return;
  ctx.logger?.warn({ route: ctx.plan.route, event_index: fault.event, event_type: fault.eventType, err: fault.error }, TRANSLATION_FAULT_LOG);
}

function extractorFor(ctx: RelayContext) {
  const { plan, upstream } = ctx;
  return speechExtractor(
    responseExtractor(ctx.wire, upstream, plan.stripInjectedUsage, ctx.logger, { operation: ctx.call.call.operation }),
    plan.audio?.speech,
    ctx.prices.resolve(plan.provider, plan.model),
    upstream.statusCode,
  );
}

async function relayUpstreamError(ctx: RelayContext): Promise<void> {
  const { upstream, plan, call } = ctx;
  let body: Buffer;
  try {
    // An error body past the bound is not the provider's words: answered without it.
    const read = await readAnswerWhole(upstream.body, MAX_ERROR_BODY_BYTES);
    body = read.cut ? Buffer.alloc(0) : read.bytes;
  } catch {
    body = Buffer.alloc(0);
  }
  upstream.settle(upstream.statusCode >= 500 ? 'failure' : 'success');
  // Every caller's error shape (OpenAI's, Anthropic's) has its words in error.message.
  const error = ctx.answer.upstreamError(plan.route, upstream.statusCode, upstream.headers, body) as { error: { message: string } };
  call.finish({ prices: ctx.prices, usage: null, status: 'upstream_error', statusCode: upstream.statusCode, error: error.error.message });
  if (!answerClosed(ctx.res)) sendJson(ctx.res, upstream.statusCode, error, ctx.trace);
}

async function relayTranslatedJson(ctx: RelayContext): Promise<void> {
  const { upstream, plan, call } = ctx;
  const extractor = extractorFor(ctx);
  let read: WholeAnswer;
  try {
    // What the extractor forwards is what is translated: the proxy's credential is already scrubbed from it.
    read = await readWholeAnswer({ body: upstream.body, res: ctx.res, call, extractor });
  } catch (error) {
    upstream.settle(answerClosed(ctx.res) ? 'abandoned' : 'failure');
    throw error;
  }
  if (read.kind === 'cut') {
    // The caller left and the usage did not come within the bounds: charged an estimate, as a stream is (ADR 1305).
    finishRelayedCall({
      call,
      upstream,
      extractor,
      prices: ctx.prices,
      status: 'client_aborted',
      streamError: read.why,
      afterLeaving: read.afterLeaving,
      estimateInput: ctx.estimateInput,
    });
    return;
  }
  let raw = read.body;
  const held = extractor.flush();
  if (held.length > 0) raw = Buffer.concat([raw, held]);
  const result = extractor.end();
  let document: unknown;
  try {
    document = JSON.parse(raw.toString('utf8'));
  } catch {
    document = undefined;
  }
  if (!isRecord(document)) {
    upstream.settle('failure');
    failedAnswer(ctx, result, 'upstream_stream_error: upstream body is not a JSON object');
    throw new ProxyError('upstream_stream_error', `upstream ${plan.route} answered ${upstream.statusCode} with a body that is not a JSON object`);
  }
  upstream.settle('success');
  let answer: unknown;
  try {
    answer = translatedAnswer(ctx).json(document, plan.response, shaping(ctx));
  } catch (error) {
    // The provider answered and is paid for; only the caller's API could not carry the answer. An exception's
    // own words describe the gateway's code, not the answer: the caller gets a fixed sentence, the log the rest.
    if (!(error instanceof ProxyError)) ctx.logger?.warn({ route: plan.route, err: error }, TRANSLATION_FAULT_LOG);
    const failure =
      error instanceof ProxyError
        ? error
        : new ProxyError('upstream_stream_error', `upstream ${plan.route} sent a malformed answer that could not be translated into the caller's API`);
    failedAnswer(ctx, result, `${failure.code}: ${failure.message}`);
    throw failure;
  }
  // Read whole when the caller left meanwhile and the answer came within the bounds: the provider billed it (ADR 1305).
  const status = read.callerLeft || answerClosed(ctx.res) ? 'client_aborted' : 'ok';
  // The tool calls of the answer in the caller's API: their ids are the ones the caller echoes (ADR 1603).
  const toolCalls = call.recordsToolCalls ? toolCallsOfAnswer(answer) : undefined;
  call.finish({ prices: ctx.prices, usage: result.usage, responseModel: result.responseModel, status, statusCode: upstream.statusCode, toolCalls });
  if (!answerClosed(ctx.res)) sendJson(ctx.res, 200, answer, ctx.trace);
}

/** A translated answer that cannot be given: the call is recorded with the usage the upstream reported. */
function failedAnswer(ctx: RelayContext, result: ReturnType<UsageExtractor['end']>, error: string): void {
  ctx.call.finish({ prices: ctx.prices, usage: result.usage, responseModel: result.responseModel, status: 'error', statusCode: ctx.upstream.statusCode, error });
}
