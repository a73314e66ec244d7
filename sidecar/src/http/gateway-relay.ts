// The response side of a /v1/chat/completions call: pass an OpenAI-format response through, translate a
// provider's JSON or stream into OpenAI's, or turn an upstream error into OpenAI's error shape. Every path
// reads the UPSTREAM bytes with the same usage extractor as the native routes, so the span's tokens and cost
// are the ones a native call would record, and every path ends the call's span exactly once.

import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { ProxyError } from '../errors.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { ROUTES } from '../../../contracts/routes.ts';
import type { SpanStatus } from '../spans/span.ts';
import { finishRelayedCall } from '../metering/call-outcome.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import { anthropicSseChatStream, bedrockChatStream, geminiSseChatStream, type ChatStreamTranslator } from '../translate/chat-stream.ts';
import { AnthropicChunkTranslator, fromAnthropicMessage } from '../translate/openai-anthropic.ts';
import { nowSeconds, type ChunkIdentity } from '../translate/openai-chat.ts';
import { upstreamErrorBody, type OpenAiErrorBody } from '../translate/openai-error.ts';
import { fromGeminiResponse, GeminiChunkTranslator } from '../translate/openai-gemini.ts';
import { bedrockHeaderUsage } from '../usage/bedrock.ts';
import { createUsageExtractor } from '../usage/extractor.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import type { GatewayPlan } from '../routes/v1-plan.ts';
import { downstreamResponseHeaders } from './proxy-headers.ts';
import { randomId } from './gateway-ids.ts';

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
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function spanHeaders(trace: TraceContext): Record<string, string> {
  return { 'x-proxy-span-id': trace.spanId, 'x-proxy-trace-id': trace.traceId };
}

export function sendJson(res: ServerResponse, statusCode: number, body: unknown, trace: TraceContext): void {
  const text = JSON.stringify(body);
  res.writeHead(statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...spanHeaders(trace),
  });
  res.end(text);
}

export function relay(ctx: RelayContext): Promise<void> {
  if (ctx.upstream.statusCode >= 400) return relayUpstreamError(ctx);
  if (ctx.plan.translation === 'passthrough') return relayStream(ctx, null);
  if (!ctx.plan.stream) return relayTranslatedJson(ctx);
  const identity: ChunkIdentity = { id: `chatcmpl-${randomId(24)}`, created: nowSeconds(), model: ctx.plan.model, includeUsage: ctx.plan.includeUsage };
  const route = ctx.plan.route;
  const translator =
    ctx.plan.translation === 'gemini'
      ? geminiSseChatStream(route, new GeminiChunkTranslator(identity, () => `call_${randomId(24)}`))
      : route === 'gamma-cloudb'
        ? bedrockChatStream(route, new AnthropicChunkTranslator(identity, ctx.plan.jsonMode))
        : anthropicSseChatStream(route, new AnthropicChunkTranslator(identity, ctx.plan.jsonMode));
  return relayStream(ctx, translator);
}

function extractorFor(ctx: RelayContext) {
  const { upstream, plan } = ctx;
  return createUsageExtractor({
    format: ROUTES[plan.route].format,
    contentType: first(upstream.headers['content-type']),
    headers: upstream.headers,
    statusCode: upstream.statusCode,
    stripInjectedUsage: plan.stripInjectedUsage,
    ...(ctx.logger ? { logger: ctx.logger } : {}),
  });
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
  if (!ctx.res.destroyed) sendJson(ctx.res, upstream.statusCode, error, ctx.trace);
}

async function relayTranslatedJson(ctx: RelayContext): Promise<void> {
  const { upstream, plan, call } = ctx;
  const extractor = extractorFor(ctx);
  let raw: Buffer;
  try {
    raw = await readBody(upstream.body, MAX_TRANSLATED_BODY_BYTES, (chunk) => extractor.write(chunk));
  } catch (error) {
    upstream.settle(ctx.res.destroyed ? 'abandoned' : 'failure');
    throw error;
  }
  const result = extractor.end();
  let document: unknown;
  try {
    document = JSON.parse(raw.toString('utf8'));
  } catch {
    document = undefined;
  }
  if (!isRecord(document)) {
    upstream.settle('failure');
    call.finish({ prices: ctx.prices, usage: result.usage, responseModel: result.responseModel, status: 'error', statusCode: upstream.statusCode, error: 'upstream_stream_error: upstream body is not a JSON object' });
    throw new ProxyError('upstream_stream_error', `upstream ${plan.route} answered ${upstream.statusCode} with a body that is not a JSON object`);
  }
  upstream.settle('success');
  const created = nowSeconds();
  const completion =
    plan.translation === 'gemini'
      ? fromGeminiResponse(document, { model: plan.model, created, newId: () => `call_${randomId(24)}` })
      : fromAnthropicMessage(document, { model: plan.model, created, jsonMode: plan.jsonMode, fallbackUsage: plan.route === 'gamma-cloudb' ? bedrockHeaderUsage(upstream.headers) : null });
  call.finish({ prices: ctx.prices, usage: result.usage, responseModel: result.responseModel, status: 'ok', statusCode: upstream.statusCode });
  if (!ctx.res.destroyed) sendJson(ctx.res, 200, completion, ctx.trace);
}

/**
 * Streams the upstream body to the caller chunk by chunk, with backpressure: unchanged (pass-through) or
 * through a chat stream translator. A translated stream that fails upstream ends with an error event.
 */
function relayStream(ctx: RelayContext, translator: ChatStreamTranslator | null): Promise<void> {
  const { res, upstream, call } = ctx;
  const extractor = extractorFor(ctx);
  const headers: Record<string, string | string[]> =
    translator === null
      ? downstreamResponseHeaders(upstream.headers, ctx.plan.stripInjectedUsage)
      : { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
  Object.assign(headers, spanHeaders(ctx.trace));
  res.writeHead(upstream.statusCode, headers);
  const body = upstream.body;
  const toCaller = (bytes: Buffer): Buffer | string => (translator === null ? bytes : translator.write(bytes));

  return new Promise<void>((resolve) => {
    let ended = false;
    const finish = (status: SpanStatus, streamError?: string) => {
      if (ended) return;
      ended = true;
      finishRelayedCall({ call, upstream, extractor, prices: ctx.prices, status, streamError, laterFailure: translator?.failure });
      resolve();
    };
    body.on('data', (chunk: Buffer) => {
      if (ended) return;
      const out = toCaller(extractor.write(chunk));
      if (translator?.failure !== undefined) {
        // The error event is the caller's last; what the upstream still sends after a failure is not an answer.
        res.end(out);
        body.destroy();
        finish('error', translator.failure);
        return;
      }
      if (out.length > 0 && !res.write(out)) {
        body.pause();
        res.once('drain', () => body.resume());
      }
    });
    body.once('end', () => {
      if (ended) return;
      const rest = toCaller(extractor.flush());
      const tail = translator === null ? '' : translator.end();
      res.end(typeof rest === 'string' ? rest + tail : Buffer.concat([rest, Buffer.from(tail)]));
      finish('ok');
    });
    body.once('error', (error: Error) => {
      if (ended) return;
      if (res.destroyed && !res.writableFinished) {
        finish('client_aborted', 'client went away');
        return;
      }
      if (translator === null) {
        // Headers are already sent and the bytes are the provider's: the only honest signal is to cut.
        res.destroy(error);
      } else {
        res.end(translator.end(`upstream connection failed: ${error.message}`));
      }
      finish('error', error.message);
    });
    res.once('close', () => {
      if (!res.writableFinished && !ended) {
        body.destroy();
        finish('client_aborted', 'client went away');
      }
    });
  });
}
