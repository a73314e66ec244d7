// /proxy/<route>/*: the native routes. Each call is forwarded to its route's upstream with the route's
// credential; the response streams back chunk by chunk while the usage extractor reads it, and the call
// ends as one span. Bodies are read only where the route needs them (see routeReadsBody).

import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ProxyError } from '../errors.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { CallMeter, MeteredCall } from '../metering/call-meter.ts';
import { finishFailedCall, finishRelayedCall } from '../metering/call-outcome.ts';
import type { ConfigStore } from '../config/config-store.ts';
import { isJsonContentType, notJsonMessage } from '../inbound/json-content-type.ts';
import { spanUserId } from '../inbound/identity/caller-user.ts';
import { planUpstreamRequest, routeParsesJsonBody, routeReadsBody } from '../providers/upstream-request.ts';
import { isRouteName, ROUTES, type RouteName } from '../providers/routes.ts';
import { formatTraceparent, startSpanContext, type TraceContext } from '../spans/trace-context.ts';
import type { SpanStatus } from '../spans/span.ts';
import type { UpstreamClient, UpstreamResponse } from '../upstream/upstream-client.ts';
import { toProxyError } from '../upstream/upstream-client.ts';
import { createUsageExtractor } from '../usage/extractor.ts';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './proxy-headers.ts';
import { BodyLimit, callerLeft, checkDeclaredLength, hasBody, readBoundedBody } from './request-body.ts';

export interface ProxyRoutesOptions {
  store: ConfigStore;
  client: UpstreamClient;
  meter: CallMeter;
  lifecycle: Lifecycle;
}

const PREFIX = '/proxy/';

export const proxyRoutes: FastifyPluginAsync<ProxyRoutesOptions> = async (app: FastifyInstance, opts) => {
  // Leave the body unread: each route decides whether to read it or pass the bytes through.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  const handler = (request: FastifyRequest, reply: FastifyReply) => handleProxyCall(request, reply, opts);
  app.all('/proxy/*', handler);
  app.all('/proxy', handler);
};

function splitUrl(url: string): { route: string; rest: string; query: string } {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q);
  const afterPrefix = path.startsWith(PREFIX) ? path.slice(PREFIX.length) : '';
  const slash = afterPrefix.indexOf('/');
  return {
    route: slash === -1 ? afterPrefix : afterPrefix.slice(0, slash),
    rest: slash === -1 ? '/' : afterPrefix.slice(slash),
    query,
  };
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function sendProxyError(res: ServerResponse, error: ProxyError, trace: TraceContext): void {
  if (res.headersSent) {
    res.destroy(error);
    return;
  }
  const body = JSON.stringify(error.toJSON());
  // The rest of a body that came too slowly is not waited for: this answer ends the connection.
  if (error.code === 'client_timeout') res.setHeader('connection', 'close');
  res.writeHead(error.statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-proxy-span-id': trace.spanId,
    'x-proxy-trace-id': trace.traceId,
  });
  res.end(body);
}

async function handleProxyCall(request: FastifyRequest, reply: FastifyReply, opts: ProxyRoutesOptions): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  // The id of this call in the proxy's log line and span (the caller's x-request-id, else a generated one).
  // Its own header, because providers answer with an x-request-id of their own that callers quote to them.
  res.setHeader('x-proxy-request-id', request.id);
  const trace = startSpanContext(header(request, 'traceparent'), header(request, 'tracestate'));
  const { route: routeName, rest, query } = splitUrl(request.raw.url ?? '/');
  if (!isRouteName(routeName)) {
    const known = Object.keys(ROUTES).join(', ');
    sendProxyError(res, new ProxyError('unknown_route', `unknown route ${JSON.stringify(routeName)}: use /proxy/<route>/... with one of ${known}`), trace);
    request.raw.resume();
    return;
  }
  if (opts.lifecycle.draining) {
    res.setHeader('connection', 'close');
    sendProxyError(res, new ProxyError('shutting_down', 'the proxy is shutting down; retry on another instance'), trace);
    request.raw.resume();
    return;
  }
  const route: RouteName = routeName;
  const spec = ROUTES[route];
  // One config snapshot for the whole call: a config push mid-call changes nothing for this call.
  const snapshot = opts.store.current();
  const config = snapshot.config;
  const callerUser = spanUserId(request, config.mode, null);
  const projectHeader = header(request, 'x-tollgate-project') ?? null;
  let call: MeteredCall | null = null;
  // Aborts the upstream request when the caller goes away or its streamed body passes the limit or the deadline.
  const abort = new AbortController();
  // What the caller did to end the call early (a body over the limit or too slow, leaving): it names the
  // span's error, since the upstream request then fails only because the proxy aborted it.
  let callerError: ProxyError | null = null;
  res.once('close', () => {
    if (res.writableFinished) return;
    callerError ??= callerLeft();
    abort.abort(callerError);
  });
  let limiter: BodyLimit | null = null;
  const done = opts.lifecycle.track();
  try {
    const limit = config.server.bodyLimitBytes;
    let body: Buffer | null = null;
    let bodyStream: Readable | null = null;
    const withBody = hasBody(request.raw);
    if (withBody && routeParsesJsonBody(route) && !isJsonContentType(header(request, 'content-type'))) {
      throw new ProxyError('unsupported_media_type', notJsonMessage(header(request, 'content-type')));
    }
    if (withBody && routeReadsBody(route)) {
      body = await readBoundedBody(request.raw, limit, config.server.requestTimeoutMs);
    } else if (withBody) {
      checkDeclaredLength(request.raw, limit);
      const bodyLimit = new BodyLimit(limit, config.server.requestTimeoutMs);
      limiter = bodyLimit;
      // The limit can be passed before undici listens to the stream (credentials still loading): an
      // 'error' nobody listens to would take the process down. The caller is answered 413 from the catch
      // below; the rest of its body is read and dropped so it can read that answer. A body past its deadline
      // is not drained (a trickle would hold on): the 408 closes the connection.
      bodyLimit.once('error', (error: Error) => {
        const failure = error instanceof ProxyError ? error : new ProxyError('invalid_request', `request body failed: ${error.message}`);
        callerError ??= failure;
        request.raw.unpipe(bodyLimit);
        if (failure.code === 'client_timeout') request.raw.pause();
        else request.raw.resume();
        abort.abort(failure);
      });
      bodyStream = request.raw.pipe(bodyLimit);
    }
    const plan = planUpstreamRequest(route, request.method, rest, query, body, config.upstreams[route]);
    call = opts.meter.start({
      route,
      provider: spec.provider,
      model: plan.model,
      operation: plan.operation,
      userId: spanUserId(request, config.mode, plan.bodyUserId),
      projectId: projectHeader ?? config.upstreams[route]?.project ?? null,
      requestId: request.id,
      trace,
    });
    const headers = upstreamRequestHeaders(request.headers, plan.body === null && bodyStream !== null);
    headers.traceparent = formatTraceparent(trace);
    if (trace.tracestate) headers.tracestate = trace.tracestate;
    if (plan.body !== null && plan.body !== body) headers['content-type'] = 'application/json';

    const upstream = await opts.client.send(config, {
      route,
      method: request.method,
      path: plan.path,
      headers,
      body: plan.body ?? bodyStream,
      signal: abort.signal,
    });
    await relayResponse(res, upstream, call, snapshot.prices, spec.format, plan.stripInjectedUsage, trace, request.log as unknown as Logger);
  } catch (error) {
    const proxyError = callerError ?? (error instanceof ProxyError ? error : toProxyError(route, error));
    // Refused before the call was planned (body over the limit, bad JSON, a path that leaves the base):
    // still one span, so every answer's X-Proxy-Span-Id can be looked up.
    call ??= opts.meter.start({ route, provider: spec.provider, model: 'unknown', operation: 'chat', userId: callerUser, projectId: projectHeader, requestId: request.id, trace });
    finishFailedCall(call, snapshot.prices, proxyError, res);
    if (!res.destroyed) sendProxyError(res, proxyError, trace);
  } finally {
    limiter?.stopDeadline();
    done();
  }
}

function relayResponse(
  res: ServerResponse,
  upstream: UpstreamResponse,
  call: MeteredCall,
  prices: Parameters<MeteredCall['finish']>[0]['prices'],
  format: (typeof ROUTES)[RouteName]['format'],
  stripInjectedUsage: boolean,
  trace: TraceContext,
  logger: Logger,
): Promise<void> {
  const contentType = upstream.headers['content-type'];
  const extractor = createUsageExtractor({
    format,
    contentType: Array.isArray(contentType) ? contentType[0] : contentType,
    headers: upstream.headers,
    stripInjectedUsage,
    statusCode: upstream.statusCode,
    logger,
  });
  const headers = downstreamResponseHeaders(upstream.headers, stripInjectedUsage);
  headers['x-proxy-span-id'] = trace.spanId;
  headers['x-proxy-trace-id'] = trace.traceId;
  res.writeHead(upstream.statusCode, headers);
  const statusCode = upstream.statusCode;
  const body = upstream.body;

  return new Promise<void>((resolve) => {
    let ended = false;
    const finish = (status: SpanStatus, streamError?: string) => {
      if (ended) return;
      ended = true;
      finishRelayedCall({ call, upstream, extractor, prices, status, streamError });
      resolve();
    };
    body.on('data', (chunk: Buffer) => {
      const out = extractor.write(chunk);
      if (out.length > 0 && !res.write(out)) {
        body.pause();
        res.once('drain', () => body.resume());
      }
    });
    body.once('end', () => {
      const held = extractor.flush();
      if (held.length > 0) res.end(held);
      else res.end();
      finish(statusCode >= 400 ? 'upstream_error' : 'ok');
    });
    body.once('error', (error: Error) => {
      if (res.destroyed && !res.writableFinished) {
        finish('client_aborted', 'client went away');
        return;
      }
      // Headers are already sent: the only honest signal left is to cut the connection.
      res.destroy(error);
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
