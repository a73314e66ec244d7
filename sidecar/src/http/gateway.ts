// /v1: the OpenAI-compatible gateway. GET /v1/models lists the priced models (and the ids overrides name); POST /v1/chat/completions routes
// by `model` to the provider of its price entry, on the route the gateway config picks for that provider, and
// translates to and from Gemini and the Anthropic Messages API where the route does not speak OpenAI's format.
// It runs on the proxy engine: the same upstream client (credentials, breaker, timeouts), the same usage
// extraction and the same call meter, so a call here is one span costed exactly as on the native route.

import type { Logger } from 'pino';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';
import { ProxyError } from '../errors.ts';
import { isJsonContentType, notJsonMessage } from '../inbound/json-content-type.ts';
import { spanUserId } from '../inbound/identity/caller-user.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { CallMeter, MeteredCall } from '../metering/call-meter.ts';
import { finishFailedCall } from '../metering/call-outcome.ts';
import { formatTraceparent, startSpanContext } from '../spans/trace-context.ts';
import { GatewayError, proxyErrorBody } from '../translate/openai-error.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { toProxyError } from '../upstream/upstream-client.ts';
import { relay } from './gateway-relay.ts';
import { answerClosed, closeConnectionAfter } from './caller-connection.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import { sendFailure, sendJson } from './json-answer.ts';
import { findModel, planGatewayCall, routeFor, type GatewayPlan } from '../routes/v1-plan.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { parseJsonObject } from '../formats/json-object.ts';
import { upstreamRequestHeaders } from './proxy-headers.ts';
import { callerLeft, hasBody, readBoundedBody } from './request-body.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { BUDGET_EXCEEDED, budgetRefusalMessage, sendBudgetRefusal } from './budget-refusal.ts';
import { OPENAI_ERRORS } from '../routes/error-shape.ts';

export interface GatewayRoutesOptions {
  store: ConfigStore;
  client: UpstreamClient;
  meter: CallMeter;
  lifecycle: Lifecycle;
  budgets?: Pick<BudgetEnforcer, 'refusal'>;
  /** Environment for defaults (GOOGLE_CLOUD_PROJECT, ANTHROPIC_VERTEX_PROJECT_ID); process.env when absent. */
  env?: NodeJS.ProcessEnv;
}

interface ModelObject {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

export const gatewayRoutes: FastifyPluginAsync<GatewayRoutesOptions> = async (app: FastifyInstance, opts) => {
  // The chat handler reads the body itself, so malformed JSON gets OpenAI's error shape, not fastify's.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  app.get('/v1/models', async () => ({ object: 'list', data: listModels(opts.store) }));
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request, reply) => {
    const id = request.params['*'];
    const model = listModels(opts.store).find((m) => m.id === id);
    if (model) return model;
    return reply.code(404).send(modelNotFound(id).toJSON());
  });
  app.post('/v1/chat/completions', (request, reply) => handleChatCompletion(request, reply, opts));
  app.all('/v1/*', async (request, reply) =>
    reply.code(404).send(new GatewayError(404, `Invalid URL (${request.method} ${request.url.split('?')[0]}): the gateway serves /v1/models and /v1/chat/completions`).toJSON()),
  );
};

/**
 * Every priced model under its canonical id, and under each id a price override was written with
 * (`claude-sonnet-4-20250514` next to `claude-sonnet-4`), as long as that id still resolves to an enabled
 * entry: a team that configured an id sees it in the list, and that id works in chat completions.
 */
function listModels(store: ConfigStore): ModelObject[] {
  const { prices, config } = store.current();
  const listed = new Map<string, ModelObject>();
  const add = (id: string, provider: string) => {
    if (!listed.has(id)) listed.set(id, { id, object: 'model', created: 0, owned_by: provider });
  };
  for (const entry of prices.models()) add(entry.model, entry.provider);
  for (const override of config.pricing.models) {
    if (override.disabled === true) continue;
    for (const id of [override.model, ...(override.aliases ?? [])]) {
      if (prices.resolve(override.provider, id) !== undefined) add(id, override.provider);
    }
  }
  return [...listed.values()];
}

function modelNotFound(model: string): GatewayError {
  return new GatewayError(404, `The model \`${model}\` does not exist: GET /v1/models lists the models with a price entry`, {
    param: 'model',
    code: 'model_not_found',
  });
}

function parseRequest(body: Buffer): Record<string, unknown> {
  return parseJsonObject(body, (problem) =>
    problem.kind === 'syntax'
      ? new GatewayError(400, `We could not parse the JSON body of your request: ${problem.detail}`, { code: 'invalid_json' })
      : new GatewayError(400, 'the request body must be a JSON object', { code: 'invalid_json' }),
  );
}

async function handleChatCompletion(request: FastifyRequest, reply: FastifyReply, opts: GatewayRoutesOptions): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.setHeader('x-proxy-request-id', request.id); // as on /proxy: the id in the proxy's log line and span
  const trace = startSpanContext(headerValue(request.headers, 'traceparent'), headerValue(request.headers, 'tracestate'));
  if (opts.lifecycle.draining) {
    closeConnectionAfter(res);
    sendJson(res, 503, proxyErrorBody(new ProxyError('shutting_down', 'the proxy is shutting down; retry on another instance')), trace);
    request.raw.resume();
    return;
  }
  // One config snapshot for the whole call: a config push mid-call changes nothing for this call.
  const snapshot = opts.store.current();
  const config = snapshot.config;
  const callerUser = spanUserId(request, config.mode, null);
  const projectHeader = headerValue(request.headers, 'x-tollgate-project') ?? null;
  let call: MeteredCall | null = null;
  let plan: GatewayPlan | null = null;
  let requestedModel: string | null = null;
  // The span of a call refused before it reached a route: its answer's X-Proxy-Span-Id can still be looked up.
  const refusedCall = () =>
    opts.meter.start({
      route: 'v1',
      provider: 'unknown',
      model: requestedModel ?? 'unknown',
      operation: 'chat',
      userId: callerUser,
      projectId: projectHeader,
      requestId: request.id,
      trace,
    });
  const done = opts.lifecycle.track();
  try {
    if (!hasBody(request.raw)) throw new GatewayError(400, 'the request needs a JSON body', { code: 'invalid_json' });
    const contentType = headerValue(request.headers, 'content-type');
    if (!isJsonContentType(contentType)) throw new GatewayError(415, notJsonMessage(contentType), { code: 'unsupported_media_type' });
    const chat = parseRequest(await readBoundedBody(request.raw, config.server.bodyLimitBytes, config.server.requestTimeoutMs));
    const requested = chat.model;
    if (typeof requested === 'string' && requested !== '') requestedModel = requested;
    if (typeof requested !== 'string' || requested === '') {
      throw new GatewayError(400, 'you must provide a model parameter', { param: 'model', code: 'missing_required_parameter' });
    }
    const found = findModel(snapshot.prices, requested);
    if (!found) throw modelNotFound(requested);
    const start = {
      provider: found.provider,
      operation: 'chat',
      userId: spanUserId(request, config.mode, openAiRequestUser(chat)),
      requestId: request.id,
      trace,
    };
    try {
      plan = planGatewayCall(chat, { ...found, requested }, config, opts.env ?? process.env);
    } catch (error) {
      const route = routeFor(found.provider, config.gateway) ?? 'v1';
      const message = error instanceof GatewayError ? `invalid_request: ${error.message}` : error instanceof ProxyError ? `${error.code}: ${error.message}` : String(error);
      call = opts.meter.start({ ...start, route, model: requested, projectId: projectHeader ?? (route === 'v1' ? null : (config.upstreams[route]?.project ?? null)) });
      call.finish({ prices: snapshot.prices, usage: null, status: 'rejected', statusCode: null, error: message });
      throw error;
    }
    call = opts.meter.start({ ...start, route: plan.route, model: plan.model, projectId: projectHeader ?? config.upstreams[plan.route]?.project ?? null });
    // A spent budget refuses the call here, from memory, before anything goes upstream (ADR 1300).
    const refusal = call.call.userId === null ? null : (opts.budgets?.refusal(call.call.userId, Date.now()) ?? null);
    if (refusal) {
      call.finish({ prices: snapshot.prices, usage: null, status: 'rejected', statusCode: null, error: `${BUDGET_EXCEEDED}: ${budgetRefusalMessage(refusal)}` });
      sendBudgetRefusal(res, OPENAI_ERRORS, refusal, trace);
      return;
    }

    // Pass-through keeps the caller's headers as the native route does; a translated call is a new request.
    const headers = plan.translation === 'passthrough' ? upstreamRequestHeaders(request.headers, false) : { 'accept-encoding': 'identity' };
    Object.assign(headers, plan.headers);
    headers['content-type'] = 'application/json';
    headers.traceparent = formatTraceparent(trace);
    if (trace.tracestate) headers.tracestate = trace.tracestate;

    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort(callerLeft());
    });
    const upstream = await opts.client.send(config, { route: plan.route, method: 'POST', path: plan.path, headers, body: plan.body, signal: abort.signal });
    call.attachUpstream(upstream.timing);
    await relay({ res, upstream, call, prices: snapshot.prices, plan, trace, logger: request.log as unknown as Logger });
  } catch (error) {
    if (error instanceof GatewayError) {
      // Refused before the model named a provider (no body, bad JSON, unknown model): still one span, so the
      // answer's X-Proxy-Span-Id can be looked up.
      call ??= refusedCall();
      if (!call.finished)
        call.finish({ prices: snapshot.prices, usage: null, status: 'rejected', statusCode: null, error: `${error.code ?? 'invalid_request'}: ${error.message}` });
      if (!answerClosed(res)) sendJson(res, error.statusCode, error.toJSON(), trace);
      request.raw.resume();
      return;
    }
    const proxyError = error instanceof ProxyError ? error : toProxyError(plan?.route ?? 'v1', error);
    call ??= refusedCall();
    finishFailedCall(call, snapshot.prices, proxyError, res);
    sendFailure(res, proxyError, proxyErrorBody(proxyError), trace);
  } finally {
    done();
  }
}
