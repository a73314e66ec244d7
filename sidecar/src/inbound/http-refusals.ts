// Requests refused below the routes: Node's HTTP parser (a raw tab or other bad byte, headers over 16 KiB,
// headers that never finish) and fastify's router (a path that is not valid percent-encoding). By default
// those answer in their own shapes, with no X-Proxy-Span-Id, no span and no log line. Here they answer in the
// engine's error shape; one aimed at a /proxy route or the /v1 gateway is recorded as a `rejected` span like
// every other refusal, so its X-Proxy-Span-Id can be looked up (ADR 1002).

import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { ConfigStore } from '../config/config-store.ts';
import { ProxyError } from '../errors.ts';
import type { CallMeter } from '../metering/call-meter.ts';
import { isRouteName, ROUTES } from '../../../contracts/routes.ts';
import { startSpanContext, type TraceContext } from '../spans/trace-context.ts';
import { setAnswerTrace } from '../pipeline/trace-headers.ts';
import { judgeInbound, refusalBody, type InboundPolicy } from './request-guard.ts';

export interface HttpRefusalOptions {
  meter: CallMeter;
  store: ConfigStore;
  inbound: InboundPolicy;
  logger: Logger;
}

interface ParserError extends Error {
  code?: string;
  reason?: string;
  /** The bytes of the request being parsed when it failed: a Buffer (Node sets it for parse errors). */
  rawPacket?: unknown;
}

/** Node's parser error as the engine's error. */
function parserRefusal(error: ParserError, headersTimeoutMs: number): ProxyError {
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return new ProxyError('headers_too_large', 'request headers are larger than the 16384 bytes the proxy reads');
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ProxyError('client_timeout', `request not received within ${headersTimeoutMs} ms`);
  }
  return new ProxyError('invalid_request', `malformed HTTP request: ${error.reason ?? error.message}`);
}

/** The target and the headers of a partly parsed request, read back from its raw bytes (best effort). */
function readRawRequest(packet: unknown): { target: string | null; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  if (!Buffer.isBuffer(packet)) return { target: null, headers };
  const text = packet.toString('latin1', 0, Math.min(packet.length, 64 * 1024));
  const lines = text.split('\r\n');
  const target = /^[A-Z]+ ([^ ]+) HTTP\/1\.[01]$/.exec(lines[0] ?? '')?.[1] ?? null;
  for (const line of lines.slice(1)) {
    if (line === '') break;
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] ??= line.slice(colon + 1).trim();
  }
  return { target, headers };
}

/**
 * The /proxy route or the gateway a request was aimed at, when it is one that records spans: unknown routes
 * and other paths (management, health) do not.
 */
function meteredRouteOf(path: string): { route: Parameters<CallMeter['start']>[0]['route']; provider: Parameters<CallMeter['start']>[0]['provider'] } | null {
  if (path === '/v1' || path.startsWith('/v1/')) return { route: 'v1', provider: 'unknown' };
  const match = /^\/proxy\/([^/?#]+)/.exec(path);
  if (match === null || !isRouteName(match[1]!)) return null;
  return { route: match[1], provider: ROUTES[match[1]].provider };
}

/** Records the refusal of a metered route as a span; returns its trace, or null when nothing is recorded. */
function recordRefusal(opts: HttpRefusalOptions, path: string, error: ProxyError, requestId: string): TraceContext | null {
  const metered = meteredRouteOf(path);
  if (metered === null) return null;
  const trace = startSpanContext(undefined, undefined);
  const call = opts.meter.start({ ...metered, model: 'unknown', operation: 'chat', userId: null, projectId: null, requestId, trace });
  call.finish({ prices: opts.store.current().prices, usage: null, status: 'rejected', statusCode: null, error: `${error.code}: ${error.message}` });
  return trace;
}

function spanHeaders(trace: TraceContext | null, requestId: string): Record<string, string> {
  if (trace === null) return {};
  const headers: Record<string, string> = {};
  setAnswerTrace(headers, trace);
  headers['x-proxy-request-id'] = requestId;
  return headers;
}

/**
 * fastify's clientErrorHandler (Node's 'clientError' event): the request could not be parsed, or did not
 * arrive in time. There is no request object, only the socket and the bytes read so far.
 */
export function clientErrorHandler(opts: HttpRefusalOptions, headersTimeoutMs: number): (error: ParserError, socket: Socket) => void {
  return (error, socket) => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // A response already under way on this connection (Node's request timeout fired while a route was still
    // reading the body): only its route may answer; if it has begun to, cutting is all that is left.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    const refusal = parserRefusal(error, headersTimeoutMs);
    if (inFlight?.headersSent || !socket.writable) {
      socket.destroy();
      return;
    }
    const requestId = randomUUID();
    const { target, headers } = readRawRequest(error.rawPacket);
    const path = target?.split('?')[0] ?? '';
    // A request the guard would refuse (another site's page, a rebound name) leaves nothing behind.
    const guardPasses = inFlight === undefined || inFlight === null ? judgeInbound(opts.inbound, headers).refusal === null : false;
    const trace = guardPasses && target !== null ? recordRefusal(opts, path, refusal, requestId) : null;
    if (trace === null) opts.logger.warn({ code: refusal.code, reason: refusal.message, path: path || undefined }, 'request refused before routing');
    const body = refusalBody(path, refusal);
    const head = [
      `HTTP/1.1 ${refusal.statusCode} ${STATUS_CODES[refusal.statusCode]}`,
      'content-type: application/json; charset=utf-8',
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      ...Object.entries(spanHeaders(trace, requestId)).map(([name, value]) => `${name}: ${value}`),
    ];
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    socket.once('finish', () => socket.destroy());
  };
}

/** fastify's frameworkErrors: the router refused the URL (bad percent-encoding) before any hook ran. */
export function frameworkErrorHandler(opts: HttpRefusalOptions): (error: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => {
    const path = (request.raw.url ?? '/').split('?')[0]!;
    const verdict = judgeInbound(opts.inbound, request.headers);
    if (verdict.refusal !== null) {
      void reply.code(403).header('content-type', 'application/json; charset=utf-8').send(refusalBody(path, verdict.refusal));
      return;
    }
    const refusal =
      error.code === 'FST_ERR_BAD_URL'
        ? new ProxyError('invalid_request', `path ${JSON.stringify(path)} is not valid percent-encoding`)
        : new ProxyError('invalid_request', `request refused: ${error.message}`);
    const trace = recordRefusal(opts, path, refusal, request.id);
    if (trace === null) request.log.warn({ code: refusal.code, reason: refusal.message, path }, 'request refused before routing');
    void reply
      .code(refusal.statusCode)
      .headers({ 'content-type': 'application/json; charset=utf-8', ...spanHeaders(trace, request.id) })
      .send(refusalBody(path, refusal));
  };
}
