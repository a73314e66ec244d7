// Fake OpenAI calls that bill nothing or are only minted here: the moderation API, the Responses API's input token
// count, and the Realtime API's client secrets (a key the caller then spends at OpenAI directly). Each checks its
// body as OpenAI does and answers in OpenAI's shape.

import { randomId, usageOf } from './llm-reply-content.ts';
import { writeJson } from './llm-reply-writer.ts';
import { sendBehaviourError, sendOpenAiError } from './llm-errors.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

/** The moderation models and the snapshot each answers as. */
const MODERATION_MODELS: Readonly<Record<string, string>> = {
  'omni-moderation-latest': 'omni-moderation-2024-09-26',
  'omni-moderation-2024-09-26': 'omni-moderation-2024-09-26',
  'text-moderation-latest': 'text-moderation-007',
  'text-moderation-stable': 'text-moderation-007',
};

const CATEGORIES = ['harassment', 'hate', 'illicit', 'self-harm', 'sexual', 'violence'];

/** The texts a moderation input holds: a string, strings, or multimodal parts; undefined when it is none of them. */
function moderationTexts(input: unknown): string[] | undefined {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  const texts: string[] = [];
  for (const item of input) {
    const part = jsonObject(item);
    if (typeof item === 'string') texts.push(item);
    else if (part?.type === 'text' && typeof part.text === 'string') texts.push(part.text);
    else if (part?.type !== 'image_url' || typeof jsonObject(part.image_url)?.url !== 'string') return undefined;
  }
  return texts;
}

/** POST /v1/moderations: `input` required, `model` optional (a moderation model), nothing else. A text that speaks of an attack is flagged. */
export function moderations(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendOpenAiError(x.res, 400, 'We could not parse the JSON body of your request.', { code: null });
  const extra = Object.keys(body).find((key) => key !== 'input' && key !== 'model');
  if (extra !== undefined) return sendOpenAiError(x.res, 400, `Unrecognized request argument supplied: ${extra}`, { param: extra, code: null });
  const texts = moderationTexts(body.input);
  if (texts === undefined) return sendOpenAiError(x.res, 400, "Invalid value for 'input'.", { param: 'input', code: 'invalid_value' });
  const model = body.model ?? 'omni-moderation-latest';
  const snapshot = typeof model === 'string' ? MODERATION_MODELS[model] : undefined;
  if (snapshot === undefined) return sendOpenAiError(x.res, 400, `The model \`${JSON.stringify(model)}\` is not a moderation model.`, { param: 'model', code: 'model_not_found' });
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  const results = texts.map((text) => {
    const flagged = /\battack\b/i.test(text);
    const categories = Object.fromEntries(CATEGORIES.map((name) => [name, flagged && name === 'violence']));
    const scores = Object.fromEntries(CATEGORIES.map((name) => [name, flagged && name === 'violence' ? 0.91 : 0.0001]));
    return { flagged, categories, category_scores: scores };
  });
  writeJson(x.res, 200, { id: randomId('modr-', 24), model: snapshot, results }, { 'x-request-id': randomId('req_', 32) });
}

/** POST /v1/responses/input_tokens: `input` or a conversation to count; the count is the behaviour's input tokens. */
export function inputTokens(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendOpenAiError(x.res, 400, 'We could not parse the JSON body of your request.', { code: null });
  if (body.input === undefined && body.conversation === undefined && body.previous_response_id === undefined) {
    return sendOpenAiError(x.res, 400, "Missing required parameter: 'input'.", { param: 'input', code: 'missing_required_parameter' });
  }
  for (const key of ['stream', 'max_output_tokens', 'store', 'background']) {
    if (body[key] !== undefined) return sendOpenAiError(x.res, 400, `Unknown parameter: '${key}'.`, { param: key, code: 'unknown_parameter' });
  }
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  writeJson(x.res, 200, { object: 'response.input_tokens', input_tokens: usageOf(x.behaviour).input }, { 'x-request-id': randomId('req_', 32) });
}

/** POST /v1/realtime/client_secrets: an ephemeral key for a realtime or transcription session. */
export function realtimeClientSecret(x: FakeExchange): void {
  const session = jsonObject(jsonObject(x.json)?.session);
  if (session === null || (session.type !== 'realtime' && session.type !== 'transcription')) {
    return sendOpenAiError(x.res, 400, "Invalid value for 'session.type': expected 'realtime' or 'transcription'.", { param: 'session.type', code: 'invalid_value' });
  }
  const expiresAt = Math.floor(Date.now() / 1000) + 600;
  writeJson(
    x.res,
    200,
    { value: randomId('ek_', 32), expires_at: expiresAt, session: { ...session, object: 'realtime.session', id: randomId('sess_', 24) } },
    { 'x-request-id': randomId('req_', 32) },
  );
}
