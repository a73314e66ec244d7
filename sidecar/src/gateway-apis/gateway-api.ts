// One API the /v1 gateway serves (chat completions, Responses, Messages, Messages token counting): how its
// request is planned on the route its model picks, how the answer is written for its callers, in which shape
// they read an error. The handler (http/gateway.ts) is the same for every API: body, model, span, budget,
// upstream call, relay; what differs between the APIs is here, one module each (ADR 0901).

import type { IncomingHttpHeaders } from 'node:http';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import type { ProxyError } from '../errors.ts';
import { ANTHROPIC_ERRORS, OPENAI_ERRORS, type ErrorShape } from '../routes/error-shape.ts';
import type { GatewayPlan, GatewayTarget } from '../routes/v1-plan.ts';
import { anthropicProxyErrorBody, anthropicRefusalBody } from '../translate/anthropic-error.ts';
import type { ChatResponseTranslation, ResponseShaping } from '../translate/chat-responses.ts';
import type { ChunkEncoder } from '../translate/chat-stream.ts';
import { proxyErrorBody, upstreamErrorBody, type GatewayError } from '../translate/openai-error.ts';

/** An upstream's error response in the caller's shape (the status is kept): every answer has one. */
type UpstreamErrorAnswer = (route: string, statusCode: number, headers: Record<string, string | string[] | undefined>, body: Buffer) => unknown;

/** How a translated answer reaches the caller in its API (http/gateway-relay.ts reads it). */
export interface CallerAnswer {
  readonly passedThrough?: false;
  /** A translated route's whole answer, its JSON document, as the caller's body. */
  json(document: Record<string, unknown>, translation: ChatResponseTranslation | null, shaping: ResponseShaping): unknown;
  /** Writes a translated stream's chunks as the caller's events. `model` is named until the upstream names one. */
  encoder(model: string): ChunkEncoder;
  upstreamError: UpstreamErrorAnswer;
}

/** The answer of an upstream that already speaks the caller's API: its bytes pass through unread, only its errors are rewritten. */
export interface PassedThroughAnswer {
  readonly passedThrough: true;
  /** Names the answer (in the failure of a plan that would translate it). */
  readonly what: string;
  upstreamError: UpstreamErrorAnswer;
}

/** How an answer reaches the caller: translated, or passed through (ADR 1700: no method that throws). */
export type ApiAnswer = CallerAnswer | PassedThroughAnswer;

/** A pass-through answer whose errors are rewritten to name the route. */
export function passedThroughAnswer(what: string, upstreamError: UpstreamErrorAnswer = upstreamErrorBody): PassedThroughAnswer {
  return { passedThrough: true, what, upstreamError };
}

/** How the API's callers read a failure the gateway answers itself. */
export interface ApiErrors {
  /** For refusals worded by the engine (a spent budget). */
  readonly shape: ErrorShape;
  /** The gateway refused the request (a parameter, an unknown model). */
  refusal(error: GatewayError): unknown;
  /** The engine failed (upstream unreachable, open breaker, shutting down). */
  failure(error: ProxyError): unknown;
}

export const OPENAI_API_ERRORS: ApiErrors = { shape: OPENAI_ERRORS, refusal: (error) => error.toJSON(), failure: proxyErrorBody };
export const ANTHROPIC_API_ERRORS: ApiErrors = { shape: ANTHROPIC_ERRORS, refusal: anthropicRefusalBody, failure: anthropicProxyErrorBody };

export interface ApiCall {
  request: Record<string, unknown>;
  /** The body as it came (an upload is forwarded as these bytes), and its Content-Type; absent in plans made without one. */
  body?: Buffer | undefined;
  contentType?: string | undefined;
  target: GatewayTarget;
  config: RuntimeConfig;
  env: NodeJS.ProcessEnv;
  /** The caller's headers (a Messages caller's anthropic-beta). */
  headers: IncomingHttpHeaders;
  /** The span's user: whose stored responses the call may continue. */
  user: string | null;
  /** The caller may reach what the provider stores under the proxy's key (false for a server's non-admins). */
  storedObjects: boolean;
}

export interface ApiPlan extends GatewayPlan {
  answer: ApiAnswer;
  /** This call is billed nothing where its API is billed on some routes only (a moderation): as `free` below. */
  free?: boolean;
}

export interface GatewayApi {
  /** The span's operation name (OpenTelemetry GenAI). */
  readonly operation: string;
  /** The model when the request names none, where the API has a default (OpenAI's moderations); absent: a model is required. */
  readonly defaultModel?: string;
  /** No provider bills the call (a token count, a moderation): it holds no budget reservation and no budget refuses it (ADR 0912). */
  readonly free?: boolean;
  readonly errors: ApiErrors;
  /**
   * Reads a body that is not JSON (an audio upload's multipart form) into the fields the gateway routes by
   * (`model`); throws GatewayError when it cannot be taken. Absent: the body must be a JSON object.
   */
  readForm?(body: Buffer, contentType: string | undefined): Record<string, unknown>;
  /** The end user the body names, for the span when no header does. */
  requestUser(request: Record<string, unknown>): string | null;
  /** Plans the call. Throws GatewayError (the request) or ProxyError (the configuration). */
  plan(call: ApiCall): ApiPlan;
  /** The route a target's calls take, for the span of one refused before it was planned; absent: the provider's /v1 route. */
  routeOf?(target: GatewayTarget, config: RuntimeConfig): string | undefined;
}
