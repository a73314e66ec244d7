// /v1: the gateway. GET /v1/models lists the priced models (and the ids overrides name); POST
// /v1/chat/completions, /v1/responses (the Responses API), /v1/messages (the Anthropic Messages API, and its
// count_tokens), /v1/embeddings and the free calls (/v1/moderations, /v1/responses/input_tokens) route by `model` to
// the provider of its price entry, on the route the gateway
// config picks for that provider, and translate where the route does not speak the caller's API
// (sidecar/src/gateway-apis/). With a local runtime (local.enabled), its models are listed and served too (route
// `local`, cost 0), and /v1/completions passes through to it; the LM Studio-compatible listener serves this same
// plugin (local/lmstudio-app.ts, ADR 1402).
// It runs on the proxy engine: the same upstream client (credentials, breaker, timeouts), the same usage
// extraction and the same call meter, so a call here is one span costed exactly as on the native route.

import { estimateInputTokens } from '../usage/usage-estimate.ts';
import type { Logger } from 'pino';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ConfigSnapshot, ConfigStore } from '../config/config-store.ts';
import { ProxyError } from '../errors.ts';
import { isJsonContentType, notJsonMessage } from '../inbound/json-content-type.ts';
import { spanUserId } from '../inbound/identity/caller-user.ts';
import { mayReachStoredObjects } from '../inbound/identity/identity-hook.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { CallMeter, MeteredCall } from '../metering/call-meter.ts';
import { finishFailedCall } from '../pipeline/call-outcome.ts';
import { costsNothing } from '../pricing/provider-pricing.ts';
import { callTrace, setUpstreamTrace } from '../pipeline/trace-headers.ts';
import { GatewayError } from '../translate/openai-error.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { toProxyError } from '../upstream/upstream-client.ts';
import { relay } from './gateway-relay.ts';
import { answerClosed } from '../pipeline/caller-connection.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import { sendFailure, sendJson } from '../pipeline/json-answer.ts';
import { findModel, v1RouteOf, type GatewayTarget } from '../routes/v1-plan.ts';
import { routeCatalog, wireFormat } from '../routes/route-catalog.ts';
import { localModelObject, localTarget, type LocalModelCatalog } from '../local/local-models.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { parseJsonObject } from '../formats/json-object.ts';
import { upstreamRequestHeaders } from './proxy-headers.ts';
import { callerLeft, hasBody, readBoundedBody } from '../pipeline/request-body.ts';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import { reserveForCall } from '../pipeline/reservation.ts';
import { refuseCall, whenRefused } from '../pipeline/refusals.ts';
import { type CallSteps, type Exchange, runCall } from '../pipeline/call-pipeline.ts';
import { CallerEnd } from '../pipeline/caller-end.ts';
import { type CallOrigin, failedCallSpan, projectOf, rejectCall, startCallSpan } from '../pipeline/call-span.ts';
import type { ApiPlan, GatewayApi } from '../gateway-apis/gateway-api.ts';
import { chatCompletionsApi } from '../gateway-apis/chat-completions.ts';
import { responsesApi } from '../gateway-apis/responses.ts';
import { countTokensApi, messagesApi } from '../gateway-apis/messages.ts';
import { embeddingsApi } from '../gateway-apis/embeddings.ts';
import { imagesApi } from '../gateway-apis/images.ts';
import { audioApi } from '../gateway-apis/audio.ts';
import { inputTokensApi } from '../gateway-apis/input-tokens.ts';
import { moderationsApi } from '../gateway-apis/moderations.ts';
import { ResponseStore } from '../responses/response-store.ts';
import { CallAbort } from '../upstream/call-abort.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import type { ServerResponse } from 'node:http';
import type { TraceContext } from '../spans/trace-context.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { AliasTarget, FallbackTrigger, ModelAlias } from '../../../contracts/model-aliases.ts';
import { configuredAliases } from '../fallback/configured-aliases.ts';
import type { CallTarget } from '../metering/call-meter.ts';
import { AliasCall, TargetUnfit, type Answered, type FailedAttempt } from '../fallback/alias-call.ts';
import { TargetHealth } from '../fallback/target-health.ts';

export interface GatewayRoutesOptions {
  store: ConfigStore;
  client: UpstreamClient;
  meter: CallMeter;
  lifecycle: Lifecycle;
  budgets?: Pick<BudgetEnforcer, 'reserve'>;
  /** Environment for defaults (GOOGLE_CLOUD_PROJECT, ANTHROPIC_VERTEX_PROJECT_ID); process.env when absent. */
  env?: NodeJS.ProcessEnv;
  /** The local runtime's models (local.enabled): listed, and served when no price entry names the model. */
  localModels?: LocalModelCatalog | undefined;
  /** Where responses made for /v1/responses are kept for previous_response_id; one per process (app.ts). */
  responses?: ResponseStore | undefined;
  /** Alias targets' cool-downs and which priority served each alias; one per engine (app.ts). */
  targetHealth?: TargetHealth | undefined;
  /** Told of each fallback from one alias target to the next (the metrics). */
  fallbacks?: FallbackObserver | undefined;
}

export interface FallbackObserver {
  fallback(alias: string, from: AliasTarget, to: AliasTarget, reason: FallbackTrigger): void;
}

const CHAT = chatCompletionsApi('chat');
const TRANSCRIPTIONS = audioApi('audio_transcription');
const TRANSLATIONS = audioApi('audio_translation');
const SPEECH = audioApi('audio_speech');
const COMPLETIONS = chatCompletionsApi('completions');
const IMAGE_GENERATIONS = imagesApi('image_generation');
const IMAGE_EDITS = imagesApi('image_edit');

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

  app.get('/v1/models', async () => ({ object: 'list', data: await listModels(opts) }));
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request, reply) => {
    const id = request.params['*'];
    const model = (await listModels(opts)).find((m) => m.id === id);
    if (model) return model;
    return reply.code(404).send(modelNotFound(id, opts.localModels !== undefined, null).toJSON());
  });
  const responses = responsesApi(opts.responses ?? new ResponseStore());
  app.post('/v1/chat/completions', (request, reply) => handleGatewayCall(request, reply, opts, CHAT));
  app.post('/v1/responses', (request, reply) => handleGatewayCall(request, reply, opts, responses));
  app.post('/v1/messages', (request, reply) => handleGatewayCall(request, reply, opts, messagesApi));
  app.post('/v1/messages/count_tokens', (request, reply) => handleGatewayCall(request, reply, opts, countTokensApi));
  app.post('/v1/embeddings', (request, reply) => handleGatewayCall(request, reply, opts, embeddingsApi));
  app.post('/v1/images/generations', (request, reply) => handleGatewayCall(request, reply, opts, IMAGE_GENERATIONS));
  app.post('/v1/images/edits', (request, reply) => handleGatewayCall(request, reply, opts, IMAGE_EDITS));
  app.post('/v1/audio/transcriptions', (request, reply) => handleGatewayCall(request, reply, opts, TRANSCRIPTIONS));
  app.post('/v1/audio/translations', (request, reply) => handleGatewayCall(request, reply, opts, TRANSLATIONS));
  app.post('/v1/audio/speech', (request, reply) => handleGatewayCall(request, reply, opts, SPEECH));
  app.post('/v1/moderations', (request, reply) => handleGatewayCall(request, reply, opts, moderationsApi));
  app.post('/v1/responses/input_tokens', (request, reply) => handleGatewayCall(request, reply, opts, inputTokensApi));
  const served = [
    '/v1/models',
    '/v1/chat/completions',
    '/v1/responses',
    '/v1/responses/input_tokens',
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1/embeddings',
    '/v1/images/generations',
    '/v1/images/edits',
    '/v1/audio/transcriptions',
    '/v1/audio/translations',
    '/v1/audio/speech',
    '/v1/moderations',
  ];
  if (opts.localModels) {
    app.post('/v1/completions', (request, reply) => handleGatewayCall(request, reply, opts, COMPLETIONS));
    served.push('/v1/completions');
  }
  app.all('/v1/*', async (request, reply) =>
    reply.code(404).send(new GatewayError(404, `Invalid URL (${request.method} ${request.url.split('?')[0]}): the gateway serves ${served.join(', ')}`).toJSON()),
  );
};

/**
 * Every priced model under its canonical id, and under each id a price override was written with
 * (`claude-sonnet-4-20250514` next to `claude-sonnet-4`), as long as that id still resolves to an enabled
 * entry: a team that configured an id sees it in the list, and that id works in chat completions. Then the
 * local runtime's models that no listed id names (owned_by `local`).
 */
async function listModels(opts: GatewayRoutesOptions): Promise<ModelObject[]> {
  const { prices, config } = opts.store.current();
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
  // Model aliases first among the names callers may send: each is served by its targets.
  for (const name of Object.keys(config.models)) add(name, 'tollgate');
  // A configured route's listed models, and every model under `<route>/<model>` needs no listing.
  for (const route of routeCatalog(config).configured()) for (const model of route.models) add(model, route.provider);
  const priced = [...listed.values()];
  if (!opts.localModels) return priced;
  const ids = new Set(priced.map((model) => model.id.toLowerCase()));
  const local = (await opts.localModels.listing()).models.filter((model) => !ids.has(model.name.toLowerCase())).map(localModelObject);
  return [...priced, ...local];
}

function modelNotFound(model: string, withLocal: boolean, localProblem: string | null): GatewayError {
  const listed = withLocal ? "the models with a price entry and the local runtime's" : 'the models with a price entry';
  return new GatewayError(404, `The model \`${model}\` does not exist: GET /v1/models lists ${listed}${localProblem ? ` (${localProblem})` : ''}`, {
    param: 'model',
    code: 'model_not_found',
  });
}

/** A configured route's model without a price entry: called and metered, costed 0 and logged as unpriced. */
function unpricedEntry(provider: string, model: string): PriceEntry {
  return { provider, model, input_per_million: 0, output_per_million: 0 };
}

/**
 * Where a requested model goes: a configured route named by its prefix (`<route>/<model>`) or listing it, else
 * the price entry it resolves to (built-in providers first), else the local runtime's model of that name.
 */
async function resolveModel(opts: GatewayRoutesOptions, snapshot: ConfigSnapshot, requested: string): Promise<GatewayTarget> {
  const { prices, config } = snapshot;
  const catalog = routeCatalog(config);
  const configured = catalog.configuredForModel(requested);
  if (configured) {
    const { route, model } = configured;
    return { entry: prices.resolve(route.provider, model) ?? unpricedEntry(route.provider, model), provider: route.provider, requested: model, route: route.name };
  }
  const priced = findModel(prices, requested, catalog.configuredProviders);
  if (priced) return { ...priced, requested };
  if (!opts.localModels) throw modelNotFound(requested, false, null);
  const local = await opts.localModels.find(requested);
  if (local.model === undefined) throw modelNotFound(requested, true, local.problem);
  return { ...localTarget(requested), requested };
}

function parseRequest(body: Buffer): Record<string, unknown> {
  return parseJsonObject(body, (problem) =>
    problem.kind === 'syntax'
      ? new GatewayError(400, `We could not parse the JSON body of your request: ${problem.detail}`, { code: 'invalid_json' })
      : new GatewayError(400, 'the request body must be a JSON object', { code: 'invalid_json' }),
  );
}

async function handleGatewayCall(request: FastifyRequest, reply: FastifyReply, opts: GatewayRoutesOptions, api: GatewayApi): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.setHeader('x-proxy-request-id', request.id); // as on /proxy: the id in the proxy's log line and span
  const trace = callTrace(request.headers);
  const call = new V1Call(request, res, opts, api, trace);
  await runCall(opts.lifecycle, request.raw, res, call, (error) => sendJson(res, error.statusCode, api.errors.failure(error), trace));
}

/** The request's body, read, parsed and checked, and the model it asks for. Throws GatewayError for a bad one. */
async function readGatewayRequest(
  request: FastifyRequest,
  api: GatewayApi,
  config: RuntimeConfig,
): Promise<{ body: Buffer; contentType: string | undefined; chat: Record<string, unknown>; requested: string }> {
  if (!hasBody(request.raw)) throw new GatewayError(400, 'the request needs a JSON body', { code: 'invalid_json' });
  const contentType = headerValue(request.headers, 'content-type');
  if (api.readForm === undefined && !isJsonContentType(contentType)) throw new GatewayError(415, notJsonMessage(contentType), { code: 'unsupported_media_type' });
  const body = await readBoundedBody(request.raw, config.server.bodyLimitBytes, config.server.requestTimeoutMs);
  const chat = api.readForm === undefined ? parseRequest(body) : api.readForm(body, contentType);
  const requested = chat.model === undefined ? api.defaultModel : chat.model;
  if (typeof requested !== 'string' || requested === '') {
    throw new GatewayError(400, 'you must provide a model parameter', { param: 'model', code: 'missing_required_parameter' });
  }
  return { body, contentType, chat, requested };
}

/**
 * One /v1 call, its steps on the pipeline (pipeline/call-pipeline.ts), and what they share. Planning gives the
 * model's plan, or null for an alias, whose targets are planned (and budgeted) as they are tried.
 */
class V1Call implements GatewayCall, CallSteps<ApiPlan | null, ApiPlan> {
  /** One config snapshot for the whole call: a config push mid-call changes nothing for this call. */
  readonly snapshot: ConfigSnapshot;
  readonly caller: CallerEnd;
  span: MeteredCall | null = null;
  /** The plan of a call to one model, for the route its failure names. */
  planned: ApiPlan | null = null;
  /** The model asked for, once the body named it. */
  requested: string | null = null;
  // What the body says, set by plan() before any later step runs.
  chat!: Record<string, unknown>;
  body!: Buffer;
  contentType: string | undefined;
  origin!: CallOrigin;

  readonly request: FastifyRequest;
  readonly res: ServerResponse;
  readonly opts: GatewayRoutesOptions;
  readonly api: GatewayApi;
  readonly trace: TraceContext;

  constructor(request: FastifyRequest, res: ServerResponse, opts: GatewayRoutesOptions, api: GatewayApi, trace: TraceContext) {
    this.request = request;
    this.res = res;
    this.opts = opts;
    this.api = api;
    this.trace = trace;
    this.snapshot = opts.store.current();
    this.caller = new CallerEnd(res);
  }

  /** Targeting on /v1 is the model: an alias's targets, a configured route's, a price entry's, the local runtime's. */
  async plan(): Promise<ApiPlan | null> {
    const { body, contentType, chat, requested } = await readGatewayRequest(this.request, this.api, this.snapshot.config);
    this.requested = requested;
    this.body = body;
    this.contentType = contentType;
    this.chat = chat;
    this.origin = {
      requestId: this.request.id,
      trace: this.trace,
      userId: spanUserId(this.request, this.snapshot.config.mode, this.api.requestUser(chat)),
      projectHeader: projectHeaderOf(this.request),
    };
    if (aliasOf(this.snapshot.config, requested) !== undefined) return null;
    const found = await resolveModel(this.opts, this.snapshot, requested);
    try {
      this.planned = planFor(this, found);
    } catch (error) {
      this.span = refusedPlan(this, found, requested, error);
      throw error;
    }
    this.span = startCall(this, this.planned);
    return this.planned;
  }

  budget(planned: ApiPlan | null): boolean | Promise<boolean> {
    // An alias's budget is checked at its first target that costs anything, as it is tried (send).
    return planned === null ? false : refusedOverBudget(this, this.span!, planned);
  }

  async send(planned: ApiPlan | null): Promise<Exchange<ApiPlan> | null> {
    if (planned !== null) return { plan: planned, upstream: await sendPlanned(this, planned, this.caller.abort) };
    const name = this.requested!;
    return aliasExchange(this, name, aliasOf(this.snapshot.config, name)!);
  }

  relay(exchange: Exchange<ApiPlan>): Promise<void> {
    return relayPlanned(this, this.span!, exchange.plan, exchange.upstream);
  }

  fail(error: unknown): void {
    failGatewayCall(this, error);
  }
}

function projectHeaderOf(request: FastifyRequest): string | null {
  return headerValue(request.headers, 'x-tollgate-project') ?? null;
}

/** A /v1 call that failed or was refused: its span (one even when no route was reached) and its answer. */
function failGatewayCall(g: V1Call, error: unknown): void {
  const { opts, api, snapshot, trace, request, res } = g;
  // A call refused before it reached a route (no body, bad JSON, unknown model) is named by the model it asked for.
  const origin: CallOrigin = { requestId: request.id, trace, userId: spanUserId(request, snapshot.config.mode, null), projectHeader: projectHeaderOf(request) };
  const call = failedCallSpan(opts.meter, g.span, origin, { route: 'v1', provider: 'unknown', model: g.requested ?? 'unknown', operation: api.operation });
  if (error instanceof GatewayError) {
    rejectCall(call, snapshot.prices, `${error.code ?? 'invalid_request'}: ${error.message}`);
    if (!answerClosed(res)) sendJson(res, error.statusCode, api.errors.refusal(error), trace);
    request.raw.resume();
    return;
  }
  const proxyError = error instanceof ProxyError ? error : toProxyError(g.planned?.route ?? 'v1', error);
  finishFailedCall(call, snapshot.prices, proxyError, res);
  sendFailure(res, proxyError, api.errors.failure(proxyError), trace);
}

/** One /v1 call and what its steps share. */
interface GatewayCall {
  request: FastifyRequest;
  res: ServerResponse;
  opts: GatewayRoutesOptions;
  api: GatewayApi;
  /** One config snapshot for the whole call: a config push mid-call changes nothing for this call. */
  snapshot: ConfigSnapshot;
  chat: Record<string, unknown>;
  /** The body as it came, and its Content-Type (an audio upload is forwarded as these bytes). */
  body: Buffer;
  contentType: string | undefined;
  trace: TraceContext;
  /** Who made the call, for its spans: its user is the identity, the header, else the body's user. */
  origin: CallOrigin;
}

function planFor(g: GatewayCall, target: GatewayTarget): ApiPlan {
  const { config } = g.snapshot;
  return g.api.plan({
    request: g.chat,
    body: g.body,
    contentType: g.contentType,
    target,
    config,
    env: g.opts.env ?? process.env,
    headers: g.request.headers,
    user: g.origin.userId,
    storedObjects: mayReachStoredObjects(g.request.identity, config),
  });
}

/** The span of a call its route refused to plan (a request that route cannot take): rejected, nothing sent. */
function refusedPlan(g: GatewayCall, found: GatewayTarget, requested: string, error: unknown): MeteredCall {
  const { config } = g.snapshot;
  const module = routeCatalog(config).get(g.api.routeOf?.(found, config) ?? v1RouteOf(found, config) ?? '');
  const message = error instanceof GatewayError ? `invalid_request: ${error.message}` : error instanceof ProxyError ? `${error.code}: ${error.message}` : String(error);
  const call = startCallSpan(g.opts.meter, g.origin, {
    provider: found.provider,
    operation: g.api.operation,
    route: module?.name ?? 'v1',
    model: requested,
    projectId: projectOf(g.origin, module, config),
  });
  rejectCall(call, g.snapshot.prices, message);
  return call;
}

/** Where a planned call goes, for its span: the route, its provider, the model sent and the project billed. */
function callTarget(g: GatewayCall, planned: ApiPlan): CallTarget {
  const { config } = g.snapshot;
  const module = routeCatalog(config).get(planned.route)!;
  return { route: planned.route, provider: planned.provider, model: planned.model, projectId: projectOf(g.origin, module, config) };
}

function startCall(g: GatewayCall, planned: ApiPlan, alias?: string): MeteredCall {
  return startCallSpan(g.opts.meter, g.origin, {
    ...callTarget(g, planned),
    operation: g.api.operation,
    ...(alias !== undefined ? { alias } : {}),
    ...(planned.audio?.units !== undefined ? { units: planned.audio.units } : {}),
    ...(planned.units !== undefined ? { units: planned.units } : {}),
  });
}

/**
 * A spent budget, or one without room for this call's reservation, refuses the call here, from memory, before
 * anything goes upstream (ADRs 1300, 1308); an admitted call holds its reservation until it finishes.
 */
function refusedOverBudget(g: GatewayCall, call: MeteredCall, planned: ApiPlan): boolean | Promise<boolean> {
  // A call no provider bills (a token count, a moderation) has nothing for a budget to hold back (ADR 0912).
  if (g.api.free === true || planned.free === true) return false;
  const sent = planned.body;
  const refusal = reserveForCall(
    g.opts.budgets,
    call,
    g.snapshot.prices,
    { bytes: sent, size: sent.length, json: g.chat, usage: planned.reservation ?? planned.audio?.reservation },
    { now: Date.now(), res: g.res },
  );
  return whenRefused(refusal, (refused) => refuseCall(call, g.snapshot.prices, refused, { res: g.res, errors: g.api.errors.shape, trace: g.trace }));
}

function sendPlanned(g: GatewayCall, planned: ApiPlan, abort: CallAbort): Promise<UpstreamResponse> {
  // Pass-through keeps the caller's headers as the native route does; a translated call is a new request.
  const headers = planned.translation === 'passthrough' ? upstreamRequestHeaders(g.request.headers, false) : { 'accept-encoding': 'identity' };
  headers['content-type'] = 'application/json';
  // A plan's own Content-Type wins: an audio upload keeps its multipart boundary.
  Object.assign(headers, planned.headers);
  setUpstreamTrace(headers, g.trace);
  return g.opts.client.send(g.snapshot.config, { route: planned.route, method: 'POST', path: planned.path, headers, body: planned.body, signal: abort });
}

function relayPlanned(g: GatewayCall, call: MeteredCall, planned: ApiPlan, upstream: UpstreamResponse): Promise<void> {
  const sent = planned.body;
  return relay({
    wire: wireFormat(routeCatalog(g.snapshot.config).get(planned.route)!),
    res: g.res,
    upstream,
    call,
    prices: g.snapshot.prices,
    plan: planned,
    trace: g.trace,
    answer: planned.answer,
    logger: g.request.log as unknown as Logger,
    estimateInput: () => estimateInputTokens(sent, sent.length),
  });
}

function aliasOf(config: RuntimeConfig, model: string): ModelAlias | undefined {
  const aliases = configuredAliases(config);
  return aliases.size === 0 ? undefined : aliases.get(model);
}

/** The price entry and provider a target's model has on its route (unpriced when the table has none). */
function aliasTarget(g: GatewayCall, target: AliasTarget): GatewayTarget {
  const module = routeCatalog(g.snapshot.config).get(target.route);
  if (module === undefined) throw new ProxyError('upstream_misconfigured', `model alias target names route ${target.route}, which this config does not have`);
  const entry = g.snapshot.prices.resolve(module.provider, target.model) ?? unpricedEntry(module.provider, target.model);
  return { entry, provider: module.provider, requested: target.model, route: target.route };
}

/**
 * A call to a model alias: its targets tried until one answers (fallback/alias-call.ts); that answer is then
 * relayed. The call's span names the target that answered; when more than one attempt was made, each has a
 * span of its own, a child of the call's. Null when the budget refused the call at its first paid target (answered).
 */
async function aliasExchange(g: V1Call, name: string, alias: ModelAlias): Promise<Exchange<ApiPlan> | null> {
  const { opts } = g;
  const health = opts.targetHealth ?? new TargetHealth();
  let budgeted = false;
  const aliasCall = new AliasCall<ApiPlan>({
    alias: name,
    definition: alias,
    health,
    breakerOpen: (route) => opts.client.breakerOpen(route),
    onFallback: (from, to, reason) => opts.fallbacks?.fallback(name, from, to, reason),
    attempt: async (target, abort) => {
      let planned: ApiPlan;
      try {
        planned = planFor(g, aliasTarget(g, target));
      } catch (error) {
        // This target cannot take the request (a parameter its provider lacks, a route the config lost).
        throw new TargetUnfit(error);
      }
      // The call is known as soon as it starts, so a failure thrown past it still finishes it (and releases its
      // budget reservation) rather than a span of its own.
      if (g.span === null) g.span = startCall(g, planned, name);
      else g.span.retarget(callTarget(g, planned));
      // One budget check and reservation per call, at its first target that costs anything: a fallback from a
      // local model to a paid one is checked there, a fallback between paid ones keeps the reservation (ADR 1308).
      if (!budgeted && !costsNothing(planned.provider)) {
        budgeted = true;
        if (await refusedOverBudget(g, g.span, planned)) throw new AliasCallEnded();
      }
      return { plan: planned, upstream: await sendPlanned(g, planned, abort) };
    },
  });
  // The caller's leaving (before the answer is relayed) ends the attempt under way, and no other starts.
  const cancel = () => aliasCall.cancel(g.caller.error ?? callerLeft());
  if (g.caller.abort.ended) cancel();
  else g.caller.abort.once('abort', cancel);
  let answered: Answered<ApiPlan>;
  try {
    answered = await aliasCall.run();
  } catch (error) {
    recordAttempts(g, g.span, aliasCall.failed, null);
    if (error instanceof AliasCallEnded) return null;
    throw error;
  }
  const metered = g.span;
  if (metered === null) throw new ProxyError('upstream_misconfigured', `model alias ${name} made no attempt`);
  metered.retarget(callTarget(g, answered.plan));
  recordAttempts(g, metered, aliasCall.failed, answered);
  health.served(name, alias, answered.target.priority, Date.now());
  return { plan: answered.plan, upstream: answered.upstream };
}

/** The budget refused the call before its first attempt: the refusal has been answered. */
class AliasCallEnded extends Error {}

/** When a call made more than one attempt, each gets a span of its own, a child of the call's. */
function recordAttempts(g: GatewayCall, call: MeteredCall | null, failed: readonly FailedAttempt[], answered: Answered<ApiPlan> | null): void {
  if (call === null || failed.length === 0 || (answered === null && failed.length === 1)) return;
  const { config } = g.snapshot;
  for (const attempt of failed) {
    // The answer relayed may be an earlier attempt's failing one (the provider's own 429): recorded once, below.
    if (attempt.attempt === answered?.attempt) continue;
    const module = routeCatalog(config).get(attempt.target.route);
    call.recordAttempt({
      attempt: attempt.attempt,
      target: {
        route: attempt.target.route,
        provider: module?.provider ?? 'unknown',
        model: attempt.target.model,
        projectId: projectOf(g.origin, module, config),
      },
      startedAt: attempt.startedAt,
      startTime: attempt.startTime,
      status: attempt.statusCode === null ? 'error' : 'upstream_error',
      statusCode: attempt.statusCode,
      error: attempt.error,
    });
  }
  if (answered !== null) {
    const { statusCode } = answered.upstream;
    call.recordAttempt({
      attempt: answered.attempt,
      target: call.call,
      startedAt: answered.startedAt,
      startTime: answered.startTime,
      status: statusCode >= 400 ? 'upstream_error' : 'ok',
      statusCode,
      error: null,
    });
  }
}
