// Fake Gemini generateContent / streamGenerateContent on Vertex AI.

import { randomBytes } from 'node:crypto';
import { sendBehaviourError, sendGoogleError } from './llm-errors.ts';
import { mapLazy, replyContent, usageOf } from './llm-reply-content.ts';
import { sseEvent, writeJson, writeJsonWithText, writeStream } from './llm-reply-writer.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange, FakeUsage } from './llm-upstream.ts';

// Both spellings are accepted by the JSON mapping of Google's protos; anything else is an unknown field.
const knownFields = new Set(
  ['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'safetySettings', 'cachedContent', 'labels', 'model'].flatMap((f) => [
    f,
    f.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
  ]),
);

export async function handleGemini(x: FakeExchange, model: string, method: 'generateContent' | 'streamGenerateContent'): Promise<void> {
  const body = jsonObject(x.json);
  if (body === null) return sendGoogleError(x.res, 400, 'Invalid JSON payload received.');
  const unknown = Object.keys(body).find((k) => !knownFields.has(k));
  if (unknown !== undefined) {
    return sendGoogleError(x.res, 400, `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`);
  }
  if (!Array.isArray(body.contents) || body.contents.length === 0) {
    return sendGoogleError(x.res, 400, 'Unable to submit request because it must include at least one contents field.');
  }
  const badRole = body.contents.some((c) => {
    const role = jsonObject(c)?.role;
    return role !== undefined && role !== 'user' && role !== 'model';
  });
  if (badRole) return sendGoogleError(x.res, 400, 'Please use a valid role: user, model.');
  const problem = functionTurnProblem(body.contents) ?? generationConfigProblem(body.generationConfig ?? body.generation_config);
  if (problem !== undefined) return sendGoogleError(x.res, 400, problem);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'google');

  const content = replyContent(x.behaviour, 'Hello from the fake Gemini upstream.');
  const usage = usageOf(x.behaviour);
  const meta = { modelVersion: model, createTime: new Date().toISOString(), responseId: randomBytes(18).toString('base64url') };
  const call = content.toolCall;
  const response = (parts: unknown[], candidates: number, finished: boolean) => ({
    candidates: [{ content: { role: 'model', parts }, ...(finished ? { finishReason: 'STOP' } : {}) }],
    usageMetadata: usageMetadata(usage, candidates),
    ...meta,
  });
  const callParts = call ? [{ functionCall: { name: call.name, args: call.arguments } }] : [];
  // With includeThoughts, a thought summary comes first (its tokens are the thoughtsTokenCount).
  const thoughtParts = jsonObject(jsonObject(body.generationConfig)?.thinkingConfig)?.includeThoughts === true ? [{ text: THOUGHT_SUMMARY, thought: true }] : [];

  if (method === 'generateContent') {
    return writeJsonWithText(x.res, {}, content, (text) => response([...thoughtParts, ...(call ? callParts : [{ text }])], usage.output, true));
  }

  // Usage is cumulative: early chunks carry zero candidates, the last one the full count.
  const bodyCount = call ? 1 : content.count;
  const chunks = call
    ? [response([...thoughtParts, ...callParts], 0, false)]
    : mapLazy(indexed(content.pieces()), ([i, text]) => response(i === 0 ? [...thoughtParts, { text }] : [{ text }], Math.floor((usage.output * i) / bodyCount), false));
  const final = response([{ text: '' }], usage.output, true);
  const error = { error: { code: 503, message: 'The model is overloaded. Please try again later.', status: 'UNAVAILABLE' } };

  if (x.query.get('alt') === 'sse') {
    const sse = (data: unknown) => sseEvent(data, { crlf: true });
    return writeStream(
      x.res,
      {
        headers: { 'content-type': 'text/event-stream' },
        head: [],
        body: mapLazy(chunks, sse),
        bodyCount,
        tail: [sse(final)],
        garbage: Buffer.from('data: {"candidates": [{"content": {"role": "model", "parts": [{"te\r\n\r\n'),
        errorEvent: sse(error),
      },
      x.behaviour,
    );
  }
  // Without alt=sse: one JSON array, its elements written as they are produced.
  let first = true;
  const element = (data: unknown) => {
    const prefix = first ? '[' : ',\r\n';
    first = false;
    return Buffer.from(prefix + JSON.stringify(data, null, 2));
  };
  return writeStream(
    x.res,
    {
      headers: { 'content-type': 'application/json; charset=UTF-8' },
      head: [],
      body: mapLazy(chunks, element),
      bodyCount,
      tail: [Buffer.from(`,\r\n${JSON.stringify(final, null, 2)}\n]`)],
      garbage: Buffer.from(',\r\n{"candidates": [{"content": {"parts": [{"te'),
      errorEvent: Buffer.from(`,\r\n${JSON.stringify(error, null, 2)}\n]`),
    },
    x.behaviour,
  );
}

export const THOUGHT_SUMMARY = '**Answering directly**\n\nThe question needs no lookup.';

const GENERATION_FIELDS = new Set([
  'maxOutputTokens',
  'temperature',
  'topP',
  'topK',
  'candidateCount',
  'stopSequences',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  'thinkingConfig',
  'seed',
  'presencePenalty',
  'frequencyPenalty',
]);

/** Unknown generationConfig and thinkingConfig fields are refused, as the proto's JSON mapping does. */
function generationConfigProblem(config: unknown): string | undefined {
  const fields = jsonObject(config);
  if (fields === null) return undefined;
  const unknown = Object.keys(fields).find((k) => !GENERATION_FIELDS.has(k));
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}" at 'generation_config': Cannot find field.`;
  const thinking = jsonObject(fields.thinkingConfig) ?? {};
  const bad = Object.keys(thinking).find((k) => k !== 'thinkingBudget' && k !== 'includeThoughts');
  return bad === undefined ? undefined : `Invalid JSON payload received. Unknown name "${bad}" at 'generation_config.thinking_config': Cannot find field.`;
}

/** A function response turn answers the function call turn right before it, one response per call. */
function functionTurnProblem(contents: unknown[]): string | undefined {
  const parts = (content: unknown) => (Array.isArray(jsonObject(content)?.parts) ? (jsonObject(content)!.parts as unknown[]).map((p) => jsonObject(p) ?? {}) : []);
  for (let i = 0; i < contents.length; i++) {
    const responses = parts(contents[i]).filter((p) => p.functionResponse !== undefined);
    if (responses.length === 0) continue;
    const calls = i > 0 && jsonObject(contents[i - 1])?.role === 'model' ? parts(contents[i - 1]).filter((p) => p.functionCall !== undefined) : [];
    if (calls.length === 0) return 'Please ensure that function response turn comes immediately after a function call turn.';
    if (calls.length !== responses.length) {
      return 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.';
    }
    const names = calls.map((p) => jsonObject(p.functionCall)?.name);
    const stray = responses.find((p) => !names.includes(jsonObject(p.functionResponse)?.name));
    if (stray !== undefined) return `Function response ${String(jsonObject(stray.functionResponse)?.name)} answers no function call of the turn before it.`;
  }
  return undefined;
}

/** countTokens: the prompt's tokens (the behaviour's input and cache reads), as Vertex counts them. */
export function handleGeminiCountTokens(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null || !Array.isArray(body.contents) || body.contents.length === 0) {
    return sendGoogleError(x.res, 400, 'Unable to submit request because it must include at least one contents field.');
  }
  const unknown = Object.keys(body).find((k) => !['contents', 'systemInstruction', 'tools', 'generationConfig', 'model', 'instances'].includes(k));
  if (unknown !== undefined) return sendGoogleError(x.res, 400, `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`);
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'google');
  const u = usageOf(x.behaviour);
  writeJson(x.res, 200, {
    totalTokens: u.input + u.cacheRead,
    totalBillableCharacters: 4 * (u.input + u.cacheRead),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: u.input + u.cacheRead }],
  });
}

/** promptTokenCount includes cached tokens; thoughtsTokenCount is separate from candidatesTokenCount. */
export function usageMetadata(u: Required<FakeUsage>, candidates: number): Record<string, unknown> {
  const prompt = u.input + u.cacheRead;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: prompt + candidates + u.reasoning,
    ...(u.cacheRead ? { cachedContentTokenCount: u.cacheRead } : {}),
    ...(u.reasoning ? { thoughtsTokenCount: u.reasoning } : {}),
    trafficType: 'ON_DEMAND',
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
    candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: candidates }],
    ...(u.cacheRead ? { cacheTokensDetails: [{ modality: 'TEXT', tokenCount: u.cacheRead }] } : {}),
  };
}

function* indexed<T>(items: Iterable<T>): Iterable<[number, T]> {
  let i = 0;
  for (const item of items) yield [i++, item];
}
