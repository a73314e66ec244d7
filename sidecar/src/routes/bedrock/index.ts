// Format bedrock (route gamma-cloudb): Claude on AWS Bedrock (InvokeModel), and on /v1 its other models (Converse), SigV4-signed. The body is read whole only to be
// signed; the model is in the path, which is sent percent-encoded the way AWS SDKs send it. /v1/embeddings reaches
// Bedrock's Titan and Cohere embedding models through InvokeModel too, /v1/images/generations its Nova Canvas and
// Titan Image Generator (ADR 0915), and /v1/messages/count_tokens its CountTokens.

import { bedrockEndpoint } from '../endpoint-kinds.ts';
import type { PriceEntry } from '../../../../contracts/price-entry.ts';
import { BEDROCK_SIGNED_PATH, encodeAwsPath } from '../../auth/aws-sigv4.ts';
import { ProxyError } from '../../errors.ts';
import { BEDROCK_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { chatToMessages, claudePlan } from '../claude-chat.ts';
import { claudeModelId, isBedrockClaudeId, type ClaudeIdForm } from '../claude-model-ids.ts';
import { isConverseModel, unmeteredInvoke } from '../bedrock-model-ids.ts';
import { conversePlan, converseModelId } from './converse.ts';
import { BEDROCK_ERRORS } from '../error-shape.ts';
import { forwardedAsIs } from '../native-request.ts';
import { BedrockMessagesStream } from '../../translate/bedrock-messages.ts';
import { notAnEmbeddingModel, readEmbeddingsRequest } from '../../translate/openai-embeddings.ts';
import { bedrockEmbedder } from '../../translate/openai-bedrock-embeddings.ts';
import { bedrockImageRequest, bedrockImageUnits } from '../../translate/openai-bedrock-images.ts';
import { imagesReservation } from '../../translate/provider-images.ts';
import { defineFormat, nativePlan, type V1RoutePlan } from '../route-module.ts';

export const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31';

/** Bedrock ids: anthropic.claude-…-v1:0, a region prefix (us.anthropic.…) or an inference profile ARN. */
const ID_FORM: ClaudeIdForm = { fits: isBedrockClaudeId, canonicalIsApiId: true, described: "a Bedrock id ('anthropic.…' or a region prefix)" };

/** InvokeModelWithResponseStream answers in AWS's event stream, each event's payload JSON. */
const STREAM_ACCEPT: Readonly<Record<string, string>> = { accept: 'application/vnd.amazon.eventstream', 'x-amzn-bedrock-accept': 'application/json' };

export const bedrock = defineFormat('bedrock', (route) => {
  const modelId = (requested: string, entry: PriceEntry): string =>
    isConverseModel(entry) ? converseModelId(route, requested, entry) : claudeModelId(route, ID_FORM, requested, entry);
  return {
    body: 'read',
    endpoint: bedrockEndpoint,
    errors: BEDROCK_ERRORS,
    planNative({ rest, query, body }) {
      const path = encodeAwsPath(rest);
      const match = BEDROCK_SIGNED_PATH.exec(path);
      // Anything else would be forwarded unmetered under the proxy's AWS identity (Bedrock's other runtime APIs).
      if (!match)
        throw new ProxyError(
          'unmetered_endpoint',
          `${path} is not a Bedrock model invocation (/model/<id>/invoke, invoke-with-response-stream, converse or converse-stream) or token count (count-tokens): this route meters and signs only those`,
        );
      const model = decodeURIComponent(path.split('/')[2]!);
      // An image model's answer has no usage: its images are counted as they pass, at the request's size and quality (ADR 0915).
      const units = match[1] === 'invoke' ? bedrockImageUnits(model, body) : undefined;
      const plan = forwardedAsIs(path + query, body, model, units !== undefined ? 'image_generation' : match[1] === 'count-tokens' ? 'count_tokens' : 'chat');
      if (units !== undefined) {
        plan.units = units;
        plan.reservation = imagesReservation(units);
      }
      // Refused unless the route allows unmetered calls: such an answer would be recorded unpriced.
      const unmetered = match[1] === 'count-tokens' ? undefined : unmeteredInvoke(model);
      if (unmetered !== undefined) plan.unmeteredBecause = unmetered;
      return plan;
    },
    v1: {
      modelId,
      plan(call) {
        const model = modelId(call.requested, call.entry);
        // Claude speaks Anthropic's format through InvokeModel; every other vendor's model, Converse (ADR 0914).
        if (isConverseModel(call.entry)) return conversePlan(call, route, model);
        const translated = chatToMessages(call, route, false);
        // The path decides streaming; `model` and `stream` in the body are refused.
        delete translated.body.stream;
        translated.body.anthropic_version = BEDROCK_ANTHROPIC_VERSION;
        const path = encodeAwsPath(`/model/${encodeURIComponent(model)}/${translated.stream ? 'invoke-with-response-stream' : 'invoke'}`);
        const headers: Record<string, string> = translated.stream ? STREAM_ACCEPT : {};
        return claudePlan(translated, { model, path, headers }, BEDROCK_CHAT_RESPONSE);
      },
      messages(call, operation) {
        // Not Claude: no Messages API upstream; the gateway goes through the chat pivot, and Converse.
        if (isConverseModel(call.entry)) return undefined;
        if (operation === 'count_tokens') return countTokensPlan(modelId(call.requested, call.entry), call.request);
        const model = modelId(call.requested, call.entry);
        const body: Record<string, unknown> = { ...call.request };
        const stream = body.stream === true;
        delete body.model;
        delete body.stream;
        if (body.anthropic_version === undefined) body.anthropic_version = BEDROCK_ANTHROPIC_VERSION;
        // Bedrock reads betas from the body, not the anthropic-beta header.
        if (call.betas !== undefined && call.betas.length > 0)
          body.anthropic_beta = [...(Array.isArray(body.anthropic_beta) ? (body.anthropic_beta as unknown[]) : []), ...call.betas];
        const path = encodeAwsPath(`/model/${encodeURIComponent(model)}/${stream ? 'invoke-with-response-stream' : 'invoke'}`);
        const plan = nativePlan(model, path, body, stream ? STREAM_ACCEPT : {});
        if (stream) plan.reframe = (route) => new BedrockMessagesStream(route);
        return plan;
      },
      embeddings(call) {
        // The entry's id when the caller sent another form of it: the Bedrock id is the entry's own.
        const model = [call.requested, call.entry.model, ...(call.entry.aliases ?? [])].find((id) => bedrockEmbedder(id) !== undefined);
        const embedder = model === undefined ? undefined : bedrockEmbedder(model);
        if (model === undefined || embedder === undefined) {
          throw notAnEmbeddingModel(
            call.requested,
            route,
            'Titan Text Embeddings (amazon.titan-embed-text-v2:0, -v1) and Cohere Embed v3 (cohere.embed-english-v3, -multilingual-v3)',
          );
        }
        const request = readEmbeddingsRequest(call.request, model);
        const path = encodeAwsPath(`/model/${encodeURIComponent(model)}/invoke`);
        return { ...nativePlan(model, path, embedder.body(model, request)), embeddings: { read: embedder.read, encoding: request.encoding } };
      },
      imageGeneration(call) {
        // The entry's own id when the caller sent another form of it.
        const model = modelId(call.requested, call.entry);
        const facts = bedrockImageRequest(call.request, model, route);
        return {
          ...nativePlan(model, encodeAwsPath(`/model/${encodeURIComponent(model)}/invoke`), facts.body),
          units: facts.units,
          reservation: facts.reservation,
          readImages: facts.read,
        };
      },
    },
  };
});

/**
 * A Messages token count as Bedrock's CountTokens (ADR 0912): the InvokeModel body the same Messages request would
 * be, base64 in `input.invokeModel.body`; the answer's `inputTokens` becomes `input_tokens`. CountTokens takes a
 * foundation-model id, not a cross-region inference profile, so a geography prefix (`us.`, `eu.`, …) is dropped.
 */
function countTokensPlan(model: string, request: Record<string, unknown>): V1RoutePlan {
  const foundation = model.replace(/^[a-z]{2,4}\.(?=anthropic\.)/, '');
  const body: Record<string, unknown> = { ...request, anthropic_version: request.anthropic_version ?? BEDROCK_ANTHROPIC_VERSION };
  delete body.model;
  delete body.stream;
  // InvokeModel requires max_tokens, which a count does not send; it does not change the input's count. With
  // thinking, Claude wants it above the thinking budget.
  if (body.max_tokens === undefined) body.max_tokens = thinkingBudget(request) + 1;
  const path = encodeAwsPath(`/model/${encodeURIComponent(foundation)}/count-tokens`);
  const plan = nativePlan(foundation, path, { input: { invokeModel: { body: Buffer.from(JSON.stringify(body)).toString('base64') } } });
  plan.tokenCountField = 'inputTokens';
  return plan;
}

function thinkingBudget(request: Record<string, unknown>): number {
  const thinking = request.thinking;
  const budget = typeof thinking === 'object' && thinking !== null ? (thinking as { budget_tokens?: unknown }).budget_tokens : undefined;
  return typeof budget === 'number' && Number.isSafeInteger(budget) && budget > 0 ? budget : 0;
}
