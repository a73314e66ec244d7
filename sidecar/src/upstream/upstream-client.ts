// Sends one request to a route's upstream: endpoint choice, breaker check, credential, undici dispatch with
// timeouts, and the mapping of every failure to a ProxyError with a stable code. Shared by the native /proxy
// routes and the /v1 gateway, so both fail, retry-guard and authenticate the same way. A route with `endpoints`
// (ADR 0008) shares its calls among them, and a call whose body can be sent again goes on to the next endpoint
// when one fails before any byte of its answer was relayed.

import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { CredentialProvider } from '../auth/credential-provider.ts';
import { CredentialError } from '../auth/credential-provider.ts';
import type { BreakerConfig, RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { ProxyError, type ProxyErrorCode } from '../errors.ts';
import type { BuiltInCredentialId } from '../../../contracts/credential-kinds.ts';
import { createCredentialProvider } from '../auth/credential-provider.ts';
import { hasHeader } from '../auth/header-record.ts';
import type { RouteModule } from '../routes/route-module.ts';
import { routeCatalog } from '../routes/route-catalog.ts';
import { vertexPathAt } from '../routes/vertex-ai.ts';
import { credentialSecrets, scrubBody, scrubHeaders } from './credential-echo.ts';
import { CredentialScrub } from './credential-scrub.ts';
import { anyAvailable, chooseEndpoint } from './endpoint-chooser.ts';
import { EndpointPool, type EndpointHealth, type ResolvedEndpoint, type ResolvedRoute } from './endpoint-pool.ts';
import { coolDownUntil } from './retry-after.ts';
import { Agent, undiciErrors } from './undici-agent.ts';
import { AnswerBody, readAnswerWhole } from './answer-body.ts';
import type { CallAbort } from './call-abort.ts';

export interface UpstreamSend {
  /** A route of the config's route catalog (built-in or configured). */
  route: string;
  method: string;
  /** Path and query relative to the route's base URL. */
  path: string;
  headers: Record<string, string>;
  /** A Buffer (read or rewritten body), the caller's stream passed through, or null. */
  body: Buffer | Readable | null;
  /** Ends the exchange early (the caller left, its body passed a limit). */
  signal: CallAbort;
}

export interface UpstreamResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  /** Fed by undici's parser as the bytes come (answer-body.ts); one reader reads it. */
  body: AnswerBody;
  /** Report how the response ended, so the breaker counts it (a stream that dies mid-way is a failure). */
  settle(outcome: 'success' | 'failure' | 'abandoned'): void;
  timing: UpstreamTiming;
  /**
   * A successful answer's scrub of the credential the proxy attached, for whoever reads the body to the caller
   * (relay.ts's responseExtractor applies it); absent when the request carried no secret. Error answers are
   * scrubbed here already, whole.
   */
  scrub?: CredentialScrub | undefined;
}

/** When the exchange with the upstream happened (performance.now()); `endedAt` is set when it is settled. */
export interface UpstreamTiming {
  /** The request went out (credentials already attached); with endpoints, the first attempt's. */
  startedAt: number;
  /** The response headers arrived. */
  headersAt: number;
  endedAt: number;
  /** The endpoint that answered, for a route with `endpoints` (the call's log line names it). */
  endpoint?: string | undefined;
}

/** Failures of one endpoint that another endpoint of the route may not have: the call goes on to the next. */
const NEXT_ENDPOINT_ON: ReadonlySet<ProxyErrorCode> = new Set(['upstream_unreachable', 'upstream_timeout', 'credential_unavailable']);
/** An endpoint that answers 429 without saying how long to wait is left alone this long. */
/** A next attempt needs at least this much of the route's timeout left (undici takes 0 as no timeout at all). */
const MIN_ATTEMPT_MS = 50;

export class UpstreamClient {
  readonly #agent: Agent;
  readonly #credentials: Record<BuiltInCredentialId, CredentialProvider>;
  /** Configured routes' own credentials by route name, with the definition they were built from. */
  readonly #routeCredentials = new Map<string, { key: string; provider: CredentialProvider }>();
  /** The same, per bound route (rebuilt with each config): one WeakMap lookup per call. */
  readonly #routeCredentialOf = new WeakMap<RouteModule, CredentialProvider>();
  readonly #endpoints: EndpointPool;
  readonly #logger: Logger;
  readonly #env: NodeJS.ProcessEnv;
  #breakerConfig: BreakerConfig;

  constructor(opts: {
    credentials: Record<BuiltInCredentialId, CredentialProvider>;
    breaker: BreakerConfig;
    logger: Logger;
    agent?: Agent;
    /** Where configured routes' api-key variables are read; process.env when absent. */
    env?: NodeJS.ProcessEnv;
  }) {
    this.#credentials = opts.credentials;
    this.#breakerConfig = opts.breaker;
    this.#logger = opts.logger;
    this.#env = opts.env ?? process.env;
    this.#agent =
      opts.agent ??
      new Agent({
        connections: 256,
        keepAliveTimeout: 30_000,
        connect: { timeout: 10_000 },
      });
    this.#endpoints = new EndpointPool({ breaker: opts.breaker, logger: opts.logger, env: this.#env });
  }

  /**
   * Follows the config's routes: a breaker for each route or endpoint, and the providers of routes and endpoints
   * that were removed or whose credential changed are closed.
   */
  syncRoutes(config: RuntimeConfig): void {
    const catalog = routeCatalog(config);
    const configured = new Map(catalog.configured().map((route) => [route.name, route]));
    for (const [name, held] of this.#routeCredentials) {
      const route = configured.get(name);
      if (route === undefined || JSON.stringify(route.credential) !== held.key) {
        held.provider.close();
        this.#routeCredentials.delete(name);
      }
    }
    this.#endpoints.sync(config);
  }

  #credentialOf(route: RouteModule): CredentialProvider {
    if (!route.configured) return this.#credentials[route.credentialId as BuiltInCredentialId];
    const bound = this.#routeCredentialOf.get(route);
    if (bound !== undefined) return bound;
    const key = JSON.stringify(route.credential);
    let held = this.#routeCredentials.get(route.name);
    if (held?.key !== key) {
      held?.provider.close();
      const provider = createCredentialProvider(route.credential, {
        id: route.credentialId,
        label: `API key of route ${route.name}`,
        fileSetting: `the file of route ${route.name}'s credential`,
        upstream: () => route.upstream,
        regionSetting: `the region of route ${route.name}`,
        logger: this.#logger.child({ component: 'credentials', route: route.name }),
        env: this.#env,
      });
      held = { key, provider };
      this.#routeCredentials.set(route.name, held);
    }
    this.#routeCredentialOf.set(route, held.provider);
    return held.provider;
  }

  /** Swaps credential providers (new key files pushed by the operator); the replaced ones are closed. */
  replaceCredentials(next: Partial<Record<BuiltInCredentialId, CredentialProvider>>): void {
    for (const [kind, provider] of Object.entries(next) as [BuiltInCredentialId, CredentialProvider][]) {
      const previous = this.#credentials[kind];
      this.#credentials[kind] = provider;
      if (previous !== provider) previous.close();
    }
  }

  /** Applies live breaker settings without resetting breaker state. */
  updateBreakerConfig(config: BreakerConfig): void {
    if (JSON.stringify(config) === JSON.stringify(this.#breakerConfig)) return;
    this.#breakerConfig = config;
    this.#endpoints.updateBreakerConfig(config);
  }

  /** Each route's breaker state; a route with endpoints is open only when every endpoint's breaker is. */
  breakerStates(): Record<string, string> {
    return this.#endpoints.breakerStates();
  }

  /** The endpoints of routes that have them (breaker, weight, calls in flight, cool-down); undefined when none has. */
  endpointHealth(): Record<string, Record<string, EndpointHealth>> | undefined {
    return this.#endpoints.endpointHealth(Date.now());
  }

  /** The breaker state of each endpoint, by route and endpoint name, for the routes that have endpoints. */
  endpointBreakers(): Record<string, Record<string, string>> {
    return this.#endpoints.endpointBreakers();
  }

  credentialProblems(): string[] {
    const problems: string[] = [];
    for (const provider of [...Object.values(this.#credentials), ...[...this.#routeCredentials.values()].map((held) => held.provider)]) {
      const problem = provider.problem();
      if (problem) problems.push(problem);
    }
    return [...problems, ...this.#endpoints.credentialProblems()];
  }

  /**
   * Whether the route refuses calls now because its breaker is open (an alias then tries the target last); for a
   * route with endpoints, because every endpoint's breaker is open or it is cooling down.
   */
  breakerOpen(route: string): boolean {
    return this.#endpoints.refusing(route, Date.now());
  }

  async send(config: RuntimeConfig, req: UpstreamSend): Promise<UpstreamResponse> {
    const route = routeCatalog(config).get(req.route);
    if (route === undefined) throw new ProxyError('unknown_route', `unknown route ${JSON.stringify(req.route)}`);
    const resolved = this.#endpoints.resolve(config, route);
    const timing: UpstreamTiming = { startedAt: Number.NaN, headersAt: Number.NaN, endedAt: Number.NaN, endpoint: undefined };
    if (resolved.declared) return this.#sendBalanced(route, resolved, req, timing);
    const only = resolved.endpoints[0]!;
    if (!only.load.breaker.tryAcquire()) {
      throw new ProxyError('circuit_open', `circuit breaker for upstream ${req.route} is open after repeated failures; retry later`);
    }
    return this.#attempt(route, only, req, timing, only.timeoutMs);
  }

  /**
   * A call to a route with endpoints: the chosen endpoint first, then, while the body can be sent again and the
   * route's timeout lasts, each other available endpoint once when one fails before its answer is relayed (a
   * refused or reset connection, a timeout before the headers, a 429, a 5xx). The last failure is the call's.
   */
  async #sendBalanced(route: RouteModule, resolved: ResolvedRoute, req: UpstreamSend, timing: UpstreamTiming): Promise<UpstreamResponse> {
    const { endpoints } = resolved;
    // A stream passed through is read once: it goes to one endpoint, whatever happens there.
    const replayable = req.body === null || Buffer.isBuffer(req.body);
    const deadline = performance.now() + resolved.timeoutMs;
    let tried = 0;
    let failure: ProxyError | undefined;
    for (;;) {
      const index = chooseEndpoint(endpoints, resolved.strategy, tried, Date.now());
      if (index === -1) throw failure ?? allUnavailable(route, resolved);
      tried |= 1 << index;
      const endpoint = endpoints[index]!;
      if (!endpoint.load.breaker.tryAcquire()) continue;
      const again = () => replayable && !req.signal.ended && deadline - performance.now() >= MIN_ATTEMPT_MS && anyAvailable(endpoints, tried, Date.now());
      let response: UpstreamResponse;
      try {
        // Each attempt signs its own copy: one endpoint's key or SigV4 headers never travel to the next.
        const attempt = replayable ? { ...req, headers: { ...req.headers } } : req;
        response = await this.#attempt(route, endpoint, attempt, timing, Math.min(resolved.timeoutMs, deadline - performance.now()));
      } catch (error) {
        if (!(error instanceof ProxyError && NEXT_ENDPOINT_ON.has(error.code)) || !again()) throw error;
        failure = error;
        continue;
      }
      const status = response.statusCode;
      if (status === 429) endpoint.load.coolingUntil = coolDownUntil(response.headers, Date.now());
      if ((status !== 429 && status < 500) || !again()) return response;
      // Not relayed: its answer is dropped and the exchange settled (a 5xx was counted against the breaker already).
      response.settle('success');
      response.body.destroy();
      timing.headersAt = timing.endedAt = Number.NaN;
    }
  }

  /** One exchange with one endpoint, its breaker already acquired. */
  async #attempt(route: RouteModule, endpoint: ResolvedEndpoint, req: UpstreamSend, timing: UpstreamTiming, headersTimeout: number): Promise<UpstreamResponse> {
    const { load } = endpoint;
    let settled = false;
    load.outstanding++;
    const settle = (outcome: 'success' | 'failure' | 'abandoned') => {
      if (settled) return;
      settled = true;
      load.outstanding--;
      timing.endedAt = performance.now();
      if (outcome === 'success') load.breaker.onSuccess();
      else if (outcome === 'failure') load.breaker.onFailure();
      else load.breaker.release();
    };
    try {
      // Inside the try: whatever throws after tryAcquire must still settle, or a half-open probe stays taken.
      const path = endpoint.prefix + (endpoint.vertex === undefined ? req.path : vertexPathAt(req.path, endpoint.vertex.project, endpoint.vertex.location));
      const credential = endpoint.credential ?? this.#credentialOf(route);
      const { headers } = route;
      for (let i = 0; i < headers.length; i++) if (!hasHeader(req.headers, headers[i]![0])) req.headers[headers[i]![0]] = headers[i]![1];
      // SigV4 signs the path in the encoding AWS expects and may rewrite it: send exactly what was signed.
      const outgoing = {
        method: req.method,
        // origin + path, not new URL(path, origin): a path starting with '//' is a path, never a host
        url: new URL(endpoint.origin + path),
        headers: req.headers,
        body: Buffer.isBuffer(req.body) ? req.body : null,
      };
      staysUnderBase(outgoing.url, endpoint.prefix, path);
      try {
        await credential.apply(outgoing);
      } catch (error) {
        if (error instanceof CredentialError) throw new ProxyError('credential_unavailable', error.message, { cause: error });
        throw error;
      }
      // Ended while the credential was applied: undici would not hear an 'abort' emitted before it listens.
      if (req.signal.ended) throw req.signal.reason;
      if (Number.isNaN(timing.startedAt)) timing.startedAt = performance.now();
      timing.endpoint = endpoint.name;
      const response = await exchange(
        this.#agent,
        {
          origin: endpoint.origin,
          path: outgoing.url.pathname + outgoing.url.search,
          method: req.method,
          headers: req.headers,
          body: req.body,
          headersTimeout,
          bodyTimeout: endpoint.timeoutMs,
        },
        req.signal,
      );
      timing.headersAt = performance.now();
      // A 5xx is counted against the breaker at once; the exchange still ends when its body does.
      if (response.statusCode >= 500) {
        settle('failure');
        timing.endedAt = Number.NaN;
      }
      // The credential the proxy attached never reaches the caller: an error is scrubbed whole here, a successful
      // answer's headers here and its body as it is relayed (credential-scrub.ts).
      const secrets = credentialSecrets(req.headers);
      if (response.statusCode >= 400 && secrets.length > 0) {
        return { statusCode: response.statusCode, ...(await withoutCredentialEcho(response, secrets)), settle, timing };
      }
      return { statusCode: response.statusCode, headers: scrubHeaders(response.headers, secrets), body: response, settle, timing, scrub: CredentialScrub.of(secrets) };
    } catch (error) {
      // Aborted by the caller's side (it went away, or its body passed the limit): no verdict on the
      // upstream. Checked first, because undici rejects with the abort reason, which may be a ProxyError.
      if (req.signal.ended) {
        settle('abandoned');
        throw error;
      }
      if (error instanceof ProxyError) {
        // a missing credential or a refused path says nothing about the upstream's health
        settle(error.code === 'credential_unavailable' || error.isClientError ? 'abandoned' : 'failure');
        throw error;
      }
      // undici refusing the request it was given is the proxy's fault, not the upstream's
      const refused = error instanceof undiciErrors.InvalidArgumentError || error instanceof undiciErrors.NotSupportedError;
      settle(refused ? 'abandoned' : 'failure');
      throw toProxyError(endpoint.name === undefined ? req.route : `${req.route} (endpoint ${endpoint.name})`, error);
    }
  }

  async close(): Promise<void> {
    for (const provider of Object.values(this.#credentials)) provider.close();
    for (const held of this.#routeCredentials.values()) held.provider.close();
    this.#endpoints.close();
    await this.#agent.close();
  }
}

/** Every endpoint of the route is behind an open breaker or cooling down: the code an alias falls back on. */
function allUnavailable(route: RouteModule, resolved: ResolvedRoute): ProxyError {
  const names = resolved.endpoints.map((endpoint) => endpoint.name).join(', ');
  return new ProxyError('circuit_open', `all endpoints of upstream ${route.name} are unavailable (${names}: circuit breaker open or cooling down after a 429); retry later`);
}

/**
 * The last guard on the path: whatever the request planning let through, the URL the upstream receives has no
 * fragment and stays under the base URL's path (a tenant or gateway prefix), after the URL parser has
 * resolved dot segments, backslashes and stray characters its own way.
 */
function staysUnderBase(url: URL, prefix: string, path: string): void {
  const under = prefix === '' || url.pathname === prefix || url.pathname.startsWith(`${prefix}/`);
  if (url.hash !== '' || !under) {
    throw new ProxyError('invalid_request', `path ${JSON.stringify(path.slice(prefix.length))} does not stay under the upstream's base path once resolved`);
  }
}

/** `route` names the upstream in the message: a route name, or `v1` before the gateway picked one. */
export function toProxyError(route: string, error: unknown): ProxyError {
  if (error instanceof ProxyError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError || error instanceof undiciErrors.ConnectTimeoutError) {
    return new ProxyError('upstream_timeout', `upstream ${route} timed out: ${message}`, { cause: error });
  }
  return new ProxyError('upstream_unreachable', `upstream ${route} failed: ${message}`, { cause: error });
}

/** Error bodies read whole to scrub them; past this an error body is cut (no provider sends one this large). */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/**
 * One exchange dispatched to the agent with its answer's body as the handler (answer-body.ts), as undici's
 * stream() does: resolves once the headers arrived, rejects with undici's error (or the signal's reason) when
 * the exchange fails before them.
 */
function exchange(agent: Agent, options: Omit<Dispatcher.DispatchOptions, 'body'> & { body: Buffer | Readable | null }, signal: CallAbort): Promise<AnswerBody> {
  return new Promise((resolve, reject) => {
    agent.dispatch(options, new AnswerBody(signal, resolve, reject));
  });
}

/** An error answer with the proxy's credential taken out of its headers and body (credential-echo.ts). */
async function withoutCredentialEcho(response: AnswerBody, secrets: readonly string[]): Promise<Pick<UpstreamResponse, 'headers' | 'body'>> {
  const read = await readAnswerWhole(response, MAX_ERROR_BODY_BYTES);
  const body = scrubBody(read.bytes, secrets);
  const headers = scrubHeaders({ ...response.headers }, secrets);
  headers['content-length'] = String(body.length);
  delete headers['transfer-encoding'];
  return { headers, body: AnswerBody.of(body) };
}
