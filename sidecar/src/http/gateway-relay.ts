// The response side of a /v1/chat/completions call: pass an OpenAI-format response through, translate a
// provider's JSON or stream into OpenAI's (the route module's translation), or turn an upstream error into
// OpenAI's error shape. Every path reads the UPSTREAM bytes with the same usage extractor as the native
// routes, so the span's tokens and cost are the ones a native call would record, and every path ends the
// call's span exactly once.

import { answerClosed } from './caller-connection.ts';
import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { ROUTES } from '../../../contracts/routes.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { ProxyError } from '../errors.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { relayStream, responseExtractor } from '../relay.ts';
import type { GatewayPlan } from '../routes/v1-plan.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import type { ResponseShaping } from '../translate/chat-responses.ts';
import { nowSeconds } from '../translate/openai-chat.ts';
import { upstreamErrorBody, type OpenAiErrorBody } from '../translate/openai-error.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { randomId } from './gateway-ids.ts';
import { sendJson, spanHeaders } from './json-answer.ts';
import { downstreamResponseHeaders } from './proxy-headers.ts';

/** Largest upstream body read whole (a non-streamed completion, an error): beyond it the call fails with 502. */
export const MAX_TRANSLATED_BODY_BYTES = 32 * 1024 * 1024;
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

export interface RelayContext {
  res: ServerResponse;
  upstream: UpstreamResponse;
  call: MeteredCall;
  prices: PriceTable;
  plan: GatewayPlan;
  trace: TraceContext;
  /** Told when the usage extractor skips over-size stream events. */
  logger?: Logger;
  /** Input tokens the request stands for, for a stream the caller left before its usage (ADR 1305). */
  estimateInput: () => number;
}

const newToolCallId = (): string => `call_${randomId(24)}`;

function shaping(ctx: RelayContext): ResponseShaping {
  return { model: ctx.plan.model, created: nowSeconds(), jsonMode: ctx.plan.jsonMode, headers: ctx.upstream.headers, newToolCallId };
}

export function relay(ctx: RelayContext): Promise<void> {
  const { res, upstream, plan } = ctx;
  if (upstream.statusCode >= 400) return relayUpstreamError(ctx);
  const translation = plan.response;
  if (translation !== null && !plan.stream) return relayTranslatedJson(ctx);
  const identity = { id: `chatcmpl-${randomId(24)}`, created: nowSeconds(), model: plan.model, includeUsage: plan.includeUsage };
  const headers: Record<string, string | string[]> =
    translation === null
      ? downstreamResponseHeaders(upstream.headers, plan.stripInjectedUsage)
      : { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
  Object.assign(headers, spanHeaders(ctx.trace));
  return relayStream({
    res,
    upstream,
    call: ctx.call,
    prices: ctx.prices,
    extractor: extractorFor(ctx),
    headers,
    transform: translation?.stream(plan.route, identity, shaping(ctx)),
    estimateInput: ctx.estimateInput,
  });
}

function extractorFor(ctx: RelayContext) {
  return responseExtractor(ROUTES[ctx.plan.route].format, ctx.upstream, ctx.plan.stripInjectedUsage, ctx.logger);
}

/** Reads a whole upstream body, bounded; `onChunk` sees every chunk first. */
function readBody(body: Readable, limit: number, onChunk: (chunk: Buffer) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        body.destroy();
        reject(new ProxyError('upstream_stream_error', `upstream response exceeds ${limit} bytes, the most the gateway translates`));
        return;
      }
      onChunk(chunk);
      chunks.push(chunk);
    });
    body.once('end', () => resolve(Buffer.concat(chunks, size)));
    body.once('error', reject);
  });
}

async function relayUpstreamError(ctx: RelayContext): Promise<void> {
  const { upstream, plan, call } = ctx;
  let body: Buffer;
  try {
    body = await readBody(upstream.body, MAX_ERROR_BODY_BYTES, () => {});
  } catch {
    body = Buffer.alloc(0);
  }
  upstream.settle(upstream.statusCode >= 500 ? 'failure' : 'success');
  const error: OpenAiErrorBody = upstreamErrorBody(plan.route, upstream.statusCode, upstream.headers, body);
  call.finish({ prices: ctx.prices, usage: null, status: 'upstream_error', statusCode: upstream.statusCode, error: error.error.message });
  if (!answerClosed(ctx.res)) sendJson(ctx.res, upstream.statusCode, error, ctx.trace);
}

async function relayTranslatedJson(ctx: RelayContext): Promise<void> {
  const { upstream, plan, call } = ctx;
  const extractor = extractorFor(ctx);
  let raw: Buffer;
  try {
    raw = await readBody(upstream.body, MAX_TRANSLATED_BODY_BYTES, (chunk) => extractor.write(chunk));
  } catch (error) {
    upstream.settle(answerClosed(ctx.res) ? 'abandoned' : 'failure');
    throw error;
  }
  const result = extractor.end();
  let document: unknown;
  try {
    document = JSON.parse(raw.toString('utf8'));
  } catch {
    document = undefined;
  }
  if (!isRecord(document) || plan.response === null) {
    upstream.settle('failure');
    call.finish({
      prices: ctx.prices,
      usage: result.usage,
      responseModel: result.responseModel,
      status: 'error',
      statusCode: upstream.statusCode,
      error: 'upstream_stream_error: upstream body is not a JSON object',
    });
    throw new ProxyError('upstream_stream_error', `upstream ${plan.route} answered ${upstream.statusCode} with a body that is not a JSON object`);
  }
  upstream.settle('success');
  const completion = plan.response.fromJson(document, shaping(ctx));
  // Read whole even when the caller left meanwhile: the provider billed it (ADR 1305).
  const status = answerClosed(ctx.res) ? 'client_aborted' : 'ok';
  call.finish({ prices: ctx.prices, usage: result.usage, responseModel: result.responseModel, status, statusCode: upstream.statusCode });
  if (!answerClosed(ctx.res)) sendJson(ctx.res, 200, completion, ctx.trace);
}
