// What one route owns, as one interface: how a native call and a /v1 chat call become its upstream request,
// how the answer comes back to /v1, and in which shape its callers' SDKs read an error. The facts that are
// data (provider, credential kind, wire format, default upstream) are its entry in the route table
// (contracts/routes.ts). The engine (http/proxy.ts, http/gateway.ts) iterates ROUTE_MODULES and never
// branches on a route name.

import type { EndpointKind } from './endpoint-kinds.ts';
import type { DeferredPlan } from './deferred-plan.ts';
import type { RouteFormat, RouteSpec } from '../../../contracts/routes.ts';
import type { CredentialDefinition } from '../../../contracts/credential-kinds.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import type { BilledUnits, TokenUsage } from '../usage/usage.ts';
import type { RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import type { ChatExtensions } from '../translate/chat-extensions.ts';
import type { ChatResponseTranslation } from '../translate/chat-responses.ts';
import type { ChatStreamTranslator } from '../translate/chat-stream.ts';
import type { EmbeddingsTranslation } from '../translate/openai-embeddings.ts';
import type { ErrorShape } from './error-shape.ts';
import type { ImageOperation } from './openai-images.ts';
import type { AudioOperation } from './openai-audio.ts';
import type { SpeechAnswer } from '../usage/speech-estimate.ts';
import type { ProviderImagesReader } from '../translate/provider-images.ts';

/**
 * What the proxy does with a native call's request body: pass the bytes through unread (`stream`), read them
 * whole (to sign them), or read and parse them as JSON (the model or stream flag is in them, or they are
 * rewritten); a `json` route refuses a body sent as another content type.
 */
export type BodyHandling = 'stream' | 'read' | 'json';

/** A call on /proxy/<route>/*. */
export interface NativeCall {
  method: string;
  /** Path after `/proxy/<route>`, starting with `/`, already checked for dot segments and fragments. */
  rest: string;
  /** Raw query string including its `?`, or empty. */
  query: string;
  /** The body, for routes that read it (BodyHandling `read` or `json`); null when there is none. */
  body: Buffer | null;
  /** The body's Content-Type (a multipart upload's boundary is in it). */
  contentType?: string | undefined;
  upstream: UpstreamConfig | undefined;
  /** Where defaults are read from (GOOGLE_CLOUD_PROJECT, …). */
  env: NodeJS.ProcessEnv;
}

export interface UpstreamRequestPlan {
  /** Path and query to send upstream (the base URL's own path prefix is added by the client). */
  path: string;
  /** Body to send; null means pass the caller's body stream through unread. */
  body: Buffer | null;
  model: string;
  operation: string;
  /** The proxy added stream_options.include_usage; the extra usage chunk must not reach the caller. */
  stripInjectedUsage: boolean;
  /** User id found in the body (see requestUserId), when the caller set no header. */
  bodyUserId: string | null;
  /** What the call reaches of the provider's stored objects under the proxy's key (stored-objects.ts), if anything. */
  storedObjects?: string;
  /** Why this call on a metered path cannot be metered after all, if it cannot. */
  unmeteredBecause?: string;
  /** Billed units only the request knows (an image's size and quality, a speech input's characters), merged into the usage (ADR 0910). */
  units?: BilledUnits;
  /** The usage a budget reservation holds when the request says it better than its bytes (an image call's; ADR 0910). */
  reservation?: TokenUsage;
  /** Submits or reads a result billed when it is known (a batch, a background response; ADR 0913). */
  deferred?: DeferredPlan;
  /** An audio call's request-side facts (ADR 0911). */
  audio?: AudioFacts;
}

/** What an audio request says before its answer: the units it bills, what its reservation holds, a speech answer's facts. */
export interface AudioFacts {
  /** Billed units only the request knows (a WAV upload's seconds, a speech input's characters), merged into the usage. */
  units?: BilledUnits;
  /** The usage its budget reservation holds: seconds or characters, and the tokens they stand for. */
  reservation: TokenUsage;
  /** A speech request: its answer is audio, whose usage a token-billed model has estimated from these. */
  speech?: SpeechAnswer;
  /** An upload whose answer (this response_format) reports no usage: only its WAV seconds can bill it. */
  unreportedFormat?: string;
}

/**
 * A /v1 call the gateway sends to this route: a chat request (the caller's, or one the Responses or Messages
 * API was translated into), or for a native surface the caller's request in that API.
 */
export interface V1Call {
  /** The request, parsed. */
  request: Record<string, unknown>;
  /** The model id the caller asked for, and the price entry it resolved to. */
  requested: string;
  entry: PriceEntry;
  upstream: UpstreamConfig | undefined;
  env: NodeJS.ProcessEnv;
  /** What the Responses or Messages API asked for that a chat request cannot say (absent for chat callers). */
  extensions?: ChatExtensions | undefined;
  /** The caller's anthropic-beta flags (a Messages call): the header goes where the route's upstream reads betas. */
  betas?: readonly string[] | undefined;
}

export interface V1RoutePlan {
  /** The model id sent upstream (and recorded on the span, as the native route would). */
  model: string;
  /** As a native plan's (UpstreamRequestPlan): billed units only the request knows, and what its reservation holds. */
  units?: BilledUnits;
  reservation?: TokenUsage;
  path: string;
  body: Buffer;
  /** Extra request headers (accept, Bedrock's stream accept). */
  headers: Record<string, string>;
  /** Null: the upstream speaks OpenAI's format and the answer passes through. */
  response: ChatResponseTranslation | null;
  /** The caller asked for the final usage chunk. */
  includeUsage: boolean;
  /** Anthropic: the answer is the forced JSON tool's input. */
  jsonMode: boolean;
  /** Pass-through: the gateway added stream_options.include_usage and must remove the usage chunk. */
  stripInjectedUsage: boolean;
  /**
   * A native surface whose upstream frames its stream differently from the API's own (Claude on Bedrock: the
   * Messages events inside AWS's event stream): the stream as the caller's API frames it.
   */
  reframe?: (route: string) => ChatStreamTranslator;
  /**
   * A token count whose upstream answers in its own shape: the field of its answer that holds the count (Gemini's
   * `totalTokens`, Bedrock's `inputTokens`), read into the caller's API.
   */
  tokenCountField?: string;
  /** An audio call's request-side facts (ADR 0911). */
  audio?: AudioFacts;
}

/** What a native surface is asked for: a Messages call, or its token count. */
export type MessagesOperation = 'messages' | 'count_tokens';

/** The /v1 operations besides chat, which the gateway passes through to a route that serves them in OpenAI's format. */
export type V1PassThroughOperation = 'completions';

/** A /v1/embeddings call on a route: OpenAI's request passed through, or translated with its answer's reader. */
export interface V1EmbeddingsPlan extends V1RoutePlan {
  /** How the route's answer reads as OpenAI's; absent: the upstream answers in OpenAI's format. */
  embeddings?: EmbeddingsTranslation;
}

/** A /v1/images/generations call translated for a route whose upstream has its own image API. */
export interface V1ImagesPlan extends V1RoutePlan {
  /** The base64 images of the route's answer, in order, written back as OpenAI's `data`. */
  readImages: ProviderImagesReader;
}

/** The /v1 side of a route: translation to and from the chat format, and the route's model-id form. */
export interface V1Surface {
  /** The model's id on this route: the caller's when it has the route's form, else the entry's alias of that form. */
  modelId(requested: string, entry: PriceEntry): string;
  /**
   * Whether the route serves this model of its provider on /v1; absent: every one. A model the provider's chosen
   * route does not serve goes to the provider's first /v1 route that does (Bedrock's models other than Claude to
   * the Bedrock route, ADR 0914).
   */
  serves?(entry: PriceEntry): boolean;
  plan(call: V1Call): V1RoutePlan;
  /** Upstream paths of the other /v1 operations this route's upstream serves in OpenAI's format; absent: chat only. */
  passThrough?: Partial<Record<V1PassThroughOperation, string>>;
  /**
   * The upstream computes embeddings (/v1/embeddings, ADR 0903): OpenAI's request passed through, or translated
   * into the route's own API. Throws GatewayError for a model or a request it cannot take.
   */
  embeddings?(call: V1Call): V1EmbeddingsPlan;
  /** The upstream serves the Responses API itself (OpenAI): its path; the request passes through. */
  responsesPath?: string;
  /** The upstream serves OpenAI's image API (ADR 0910): each operation's path; a generation passes through, an edit as sent. */
  images?: Readonly<Record<ImageOperation, string>>;
  /**
   * The upstream generates images in its own API (Imagen's :predict, Bedrock's image models; ADR 0915): OpenAI's
   * generation request translated. Throws ImageRequestError for a model or a request it cannot take.
   */
  imageGeneration?(call: V1Call): V1ImagesPlan;
  /** The upstream serves OpenAI's moderation API (OpenAI, OpenAI-compatible servers): its path; the request passes through. */
  moderationsPath?: string;
  /** The upstream serves OpenAI's audio API (ADR 0911): each operation's path; the request passes through as sent. */
  audio?: Readonly<Record<AudioOperation, string>>;
  /**
   * The upstream speaks the Messages API (Claude): a Messages request, or its token count, in the route's envelope;
   * undefined for a model of the route that does not (Bedrock's other models: the call goes through the chat pivot).
   */
  messages?(call: V1Call, operation: MessagesOperation): V1RoutePlan | undefined;
  /** The upstream counts a prompt's tokens though it does not speak Messages (Gemini): the chat request's count. */
  countTokens?(call: V1Call): V1RoutePlan;
}

/** A request passed through to a native surface: the caller's body with the route's model id. */
export function nativePlan(model: string, path: string, body: Record<string, unknown>, headers: Record<string, string> = {}): V1RoutePlan {
  return { model, path, body: Buffer.from(JSON.stringify(body)), headers, response: null, includeUsage: false, jsonMode: false, stripInjectedUsage: false };
}

/** A route's table facts: a built-in entry of contracts/routes.ts, or one made from a configured route. */
export type RouteFacts = Omit<RouteSpec, 'credential'>;

export interface RouteModule {
  readonly name: string;
  readonly spec: RouteFacts;
  readonly provider: string;
  /** Its credential: a built-in one's id, or `route:<name>` for a configured route's own. */
  readonly credentialId: string;
  readonly credential: CredentialDefinition;
  /** Added in the config (not a built-in entry). */
  readonly configured: boolean;
  /** Model ids /v1 sends here by their bare id (a configured route's `models`). */
  readonly models: readonly string[];
  /** Headers sent upstream when the caller sent none. */
  readonly headers: readonly (readonly [string, string])[];
  /** The upstream settings of a configured route (a built-in one's are upstreams.<route>). */
  readonly upstream?: UpstreamConfig;
  readonly body: BodyHandling;
  /**
   * A native path whose body is a multipart form the route reads and plans (OpenAI's audio uploads, ADR 0911),
   * taken on a `json` route in place of JSON; absent: none is.
   */
  formUpload?(method: string, rest: string): boolean;
  /**
   * What a native call is (endpoint-kinds.ts): metered, free, or undefined: a path the format cannot meter,
   * refused unless the route allows unmetered calls. `rest` is the path after /proxy/<route>, without the query.
   */
  endpoint(method: string, rest: string): EndpointKind | undefined;
  /** The error shape its callers' SDKs understand (refusals the engine makes on this route's behalf). */
  readonly errors: ErrorShape;
  planNative(call: NativeCall): UpstreamRequestPlan;
  /** Absent when the /v1 gateway does not route here (the route table's `v1`). */
  readonly v1?: V1Surface;
  /** The upstream's base URL from another setting of the config, when upstreams.<route>.baseUrl is unset. */
  baseUrlFromConfig?(config: RuntimeConfig): string;
}

/** What a format does, for one route: its body handling, planning, /v1 surface and error shape. */
export type RouteBehaviour = Pick<RouteModule, 'body' | 'formUpload' | 'endpoint' | 'errors' | 'planNative' | 'v1' | 'baseUrlFromConfig'>;

/**
 * A format's module: the behaviour of any route of that format, given the route's name (which messages and
 * settings name). Built once per route when the route table or the config is loaded, never per call.
 */
export interface FormatModule {
  readonly format: RouteFormat;
  behaviour(route: string): RouteBehaviour;
}

export function defineFormat(format: RouteFormat, behaviour: (route: string) => RouteBehaviour): FormatModule {
  return { format, behaviour };
}
