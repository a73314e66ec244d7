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
import { finishFailedCall } from '../pipeline/call-outcome.ts';
import type { ConfigSnapshot, ConfigStore } from '../config/config-store.ts';
import { isJsonContentType, notJsonMessage } from '../inbound/json-content-type.ts';
import { formBoundary } from '../formats/multipart-form.ts';
import { speechExtractor } from '../usage/speech-estimate.ts';
import type { TokenUsage } from '../usage/usage.ts';
import { checkNoFragment, checkPathSegments, planUpstreamRequest, type UpstreamRequestPlan } from '../routes/native-plan.ts';
import type { RouteModule } from '../routes/route-module.ts';
import { routeCatalog, wireFormat } from '../routes/route-catalog.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import { unpricedSeconds } from '../routes/openai-audio.ts';
import { relayStream, responseExtractor } from '../pipeline/relay.ts';
import { spanUserId } from '../inbound/identity/caller-user.ts';
import { mayReachStoredObjects } from '../inbound/identity/identity-hook.ts';
import type { TraceContext } from '../spans/trace-context.ts';
import { callTrace, setAnswerTrace, setUpstreamTrace } from '../pipeline/trace-headers.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { UsageExtractor } from '../usage/usage-extractor.ts';
import { toProxyError } from '../upstream/upstream-client.ts';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './proxy-headers.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import { sendFailure } from '../pipeline/json-answer.ts';
import { BodyLimit, checkDeclaredLength, hasBody, readBoundedBody } from '../pipeline/request-body.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { reserveForCall } from '../pipeline/reservation.ts';
import { refuseCall, unmeteredRefusal, whenRefused } from '../pipeline/refusals.ts';
import { type CallSteps, type Exchange, runCall } from '../pipeline/call-pipeline.ts';
import { CallerEnd } from '../pipeline/caller-end.ts';
import { type CallOrigin, failedCallSpan, projectOf, startCallSpan } from '../pipeline/call-span.ts';
import { DeferredCharges } from '../metering/deferred-charges.ts';
import { DeferredCall } from './deferred-calls.ts';

export interface ProxyRoutesOptions {
  store: ConfigStore;
  client: UpstreamClient;
  meter: CallMeter;
  lifecycle: Lifecycle;
  budgets?: Pick<BudgetEnforcer, 'reserve'>;
  /** Environment for defaults (GOOGLE_CLOUD_PROJECT, ANTHROPIC_VERTEX_PROJECT_ID); process.env when absent. */
  env?: NodeJS.ProcessEnv;
  /** Told of each call forwarded on a path its route cannot meter (the metrics). */
  unmetered?: { forwarded(route: string): void };
  /** Batches and background responses submitted here, charged when read (ADR 0913); one per proxy when absent. */
  deferred?: DeferredCharges;
}

const PREFIX = '/proxy/';

export const proxyRoutes: FastifyPluginAsync<ProxyRoutesOptions> = async (app: FastifyInstance, opts) => {
  // Leave the body unread: each route decides whether to read it or pass the bytes through.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  const options: ProxyRoutesOptions = { ...opts, deferred: opts.deferred ?? new DeferredCharges() };
  // Its store is closed with the engine, once the calls still reading a result have finished.
  app.addHook('onClose', (_instance, done) => {
    options.deferred?.close();
    done();
  });
  const handler = (request: FastifyRequest, reply: FastifyReply) => handleProxyCall(request, reply, options);
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

/** Not an async function: a call is the pipeline's own promise, with no frame of this function's kept around it. */
function handleProxyCall(request: FastifyRequest, reply: FastifyReply, opts: ProxyRoutesOptions): Promise<void> | undefined {
  reply.hijack();
  const res = reply.raw;
  const trace = callTrace(request.headers);
  const { route: name, rest, query } = splitUrl(request.raw.url ?? '/');
  // One config snapshot for the whole call: a config push mid-call changes nothing for this call.
  const snapshot = opts.store.current();
  const route = routeCatalog(snapshot.config).get(name);
  if (route === undefined) {
    identifyAnswer(res, request);
    const known = routeCatalog(snapshot.config).names().join(', ');
    sendProxyError(res, new ProxyError('unknown_route', `unknown route ${JSON.stringify(name)}: use /proxy/<route>/... with one of ${known}`), trace);
    request.raw.resume();
    return;
  }
  const origin: CallOrigin = {
    requestId: request.id,
    trace,
    userId: spanUserId(request, snapshot.config.mode, null),
    projectHeader: headerValue(request.headers, 'x-tollgate-project') ?? null,
  };
  const call = new ProxyCall({ request, res, opts, route, rest, query, trace, origin, snapshot });
  return runCall(opts.lifecycle, request.raw, res, call, (error) => {
    identifyAnswer(res, request);
    sendProxyError(res, error, trace);
  });
}

/**
 * The id of this call in the proxy's log line and span (the caller's x-request-id, else a generated one), on an
 * answer the proxy writes itself. Its own header, because providers answer with an x-request-id of their own
 * that callers quote to them. A relayed answer carries it in the headers it is written with (forward), so its
 * head is built once rather than merged header by header into what setHeader stored.
 */
function identifyAnswer(res: ServerResponse, request: FastifyRequest): void {
  // A call that fails mid-answer has its head sent already (with the id): the failure only cuts the connection.
  if (!res.headersSent) res.setHeader('x-proxy-request-id', request.id);
}

/** What a call on a known route is made of when it arrives. */
interface ProxyCallStart {
  request: FastifyRequest;
  res: ServerResponse;
  opts: ProxyRoutesOptions;
  route: RouteModule;
  rest: string;
  query: string;
  trace: TraceContext;
  /** Who made the call, for its span; the user the body names is found by planning it. */
  origin: CallOrigin;
  /** One config snapshot for the whole call: a config push mid-call changes nothing for this call. */
  snapshot: ConfigSnapshot;
}

/** A planned /proxy call: the route's plan, the body as read or streamed, and whether it goes unmetered. */
interface ProxyPlan {
  upstream: UpstreamRequestPlan;
  body: CallBody;
  unmetered: boolean;
}

/** One call on a known route, its steps on the pipeline (pipeline/call-pipeline.ts), and everything they share. */
class ProxyCall implements ProxyCallStart, CallSteps<ProxyPlan> {
  readonly request: FastifyRequest;
  readonly res: ServerResponse;
  readonly opts: ProxyRoutesOptions;
  readonly route: RouteModule;
  readonly rest: string;
  readonly query: string;
  readonly trace: TraceContext;
  readonly origin: CallOrigin;
  readonly snapshot: ConfigSnapshot;
  readonly caller: CallerEnd;
  span: MeteredCall | null = null;
  limiter: BodyLimit | null = null;
  /** Set when the call submits or reads a result billed when it is known (ADR 0913). */
  deferred?: DeferredCall;

  constructor(start: ProxyCallStart) {
    this.request = start.request;
    this.res = start.res;
    this.opts = start.opts;
    this.route = start.route;
    this.rest = start.rest;
    this.query = start.query;
    this.trace = start.trace;
    this.origin = start.origin;
    this.snapshot = start.snapshot;
    this.caller = new CallerEnd(start.res);
  }

  plan(): Promise<ProxyPlan> {
    return planProxyCall(this);
  }

  budget(planned: ProxyPlan): boolean | Promise<boolean> {
    // A call the provider does not bill (a token count) has nothing for a budget to hold back (ADR 0912).
    if (this.route.endpoint(this.request.method, this.rest) === 'free') return false;
    return refusedOverBudget(this, this.span!, planned.body, planned.upstream.reservation ?? planned.upstream.audio?.reservation);
  }

  send(planned: ProxyPlan): Promise<Exchange<ProxyPlan>> {
    // Counted and logged once nothing else refuses it: what is counted went out.
    if (planned.unmetered) noteUnmetered(this);
    return sendUpstream(this, planned);
  }

  relay(exchange: Exchange<ProxyPlan>): Promise<void> {
    return relayAnswer(this, this.span!, exchange);
  }

  fail(error: unknown): void {
    failCall(this, this.span, error);
  }

  ended(): void {
    this.deferred?.finished(this.span?.span ?? null, Date.now());
    this.limiter?.stopDeadline();
  }
}

/** Targeting on /proxy is the path's prefix: the route's module plans the rest, and the call's span starts. */
async function planProxyCall(call: ProxyCall): Promise<ProxyPlan> {
  const { opts, route, request } = call;
  const unmetered = refuseUnmetered(call);
  const body = await callBody(call);
  call.limiter = body.limiter;
  const plan = planUpstreamRequest(route, {
    method: request.method,
    rest: call.rest,
    query: call.query,
    body: body.bytes,
    contentType: headerValue(request.headers, 'content-type'),
    upstream: upstreamOf(route, call.snapshot.config),
    env: opts.env ?? process.env,
  });
  startDeferred(call, plan);
  const unmeteredWhy = plan.unmeteredBecause ?? (plan.audio && unpricedSeconds(plan.audio, plan.model, call.snapshot.prices.resolve(route.provider, plan.model)));
  const unmeteredBody = unmeteredWhy !== undefined && allowUnmetered(call, unmeteredWhy);
  const metered = (call.span = startMetering(call, plan, unmetered || unmeteredBody));
  if (plan.storedObjects !== undefined && !mayReachStoredObjects(request.identity, call.snapshot.config)) {
    throw new ProxyError(
      'stored_objects_admin_only',
      `${request.method} ${call.rest} reaches ${plan.storedObjects}, which every user of this server shares through its key: only server.auth.admins may; continue conversations through /v1/responses, which keeps them per user`,
    );
  }
  // Most calls submit or read no deferred result: no closure, promise or turn spent on one.
  if (call.deferred !== undefined) await readDeferredInput(call, call.deferred, metered);
  return { upstream: plan, body, unmetered: unmetered || unmeteredBody };
}

interface CallBody {
  /** The body read whole, for a route that reads or parses it. */
  readonly bytes: Buffer | null;
  /** The body streamed through its limit, for a route that passes it on unread. */
  readonly stream: Readable | null;
  readonly limiter: BodyLimit | null;
}

/**
 * Nothing is forwarded that the route's format cannot meter (routes/endpoint-kinds.ts): such a path is refused
 * before the body is read, unless the route allows unmetered calls. The path's own checks come first, so a
 * path that would leave the base is still called that.
 */
function refuseUnmetered(call: ProxyCall): boolean {
  const { route, rest, request } = call;
  // A route with no credential spends nobody's key (the local runtime): whatever it forwards is free.
  if (route.credential.kind === 'none' || route.endpoint(request.method, rest) !== undefined) return false;
  checkPathSegments(rest);
  checkNoFragment(rest, call.query);
  return allowUnmetered(call, `format ${route.spec.format}`);
}

/** A call that cannot be metered goes on only where the route allows it, logged and counted; else it is refused. */
function allowUnmetered(call: ProxyCall, why: string): true {
  const { route, rest, request } = call;
  if (upstreamOf(route, call.snapshot.config)?.unmetered === 'allow') return true;
  throw unmeteredRefusal(request.method, rest, route.name, why);
}

function noteUnmetered(call: ProxyCall): void {
  const { route, rest, request } = call;
  call.opts.unmetered?.forwarded(route.name);
  request.log.warn({ route: route.name, method: request.method, path: rest, request_id: request.id }, 'unmetered call forwarded: the route allows calls its format cannot meter');
}

const NO_BODY: CallBody = { bytes: null, stream: null, limiter: null };

function readBody(bytes: Buffer): CallBody {
  return { bytes, stream: null, limiter: null };
}

/**
 * Reads the body, or streams it through its size and time limits, as the route's module asks (`body`). Not an
 * async function: a body read whole is the read's own promise, with no second promise and frame around it.
 */
function callBody(call: ProxyCall): CallBody | Promise<CallBody> {
  const { request, caller } = call;
  const { server } = call.snapshot.config;
  const module = call.route;
  if (!hasBody(request.raw)) return NO_BODY;
  const contentType = headerValue(request.headers, 'content-type');
  // An upload the route plans from its form fields is read whole like JSON (ADR 0911); any other body of a
  // `json` route must be JSON.
  const upload = module.formUpload?.(request.method, call.rest) === true && formBoundary(contentType) !== null;
  if (module.body === 'json' && !upload && !isJsonContentType(contentType)) {
    throw new ProxyError('unsupported_media_type', notJsonMessage(contentType));
  }
  if (module.body !== 'stream') return readBoundedBody(request.raw, server.bodyLimitBytes, server.requestTimeoutMs).then(readBody);
  checkDeclaredLength(request.raw, server.bodyLimitBytes);
  const limiter = new BodyLimit(server.bodyLimitBytes, server.requestTimeoutMs);
  // The limit can be passed before undici listens to the stream (credentials still loading): an 'error' nobody
  // listens to would take the process down. The caller is answered 413 from the call's catch; the rest of its
  // body is read and dropped so it can read that answer. A body past its deadline is not drained (a trickle
  // would hold on): the 408 closes the connection.
  limiter.once('error', (error: Error) => {
    const failure = error instanceof ProxyError ? error : new ProxyError('invalid_request', `request body failed: ${error.message}`);
    request.raw.unpipe(limiter);
    if (failure.code === 'client_timeout') request.raw.pause();
    else request.raw.resume();
    caller.end(failure);
  });
  return { bytes: null, stream: request.raw.pipe(limiter), limiter };
}

/** A call that submits or reads a deferred result (ADR 0913). */
function startDeferred(call: ProxyCall, plan: UpstreamRequestPlan): void {
  const { opts, route } = call;
  if (plan.deferred !== undefined && opts.deferred !== undefined) call.deferred = new DeferredCall(opts.deferred, route.name, plan.deferred);
}

/**
 * An OpenAI batch's requests are in its input file: read from the provider, once nothing else refuses the
 * call, to reserve for them; the call's span then names their model.
 */
async function readDeferredInput(call: ProxyCall, deferred: DeferredCall, metered: MeteredCall): Promise<void> {
  const { opts, route, snapshot } = call;
  const fetchFile = (path: string) => opts.client.send(snapshot.config, { route: route.name, method: 'GET', path, headers: {}, body: null, signal: call.caller.abort });
  const model = await deferred.readInput(fetchFile, snapshot.prices, route.provider);
  if (model !== undefined) metered.retarget({ route: route.name, provider: route.provider, model, projectId: metered.call.projectId });
}

function startMetering(call: ProxyCall, plan: UpstreamRequestPlan, unmetered = false): MeteredCall {
  const { request, route, snapshot } = call;
  const { config } = snapshot;
  // A deferred result read here is the submitter's call: charged to them, under their project (ADR 0913).
  const submitter = call.deferred?.submitter(Date.now());
  return startCallSpan(call.opts.meter, call.origin, {
    route: route.name,
    provider: route.provider,
    model: plan.model === 'unknown' && submitter !== undefined ? submitter.model : plan.model,
    operation: plan.operation,
    userId: submitter?.userId ?? spanUserId(request, config.mode, plan.bodyUserId),
    projectId: submitter?.projectId ?? projectOf(call.origin, route, config),
    ...(unmetered ? { unmetered: true } : {}),
    ...(plan.units !== undefined ? { units: plan.units } : {}),
  });
}

/**
 * A spent budget, or one without room for this call's reservation, refuses the call here, from memory, before
 * anything goes upstream (ADRs 1300, 1308); an admitted call holds its reservation until it finishes.
 */
function refusedOverBudget(call: ProxyCall, metered: MeteredCall, body: CallBody, usage?: TokenUsage): boolean | Promise<boolean> {
  const streaming = body.stream !== null;
  const size = body.bytes?.length ?? Number(headerValue(call.request.headers, 'content-length') ?? 0);
  const { deferred } = call;
  // A deferred result's submission holds its requests' reservation past its end; a read of one holds nothing
  // (the submission's hold covers it) and is not refused: the provider has done the work already.
  const refusal =
    deferred === undefined
      ? reserveForCall(call.opts.budgets, metered, call.snapshot.prices, { bytes: body.bytes, size: Number.isFinite(size) ? size : 0, usage }, { now: Date.now(), res: call.res })
      : deferred.reserve(call.opts.budgets, metered.call.userId, metered.call.provider, call.snapshot.prices, Date.now());
  return whenRefused(refusal, (refused) => {
    if (streaming) call.request.raw.unpipe();
    call.request.raw.resume();
    identifyAnswer(call.res, call.request);
    refuseCall(metered, call.snapshot.prices, refused, { res: call.res, errors: call.route.errors, trace: call.trace });
  });
}

/** Sends the planned request upstream. */
async function sendUpstream(call: ProxyCall, planned: ProxyPlan): Promise<Exchange<ProxyPlan>> {
  const { request, route, trace, snapshot } = call;
  const { upstream: plan, body } = planned;
  const headers = upstreamRequestHeaders(request.headers, plan.body === null && body.stream !== null);
  setUpstreamTrace(headers, trace);
  if (plan.body !== null && plan.body !== body.bytes) headers['content-type'] = 'application/json';
  const upstream = await call.opts.client.send(snapshot.config, {
    route: route.name,
    method: request.method,
    path: plan.path,
    headers,
    body: plan.body ?? body.stream,
    signal: call.caller.abort,
  });
  return { plan: planned, upstream };
}

/** Relays the answer while its usage is read; the relay's own promise, with no async frame around it. */
function relayAnswer(call: ProxyCall, metered: MeteredCall, exchange: Exchange<ProxyPlan>): Promise<void> {
  const { request, route, trace, snapshot } = call;
  const { upstream } = exchange;
  const { upstream: plan, body } = exchange.plan;
  const { deferred } = call;
  // A batch's status names where its results are: here, so they are read (and charged) through the proxy.
  const transform = deferred?.transform(`${request.protocol}://${request.host}/proxy/${route.name}`, upstream.statusCode);
  const headersOut = downstreamResponseHeaders(upstream.headers, plan.stripInjectedUsage || transform !== undefined);
  setAnswerTrace(headersOut, trace);
  headersOut['x-proxy-request-id'] = request.id;
  const submitter = { userId: metered.call.userId, projectId: metered.call.projectId, model: metered.call.model };
  const around = deferred && ((own: UsageExtractor) => deferred.extractor(own, upstream.statusCode, snapshot.prices, route.provider, submitter));
  const extractor = speechExtractor(
    responseExtractor(wireFormat(route), upstream, plan.stripInjectedUsage, request.log as unknown as Logger, { around, operation: plan.operation }),
    plan.audio?.speech,
    snapshot.prices.resolve(route.provider, plan.model),
    upstream.statusCode,
  );
  const sent = plan.body ?? body.bytes;
  // A deferred result's submission is charged when its result is read (or by its own stream's usage): an
  // estimate charged here when its caller left would be charged again by that read (ADR 0913).
  const estimateInput = deferred?.plan.step === 'submit' ? undefined : () => estimateInputTokens(sent, sent === null ? (body.limiter?.bytes ?? 0) : sent.length);
  return relayStream({ res: call.res, upstream, call: metered, prices: snapshot.prices, extractor, headers: headersOut, estimateInput, transform });
}

/**
 * The call failed: still one span, so every answer's X-Proxy-Span-Id can be looked up, even when it was refused
 * before it was planned (body over the limit, bad JSON, a path that leaves the base).
 */
function failCall(call: ProxyCall, metered: MeteredCall | null, error: unknown): void {
  const { request, route, snapshot } = call;
  const proxyError = call.caller.error ?? (error instanceof ProxyError ? error : toProxyError(route.name, error));
  const failed = failedCallSpan(call.opts.meter, metered, call.origin, { route: route.name, provider: route.provider, model: 'unknown', operation: 'chat' });
  finishFailedCall(failed, snapshot.prices, proxyError, call.res);
  identifyAnswer(call.res, request);
  sendProxyError(call.res, proxyError, call.trace);
}
