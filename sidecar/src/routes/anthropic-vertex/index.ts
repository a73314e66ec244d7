// Format anthropic-vertex (route gamma): Claude on Vertex AI, called with the Anthropic Messages API (POST /v1/messages and
// /v1/messages/count_tokens) and sent on as Vertex AI's rawPredict / streamRawPredict: the model moves from
// the body to the path and the body gets Vertex's anthropic_version. /v1 Messages calls take the same way.

import { anthropicEndpoint } from '../endpoint-kinds.ts';
import { isConverseModel } from '../bedrock-model-ids.ts';
import type { PriceEntry } from '../../../../contracts/price-entry.ts';
import type { UpstreamConfig } from '../../../../contracts/runtime-config.ts';
import { ProxyError } from '../../errors.ts';
import { ANTHROPIC_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { chatToMessages, claudePlan } from '../claude-chat.ts';
import { claudeModelId, isVertexClaudeId, type ClaudeIdForm } from '../claude-model-ids.ts';
import { ANTHROPIC_ERRORS } from '../error-shape.ts';
import { bodyModel, parseRouteJson } from '../native-request.ts';
import { anthropicRequestUser } from '../request-user.ts';
import { defineFormat, nativePlan, type NativeCall, type UpstreamRequestPlan } from '../route-module.ts';
import { VERTEX_ANTHROPIC_VERSION, vertexLocationPath, vertexModelSegment } from '../vertex-ai.ts';

/** The Anthropic Vertex SDKs read the project from either variable. */
const PROJECT_VARIABLES = ['GOOGLE_CLOUD_PROJECT', 'ANTHROPIC_VERTEX_PROJECT_ID'] as const;
/** Vertex AI ids carry the version after '@': claude-sonnet-4@20250514. */
const ID_FORM: ClaudeIdForm = { fits: isVertexClaudeId, canonicalIsApiId: true, described: "a Vertex AI id (with '@')" };

/** A Messages body in Vertex's envelope: the model in the path (in the body for count-tokens), its anthropic_version. */
function vertexMessages(
  json: Record<string, unknown>,
  model: string,
  countTokens: boolean,
  { route, upstream, env }: { route: string; upstream: UpstreamConfig | undefined; env: NodeJS.ProcessEnv },
): { path: string; body: Record<string, unknown> } {
  const base = `${vertexLocationPath(route, upstream, env, PROJECT_VARIABLES)}/publishers/anthropic/models/`;
  const body: Record<string, unknown> = { ...json };
  if (body.anthropic_version === undefined) body.anthropic_version = VERTEX_ANTHROPIC_VERSION;
  // count-tokens takes the model in the body, unlike rawPredict
  if (countTokens) return { path: `${base}count-tokens:rawPredict`, body: { ...body, model } };
  delete body.model;
  return { path: `${base}${vertexModelSegment(model)}:${body.stream === true ? 'streamRawPredict' : 'rawPredict'}`, body };
}

function planNative(route: string, { method, rest, query, body, upstream, env }: NativeCall): UpstreamRequestPlan {
  const countTokens = rest === '/v1/messages/count_tokens';
  if (method !== 'POST' || (rest !== '/v1/messages' && !countTokens)) {
    throw new ProxyError('invalid_request', `route ${route} serves POST /v1/messages and /v1/messages/count_tokens, not ${method} ${rest}`);
  }
  if (!body || body.length === 0) throw new ProxyError('invalid_request', `route ${route} needs a JSON request body`);
  const json = parseRouteJson(body, route);
  const model = bodyModel(json, route, true);
  const out = vertexMessages(json, model, countTokens, { route, upstream, env });
  return {
    path: out.path + query,
    body: Buffer.from(JSON.stringify(out.body)),
    model,
    operation: countTokens ? 'count_tokens' : 'chat',
    stripInjectedUsage: false,
    bodyUserId: anthropicRequestUser(json),
  };
}

export const anthropicVertex = defineFormat('anthropic-vertex', (route) => {
  const modelId = (requested: string, entry: PriceEntry): string => claudeModelId(route, ID_FORM, requested, entry);
  return {
    body: 'json',
    endpoint: anthropicEndpoint,
    errors: ANTHROPIC_ERRORS,
    planNative: (call: NativeCall) => planNative(route, call),
    v1: {
      modelId,
      // Bedrock's models other than Claude are reached on the Bedrock route only (ADR 0914).
      serves: (entry) => !isConverseModel(entry),
      plan(call) {
        const model = modelId(call.requested, call.entry);
        const translated = chatToMessages(call, route, false);
        translated.body.anthropic_version = VERTEX_ANTHROPIC_VERSION;
        const method = translated.stream ? 'streamRawPredict' : 'rawPredict';
        const path = `${vertexLocationPath(route, call.upstream, call.env, PROJECT_VARIABLES)}/publishers/anthropic/models/${vertexModelSegment(model)}:${method}`;
        return claudePlan(translated, { model, path }, ANTHROPIC_CHAT_RESPONSE);
      },
      messages(call, operation) {
        const model = modelId(call.requested, call.entry);
        const out = vertexMessages(call.request, model, operation === 'count_tokens', { route, upstream: call.upstream, env: call.env });
        return nativePlan(model, out.path, out.body);
      },
    },
  };
});
