// /proxy/<route>/*: the native routes. Each call is forwarded to its route's upstream with the route's
// credential; the response streams back chunk by chunk while the usage extractor reads it, and the call
// ends as one span. Bodies are read only where the route needs them (its module's `body`).

import { estimateInputTokens } from '../usage/usage-estimate.ts';
import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ProxyError } from '../errors.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { CallMeter, MeteredCall } from '../metering/call-meter.ts';
import { finishFailedCall } from '../metering/call-outcome.ts';
import type { ConfigStore } from '../config/config-store.ts';
import { isJsonContentType, notJsonMessage } from '../inbound/json-content-type.ts';
import { planUpstreamRequest } from '../routes/native-plan.ts';
import { ROUTE_MODULES } from '../routes/route-modules.ts';
import { relayStream, responseExtractor } from '../relay.ts';
import { isRouteName, ROUTE_NAMES, type RouteName } from '../../../contracts/routes.ts';
import { spanUserId } from '../inbound/identity/caller-user.ts';
import { formatTraceparent, startSpanContext, type TraceContext } from '../spans/trace-context.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { toProxyError } from '../upstream/upstream-client.ts';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './proxy-headers.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import { sendFailure, spanHeaders } from './json-answer.ts';
import { answerFinished, closeConnectionAfter } from './caller-connection.ts';
import { BodyLimit, callerLeft, checkDeclaredLength, hasBody, readBoundedBody } from './request-body.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { BUDGET_EXCEEDED, budgetRefusalFor, budgetRefusalMessage, sendBudgetRefusal } from './budget-refusal.ts';

export interface ProxyRoutesOptions {
  store: ConfigStore;
  client: UpstreamClient;
  meter: CallMeter;
  lifecycle: Lifecycle;
  budgets?: Pick<BudgetEnforcer, 'refusal'>;
  /** Environment for defaults (GOOGLE_CLOUD_PROJECT, ANTHROPIC_VERTEX_PROJECT_ID); process.env when absent. */
  env?: NodeJS.ProcessEnv;
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

/** The engine's own failure on /proxy, in its {"error": {"code", "message"}} shape. */
export function sendProxyError(res: ServerResponse, error: ProxyError, trace: TraceContext): void {
  sendFailure(res, error, error.toJSON(), trace);
}

async function handleProxyCall(request: FastifyRequest, reply: FastifyReply, opts: ProxyRoutesOptions): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  // The id of this call in the proxy's log line and span (the caller's x-request-id, else a generated one).
  // Its own header, because providers answer with an x-request-id of their own that callers quote to them.
  res.setHeader('x-proxy-request-id', request.id);
  const trace = startSpanContext(headerValue(request.headers, 'traceparent'), headerValue(request.headers, 'tracestate'));
  const { route: routeName, rest, query } = splitUrl(request.raw.url ?? '/');
  if (!isRouteName(routeName)) {
    const known = ROUTE_NAMES.join(', ');
    sendProxyError(res, new ProxyError('unknown_route', `unknown route ${JSON.stringify(routeName)}: use /proxy/<route>/... with one of ${known}`), trace);
    request.raw.resume();
    return;
  }
  if (opts.lifecycle.draining) {
    closeConnectionAfter(res);
    sendProxyError(res, new ProxyError('shutting_down', 'the proxy is shutting down; retry on another instance'), trace);
    request.raw.resume();
    return;
  }
  const route: RouteName = routeName;
  const module = ROUTE_MODULES[route];
  // One config snapshot for the whole call: a config push mid-call changes nothing for this call.
  const snapshot = opts.store.current();
  const config = snapshot.config;
  const callerUser = spanUserId(request, config.mode, null);
  const projectHeader = headerValue(request.headers, 'x-tollgate-project') ?? null;
  let call: MeteredCall | null = null;
  // Aborts the upstream request when the caller goes away or its streamed body passes the limit or the deadline.
  const abort = new AbortController();
  // What the caller did to end the call early (a body over the limit or too slow, leaving): it names the
  // span's error, since the upstream request then fails only because the proxy aborted it.
  let callerError: ProxyError | null = null;
  // Once the answer is being relayed, a caller who leaves no longer ends the exchange: the relay reads on for
  // the usage the provider bills (ADR 1305).
  let relaying = false;
  res.once('close', () => {
    if (answerFinished(res) || relaying) return;
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
    if (withBody && module.body === 'json' && !isJsonContentType(headerValue(request.headers, 'content-type'))) {
      throw new ProxyError('unsupported_media_type', notJsonMessage(headerValue(request.headers, 'content-type')));
    }
    if (withBody && module.body !== 'stream') {
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
    const plan = planUpstreamRequest(route, { method: request.method, rest, query, body, upstream: config.upstreams[route], env: opts.env ?? process.env });
    call = opts.meter.start({
      route,
      provider: module.provider,
      model: plan.model,
      operation: plan.operation,
      userId: spanUserId(request, config.mode, plan.bodyUserId),
      projectId: projectHeader ?? config.upstreams[route]?.project ?? null,
      requestId: request.id,
      trace,
    });
    // A spent budget refuses the call here, from memory, before anything goes upstream (ADR 1300).
    const refusal = budgetRefusalFor(opts.budgets, call.call, Date.now());
    if (refusal) {
      call.finish({ prices: snapshot.prices, usage: null, status: 'rejected', statusCode: null, error: `${BUDGET_EXCEEDED}: ${budgetRefusalMessage(refusal)}` });
      if (bodyStream) request.raw.unpipe();
      request.raw.resume();
      sendBudgetRefusal(res, module.errors, refusal, trace);
      return;
    }
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
    call.attachUpstream(upstream.timing);
    const headersOut = downstreamResponseHeaders(upstream.headers, plan.stripInjectedUsage);
    Object.assign(headersOut, spanHeaders(trace));
    const extractor = responseExtractor(module.spec.format, upstream, plan.stripInjectedUsage, request.log as unknown as Logger);
    relaying = true;
    const sentBody = plan.body ?? body;
    const estimateInput = () => estimateInputTokens(sentBody, sentBody === null ? (limiter?.bytes ?? 0) : sentBody.length);
    await relayStream({ res, upstream, call, prices: snapshot.prices, extractor, headers: headersOut, estimateInput });
  } catch (error) {
    const proxyError = callerError ?? (error instanceof ProxyError ? error : toProxyError(route, error));
    // Refused before the call was planned (body over the limit, bad JSON, a path that leaves the base):
    // still one span, so every answer's X-Proxy-Span-Id can be looked up.
    call ??= opts.meter.start({
      route,
      provider: module.provider,
      model: 'unknown',
      operation: 'chat',
      userId: callerUser,
      projectId: projectHeader,
      requestId: request.id,
      trace,
    });
    finishFailedCall(call, snapshot.prices, proxyError, res);
    sendProxyError(res, proxyError, trace);
  } finally {
    limiter?.stopDeadline();
    done();
  }
}
