// What the routes that speak OpenAI's format share (beta, alpha-compat): a native call's body names the model
// and the user, and a streamed chat completion gets stream_options.include_usage added so its usage can be metered; on
// /v1 the chat request passes through with only its model replaced.

import { bytesAskingForUsage, injectStreamUsage, requestNeedsInjectedUsage } from '../wire-formats/extractor.ts';
import { bodyModel, forwardedAsIs, parseRouteJson, withStoredObjects } from './native-request.ts';
import { openAiStoredObjects } from './stored-objects.ts';
import { isFileUpload, openAiDeferred, withDeferred, withOpenAiDeferred } from './deferred-plan.ts';
import { openAiRequestUser } from './request-user.ts';
import { audioOperationOf, planAudioNative } from './openai-audio.ts';
import { imageOperationOf, planImagesNative } from './openai-images.ts';
import type { NativeCall, UpstreamRequestPlan, V1Call, V1RoutePlan } from './route-module.ts';

export function planOpenAiNative(route: string, call: NativeCall): UpstreamRequestPlan {
  const { body, method, rest, query } = call;
  const audio = audioOperationOf(method, rest);
  if (audio !== undefined) return planAudioNative(call, audio, route);
  const image = imageOperationOf(method, rest);
  if (image !== undefined) return planImagesNative(call, image, route);
  if (!body || body.length === 0) {
    // A stored response read by id may be a background response's result, charged then (ADR 0913).
    return withOpenAiDeferred(withStoredObjects(forwardedAsIs(rest + query, body, 'unknown', 'chat'), openAiStoredObjects(method, rest, null)), method, rest, null);
  }
  // A file is uploaded as a multipart form: passed on as it came (a batch made from it is reserved from the
  // file when it is created, ADR 0913).
  if (isFileUpload(method, rest)) return withStoredObjects(forwardedAsIs(rest + query, body, 'unknown', 'upload'), openAiStoredObjects(method, rest, null));
  const json = parseRouteJson(body, route);
  const stored = openAiStoredObjects(method, rest, json);
  if (json.background === true && rest.endsWith('/responses')) {
    // The answer is `queued`; the usage comes with the result read later, charged then (ADR 0913). Only the
    // OpenAI API's own path is known to work that way.
    const plan = withStoredObjects(forwardedAsIs(rest + query, body, bodyModel(json, route, false), 'chat', openAiRequestUser(json)), stored);
    const deferred = openAiDeferred(method, rest, json);
    if (deferred !== undefined) return withDeferred(plan, deferred);
    plan.unmeteredBecause = "a background response (background: true) is billed when its result is fetched later, which Tollgate meters only on the OpenAI API's own /v1/responses";
    return plan;
  }
  if (stored !== undefined) {
    return withOpenAiDeferred(withStoredObjects(forwardedAsIs(rest + query, body, bodyModel(json, route, false), 'chat', openAiRequestUser(json)), stored), method, rest, json);
  }
  const chatCompletions = method === 'POST' && rest.endsWith('/chat/completions');
  // OpenAI moderates with its default model when the body names none.
  const model = rest.endsWith('/moderations') && json.model === undefined ? 'omni-moderation-latest' : bodyModel(json, route, chatCompletions);
  const user = openAiRequestUser(json);
  // Only chat completions need asking for stream usage; the Responses API always ends its stream with it and
  // refuses stream_options.include_usage (Codex streams through /v1/responses).
  if (chatCompletions && requestNeedsInjectedUsage(json)) {
    return { path: rest + query, body: bytesAskingForUsage(body, json), model, operation: 'chat', stripInjectedUsage: true, bodyUserId: user };
  }
  return forwardedAsIs(rest + query, body, model, nativeOperation(rest), user);
}

/** The span's operation on a path that is neither a completion nor stored: the calls OpenAI does not bill (ADR 0912). */
function nativeOperation(rest: string): string {
  if (rest.endsWith('/moderations')) return 'moderation';
  if (rest.endsWith('/responses/input_tokens')) return 'count_tokens';
  return 'chat';
}

/**
 * A /v1 chat call to an OpenAI-format upstream: the request as sent, with the route's model id. A request
 * made from the Responses or Messages API also says here what they asked beyond chat: the effort of a
 * thinking request, and at most one tool call.
 */
export function planOpenAiPassThrough(call: V1Call, model: string, path: string): V1RoutePlan {
  const stream = call.request.stream === true;
  const inject = requestNeedsInjectedUsage(call.request);
  const body: Record<string, unknown> = { ...(inject ? injectStreamUsage(call.request) : call.request), model };
  const effort = call.extensions?.reasoning?.effort;
  if (effort !== undefined && effort !== null) body.reasoning_effort = effort;
  if (call.extensions?.singleToolCall === true && Array.isArray(body.tools) && body.tools.length > 0) body.parallel_tool_calls = false;
  return {
    model,
    path,
    body: Buffer.from(JSON.stringify(body)),
    headers: {},
    response: null,
    includeUsage: stream && !inject,
    jsonMode: false,
    stripInjectedUsage: inject,
  };
}
