// Bedrock's models other than Claude on /v1 (ADR 0914): the chat request translated to Converse and sent as
// POST /model/<id>/converse, or /converse-stream for a stream (the path decides streaming, as for InvokeModel);
// the body names no model. Signed with SigV4 like every call of the route.

import type { PriceEntry } from '../../../../contracts/price-entry.ts';
import { encodeAwsPath } from '../../auth/aws-sigv4.ts';
import { CONVERSE_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { toConverseRequest } from '../../translate/openai-converse.ts';
import { isBedrockModelId } from '../bedrock-model-ids.ts';
import { claudeModelId, type ClaudeIdForm } from '../claude-model-ids.ts';
import type { V1Call, V1RoutePlan } from '../route-module.ts';

/** Converse's ids: `<vendor>.<model>` (amazon.nova-pro-v1:0), a geography first for an inference profile, or an ARN. */
const CONVERSE_ID_FORM: ClaudeIdForm = {
  fits: isBedrockModelId,
  canonicalIsApiId: true,
  described: "a Bedrock id ('<vendor>.<model>', e.g. amazon.nova-pro-v1:0, or with a region prefix)",
};

/** The model's Bedrock id: the caller's when it is one, else the first of its price entry's ids that is. */
export function converseModelId(route: string, requested: string, entry: PriceEntry): string {
  return claudeModelId(route, CONVERSE_ID_FORM, requested, entry);
}

export function conversePlan(call: V1Call, route: string, model: string): V1RoutePlan {
  const translated = toConverseRequest(call.request, { route, extensions: call.extensions });
  const path = encodeAwsPath(`/model/${encodeURIComponent(model)}/${translated.stream ? 'converse-stream' : 'converse'}`);
  return {
    model,
    path,
    body: Buffer.from(JSON.stringify(translated.body)),
    headers: { accept: translated.stream ? 'application/vnd.amazon.eventstream' : 'application/json' },
    response: CONVERSE_CHAT_RESPONSE,
    includeUsage: translated.includeUsage,
    jsonMode: false,
    stripInjectedUsage: false,
  };
}
