// The format modules, one per format of contracts/routes.ts (the compiler refuses a format without its module),
// and the built-in routes bound to theirs. A configured route is bound the same way when the config is loaded
// (route-catalog.ts). The engine reaches a route only through a RouteModule.

import { BUILT_IN_CREDENTIALS } from '../../../contracts/credential-kinds.ts';
import { ROUTE_NAMES, ROUTES, type RouteFormat, type RouteName } from '../../../contracts/routes.ts';
import { anthropic } from './anthropic/index.ts';
import { anthropicVertex } from './anthropic-vertex/index.ts';
import { anthropicVertexRaw } from './anthropic-vertex-raw/index.ts';
import { bedrock } from './bedrock/index.ts';
import { geminiVertex } from './gemini-vertex/index.ts';
import { geminiVertexOpenAi } from './gemini-vertex-openai/index.ts';
import { ollama } from './ollama/index.ts';
import { openAi } from './openai/index.ts';
import { openAiChat } from './openai-chat/index.ts';
import type { FormatModule, RouteModule } from './route-module.ts';

export const FORMAT_MODULES: Readonly<Record<RouteFormat, FormatModule>> = {
  'gemini-vertex': geminiVertex,
  'gemini-vertex-openai': geminiVertexOpenAi,
  openai: openAi,
  'openai-chat': openAiChat,
  anthropic,
  'anthropic-vertex': anthropicVertex,
  'anthropic-vertex-raw': anthropicVertexRaw,
  bedrock,
  ollama,
};

function builtIn(name: RouteName): RouteModule {
  const { credential, ...spec } = ROUTES[name];
  return {
    name,
    spec: ROUTES[name],
    provider: spec.provider,
    credentialId: credential,
    credential: BUILT_IN_CREDENTIALS[credential].definition,
    configured: false,
    models: [],
    headers: Object.entries(spec.headers ?? {}),
    ...FORMAT_MODULES[spec.format].behaviour(name),
  };
}

export const ROUTE_MODULES: Readonly<Record<RouteName, RouteModule>> = Object.fromEntries(ROUTE_NAMES.map((name) => [name, builtIn(name)])) as Record<RouteName, RouteModule>;
