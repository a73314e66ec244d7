// Format anthropic (route gamma-direct): the Anthropic API. Every path is forwarded; the body is read for the model and user.
// On /v1, chat and Responses calls are translated to the Messages API; Messages calls pass through.

import { anthropicEndpoint } from '../endpoint-kinds.ts';
import { isConverseModel } from '../bedrock-model-ids.ts';
import { ANTHROPIC_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { chatToMessages, claudePlan } from '../claude-chat.ts';
import { claudeModelId, isAnthropicApiClaudeId, type ClaudeIdForm } from '../claude-model-ids.ts';
import { ANTHROPIC_ERRORS } from '../error-shape.ts';
import { bodyModel, forwardedAsIs, parseRouteJson, withStoredObjects } from '../native-request.ts';
import { anthropicStoredObjects } from '../stored-objects.ts';
import { anthropicDeferred, isFileUpload, withDeferred } from '../deferred-plan.ts';
import { anthropicRequestUser } from '../request-user.ts';
import { defineFormat, nativePlan } from '../route-module.ts';

/** Anthropic API ids: claude-sonnet-4-20250514; the bare family id of the price table is not one. */
const ID_FORM: ClaudeIdForm = { fits: isAnthropicApiClaudeId, canonicalIsApiId: false, described: 'an Anthropic API id' };

export const anthropic = defineFormat('anthropic', (route) => {
  const modelId = (requested: string, entry: Parameters<typeof claudeModelId>[3]): string => claudeModelId(route, ID_FORM, requested, entry);
  return {
    body: 'json',
    // A Files API upload is a multipart form, passed on as it came (ADR 0912).
    formUpload: isFileUpload,
    endpoint: anthropicEndpoint,
    errors: ANTHROPIC_ERRORS,
    planNative({ method, rest, query, body }) {
      const stored = anthropicStoredObjects(rest);
      if (isFileUpload(method, rest)) return withStoredObjects(forwardedAsIs(rest + query, body, 'unknown', 'upload'), stored);
      const json = body && body.length > 0 ? parseRouteJson(body, route) : null;
      const plan =
        json === null
          ? forwardedAsIs(rest + query, body, 'unknown', 'chat')
          : forwardedAsIs(rest + query, body, bodyModel(json, route, false), rest === '/v1/messages/count_tokens' ? 'count_tokens' : 'chat', anthropicRequestUser(json));
      // Message Batches: reserved at submission, charged when their results are read (ADR 0913).
      return withDeferred(withStoredObjects(plan, stored), anthropicDeferred(method, rest, json), 'batch');
    },
    v1: {
      modelId,
      // Bedrock's models other than Claude are reached on the Bedrock route only (ADR 0914).
      serves: (entry) => !isConverseModel(entry),
      plan(call) {
        const model = modelId(call.requested, call.entry);
        const translated = chatToMessages(call, route, true);
        translated.body.model = model;
        return claudePlan(translated, { model, path: '/v1/messages' }, ANTHROPIC_CHAT_RESPONSE);
      },
      messages(call, operation) {
        const model = modelId(call.requested, call.entry);
        return nativePlan(model, operation === 'count_tokens' ? '/v1/messages/count_tokens' : '/v1/messages', { ...call.request, model });
      },
    },
  };
});
