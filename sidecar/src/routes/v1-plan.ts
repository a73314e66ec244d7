// Where a /v1/chat/completions call goes: the price entry of its `model` names the provider, the gateway
// config names the route serving that provider, the entry's aliases give the model's id on that route, and
// the route decides the upstream path and the envelope around the translated body. Pure: tested without I/O.

import type { GatewayConfig, RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { ProxyError } from '../errors.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { canonicalBedrockPath, VERTEX_ANTHROPIC_VERSION } from './native-plan.ts';
import type { Provider, RouteName } from '../../../contracts/routes.ts';
import { toAnthropicRequest } from '../translate/openai-anthropic.ts';
import { toGeminiRequest } from '../translate/openai-gemini.ts';
import { GatewayError } from '../translate/openai-error.ts';
import { injectStreamUsage, requestNeedsInjectedUsage } from '../usage/extractor.ts';

export const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31';

export type GatewayRoute = Extract<RouteName, 'beta' | 'alpha' | 'alpha-compat' | 'gamma-direct' | 'gamma' | 'gamma-cloudb'>;

/** How the response is read: passed through (OpenAI format already) or translated from a provider's format. */
export type ResponseTranslation = 'passthrough' | 'anthropic' | 'gemini';

export interface GatewayPlan {
  route: GatewayRoute;
  provider: Provider;
  /** The model id sent upstream (and recorded on the span, as the native route would). */
  model: string;
  path: string;
  body: Buffer;
  /** Extra request headers (accept, Bedrock's stream accept). */
  headers: Record<string, string>;
  translation: ResponseTranslation;
  stream: boolean;
  /** The caller asked for the final usage chunk. */
  includeUsage: boolean;
  /** Anthropic: the answer is the forced JSON tool's input. */
  jsonMode: boolean;
  /** Pass-through: the gateway added stream_options.include_usage and must remove the usage chunk. */
  stripInjectedUsage: boolean;
}

const PROVIDER_ORDER: readonly Provider[] = ['openai', 'anthropic', 'google', 'local'];

/** The enabled price entry for a requested model id, on whichever provider has it. */
export function findModel(prices: PriceTable, model: string): { entry: PriceEntry; provider: Provider } | undefined {
  for (const provider of PROVIDER_ORDER) {
    const entry = prices.resolve(provider, model);
    if (entry) return { entry, provider };
  }
  return undefined;
}

export function routeFor(provider: Provider, gateway: GatewayConfig): GatewayRoute | undefined {
  switch (provider) {
    case 'openai':
      return 'beta';
    case 'google':
      return gateway.googleRoute;
    case 'anthropic':
      return gateway.anthropicRoute;
    case 'local':
      return undefined;
  }
}

const isVertexClaudeId = (id: string) => id.includes('@');
const isBedrockId = (id: string) => id.startsWith('arn:') || /^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?anthropic\./.test(id);
const isDirectClaudeId = (id: string) => !isVertexClaudeId(id) && !isBedrockId(id);
const DATED = /-\d{8}$/;

/**
 * The model's id on an Anthropic route. A caller who sends an id of the route's form gets it as sent;
 * otherwise the first alias of that form (on the Anthropic API a dated snapshot, since the bare family id
 * of the price table is not an API model name).
 */
export function anthropicModelId(route: 'gamma-direct' | 'gamma' | 'gamma-cloudb', requested: string, entry: PriceEntry): string {
  const fits = route === 'gamma' ? isVertexClaudeId : route === 'gamma-cloudb' ? isBedrockId : isDirectClaudeId;
  if (fits(requested) && !(route === 'gamma-direct' && requested.toLowerCase() === entry.model.toLowerCase())) return requested;
  const ids = [entry.model, ...(entry.aliases ?? [])].filter(fits);
  const chosen = route === 'gamma-direct' ? (ids.find((id) => DATED.test(id)) ?? ids[0]) : ids[0];
  if (chosen === undefined) {
    const form = route === 'gamma' ? "a Vertex AI id (with '@')" : route === 'gamma-cloudb' ? "a Bedrock id ('anthropic.…' or a region prefix)" : 'an Anthropic API id';
    throw new GatewayError(400, `model ${requested} has no id for route ${route}: add ${form} to the aliases of its price entry, or send that id as the model`, {
      param: 'model',
      code: 'model_not_available',
    });
  }
  return chosen;
}

/** Gemini ids on Vertex have no publisher prefix; the OpenAI-compatible surface wants `google/<id>`. */
function geminiModelId(requested: string): string {
  const slash = requested.lastIndexOf('/');
  return slash === -1 ? requested : requested.slice(slash + 1);
}

function vertexBase(route: GatewayRoute, upstream: UpstreamConfig | undefined, env: NodeJS.ProcessEnv): string {
  const project = upstream?.project ?? env.GOOGLE_CLOUD_PROJECT ?? (route === 'gamma' ? env.ANTHROPIC_VERTEX_PROJECT_ID : undefined);
  if (!project) {
    throw new ProxyError('upstream_misconfigured', `route ${route} needs a Google Cloud project: set upstreams.${route}.project or GOOGLE_CLOUD_PROJECT`);
  }
  // the same default as the host (upstreamBaseUrl), so host and path always name one region
  const location = upstream?.location ?? 'us-central1';
  return `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}`;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** A Vertex model id as a path segment: '@' (claude-sonnet-4@20250514) is a legal path character and stays as is. */
const vertexModelSegment = (model: string) => encodeURIComponent(model).replace(/%40/g, '@');

/** Plans one call. Throws GatewayError (the request) or ProxyError (the configuration). */
export function planGatewayCall(
  request: Record<string, unknown>,
  target: { entry: PriceEntry; provider: Provider; requested: string },
  config: RuntimeConfig,
  env: NodeJS.ProcessEnv,
): GatewayPlan {
  const route = routeFor(target.provider, config.gateway);
  if (route === undefined) {
    throw new GatewayError(400, `model ${target.requested} is served by provider ${target.provider}, which the /v1 gateway does not route`, {
      param: 'model',
      code: 'model_not_available',
    });
  }
  const upstream = config.upstreams[route];
  const stream = request.stream === true;
  const base = { route, provider: target.provider, stream, jsonMode: false, stripInjectedUsage: false };
  switch (route) {
    case 'beta':
    case 'alpha-compat': {
      const model = route === 'beta' ? target.requested : `google/${geminiModelId(target.requested)}`;
      const inject = requestNeedsInjectedUsage(request);
      const body = { ...(inject ? injectStreamUsage(request) : request), model };
      const path = route === 'beta' ? '/v1/chat/completions' : `${vertexBase(route, upstream, env)}/endpoints/openapi/chat/completions`;
      return {
        ...base,
        model,
        path,
        body: json(body),
        headers: {},
        translation: 'passthrough',
        includeUsage: stream && !inject,
        stripInjectedUsage: inject,
      };
    }
    case 'alpha': {
      const model = geminiModelId(target.requested);
      const translated = toGeminiRequest(request);
      const method = stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
      return {
        ...base,
        model,
        path: `${vertexBase(route, upstream, env)}/publishers/google/models/${vertexModelSegment(model)}:${method}`,
        body: json(translated.body),
        headers: { accept: stream ? 'text/event-stream' : 'application/json' },
        translation: 'gemini',
        includeUsage: translated.includeUsage,
      };
    }
    case 'gamma-direct':
    case 'gamma':
    case 'gamma-cloudb': {
      const model = anthropicModelId(route, target.requested, target.entry);
      const translated = toAnthropicRequest(request, { imageUrls: route === 'gamma-direct', route });
      const body = translated.body;
      let path: string;
      const headers: Record<string, string> = { accept: stream ? 'text/event-stream' : 'application/json' };
      if (route === 'gamma-direct') {
        body.model = model;
        path = '/v1/messages';
      } else if (route === 'gamma') {
        body.anthropic_version = VERTEX_ANTHROPIC_VERSION;
        path = `${vertexBase(route, upstream, env)}/publishers/anthropic/models/${vertexModelSegment(model)}:${stream ? 'streamRawPredict' : 'rawPredict'}`;
      } else {
        // Bedrock: the path decides streaming; `model` and `stream` in the body are refused.
        delete body.stream;
        body.anthropic_version = BEDROCK_ANTHROPIC_VERSION;
        path = canonicalBedrockPath(`/model/${encodeURIComponent(model)}/${stream ? 'invoke-with-response-stream' : 'invoke'}`);
        if (stream) {
          headers.accept = 'application/vnd.amazon.eventstream';
          headers['x-amzn-bedrock-accept'] = 'application/json';
        }
      }
      return {
        ...base,
        model,
        path,
        body: json(body),
        headers,
        translation: 'anthropic',
        includeUsage: translated.includeUsage,
        jsonMode: translated.jsonMode,
      };
    }
  }
}
