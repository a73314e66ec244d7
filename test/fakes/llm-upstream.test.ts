import { request as httpRequest } from 'node:http';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { eventStreamCodec } from './llm-bedrock.ts';
import { expectedTokenUsage, startFakeUpstream } from './llm-upstream.ts';
import type { FakeUpstream } from './llm-upstream.ts';

const started: FakeUpstream[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((up) => up.close()));
});

async function start(...args: Parameters<typeof startFakeUpstream>): Promise<FakeUpstream> {
  const up = await startFakeUpstream(...args);
  started.push(up);
  return up;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** data payloads of an SSE body (LF or CRLF framing). */
function sseData(text: string): string[] {
  return text
    .split(/\r?\n\r?\n/)
    .map((event) => event.split(/\r?\n/).find((line) => line.startsWith('data: '))?.slice(6))
    .filter((data): data is string => data !== undefined);
}

function sseJson(text: string): any[] {
  return sseData(text)
    .filter((d) => d !== '[DONE]')
    .map((d) => JSON.parse(d));
}

const usage = { input: 100, output: 40, cacheRead: 30, reasoning: 10 };

describe('openai fake', () => {
  it('answers the official SDK with text, a dated model and usage in OpenAI fields', async () => {
    const up = await start('openai', { expectApiKey: 'sk-test-1234567890' });
    up.behave({ usage, text: 'Four.' });
    const client = new OpenAI({ apiKey: 'sk-test-1234567890', baseURL: `${up.url}/v1` });
    const reply = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: '2+2?' }] });
    expect(reply.choices[0]?.message.content).toBe('Four.');
    expect(reply.model).toBe('gpt-4o-mini-2024-07-18');
    expect(reply.id).toMatch(/^chatcmpl-/);
    expect(reply.usage).toMatchObject({
      prompt_tokens: 130,
      completion_tokens: 50,
      total_tokens: 180,
      prompt_tokens_details: { cached_tokens: 30 },
      completion_tokens_details: { reasoning_tokens: 10 },
    });
    expect(up.requests[0]?.headers.authorization).toBe('Bearer sk-test-1234567890');
    expect(up.requests[0]?.json).toMatchObject({ model: 'gpt-4o-mini' });
  });

  it('streams usage only when stream_options.include_usage is set, as a last chunk with no choices', async () => {
    const up = await start('openai', { expectApiKey: 'k' });
    up.behave({ usage, text: 'Hello streaming world', chunkCount: 3 });
    const client = new OpenAI({ apiKey: 'k', baseURL: `${up.url}/v1` });
    const chunks = [];
    const stream = await client.chat.completions.create({
      model: 'gpt-4.1',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toMatchObject({ prompt_tokens: 130, completion_tokens: 50 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello streaming world');

    const plain = await post(`${up.url}/v1/chat/completions`, { model: 'gpt-4.1', stream: true, messages: [{ role: 'user', content: 'hi' }] }, { authorization: 'Bearer k' });
    const events = sseJson(plain.text);
    expect(sseData(plain.text).at(-1)).toBe('[DONE]');
    expect(events.some((e) => 'usage' in e)).toBe(false);
  });

  it('rejects a wrong key with OpenAI 401 and a missing model with 400', async () => {
    const up = await start('openai', { expectApiKey: 'right-key-000' });
    const client = new OpenAI({ apiKey: 'wrong-key-999', baseURL: `${up.url}/v1`, maxRetries: 0 });
    const err = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
    const noModel = await post(`${up.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] }, { authorization: 'Bearer right-key-000' });
    expect(noModel.status).toBe(400);
    expect(JSON.parse(noModel.text).error.type).toBe('invalid_request_error');
    expect(up.requests).toHaveLength(2);
  });

  it('replies with a tool call in OpenAI shape, whole and streamed', async () => {
    const up = await start('openai');
    up.behave({ toolCall: { name: 'get_weather', arguments: { city: 'Oslo', unit: 'c' } } });
    const client = new OpenAI({ apiKey: 'any', baseURL: `${up.url}/v1` });
    const reply = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'weather?' }] });
    const call = reply.choices[0]?.message.tool_calls?.[0];
    expect(reply.choices[0]?.finish_reason).toBe('tool_calls');
    expect(call?.type === 'function' && call.function.name).toBe('get_weather');
    expect(call?.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ city: 'Oslo', unit: 'c' });

    const stream = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'weather?' }], stream: true });
    let args = '';
    for await (const chunk of stream) args += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? '';
    expect(JSON.parse(args)).toEqual({ city: 'Oslo', unit: 'c' });
  });

  it('lists models', async () => {
    const up = await start('openai');
    const client = new OpenAI({ apiKey: 'any', baseURL: `${up.url}/v1` });
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toContain('gpt-4o-mini');
  });
});

describe('vertex fake', () => {
  const project = '/v1/projects/demo/locations/us-central1';
  const gemini = `${project}/publishers/google/models/gemini-2.5-flash`;
  const auth = { authorization: 'Bearer ya29.token' };
  const contents = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };

  it('requires the expected bearer token and answers Google 401 otherwise', async () => {
    const up = await start('vertex', { expectBearer: 'ya29.token' });
    const missing = await post(`${up.url}${gemini}:generateContent`, contents);
    const wrong = await post(`${up.url}${gemini}:generateContent`, contents, { authorization: 'Bearer other' });
    for (const r of [missing, wrong]) {
      expect(r.status).toBe(401);
      expect(JSON.parse(r.text).error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    }
    expect((await post(`${up.url}${gemini}:generateContent`, contents, auth)).status).toBe(200);
  });

  it('reports Gemini usage with the prompt including cache and thoughts beside candidates', async () => {
    const up = await start('vertex', { expectBearer: 'ya29.token' });
    up.behave({ usage, text: 'Hi there' });
    const r = await post(`${up.url}${gemini}:generateContent`, contents, auth);
    const body = JSON.parse(r.text);
    expect(body.candidates[0].content.parts[0].text).toBe('Hi there');
    expect(body.candidates[0].finishReason).toBe('STOP');
    expect(body.modelVersion).toBe('gemini-2.5-flash');
    expect(body.usageMetadata).toMatchObject({
      promptTokenCount: 130,
      cachedContentTokenCount: 30,
      candidatesTokenCount: 40,
      thoughtsTokenCount: 10,
      totalTokenCount: 180,
    });
  });

  it('rejects a chat-completions body sent to generateContent', async () => {
    const up = await start('vertex');
    const r = await post(`${up.url}${gemini}:generateContent`, { messages: [{ role: 'user', content: 'hi' }] }, auth);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.message).toContain('Unknown name "messages"');
  });

  it('streams SSE with cumulative usage that starts at zero candidates', async () => {
    const up = await start('vertex');
    up.behave({ usage, text: 'one two three four', chunkCount: 4 });
    const r = await post(`${up.url}${gemini}:streamGenerateContent?alt=sse`, contents, auth);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    expect(r.text).toContain('\r\n\r\n');
    const chunks = sseJson(r.text);
    expect(chunks).toHaveLength(5);
    expect(chunks[0].usageMetadata.candidatesTokenCount).toBe(0);
    expect(chunks.at(-1).usageMetadata).toMatchObject({ promptTokenCount: 130, candidatesTokenCount: 40, thoughtsTokenCount: 10 });
    expect(chunks.at(-1).candidates[0].finishReason).toBe('STOP');
    expect(chunks.map((c) => c.candidates[0].content.parts[0].text).join('')).toBe('one two three four');
  });

  it('streams a JSON array without alt=sse', async () => {
    const up = await start('vertex');
    up.behave({ chunkCount: 3 });
    const r = await post(`${up.url}${gemini}:streamGenerateContent`, contents, auth);
    const chunks = JSON.parse(r.text);
    expect(Array.isArray(chunks)).toBe(true);
    expect(chunks).toHaveLength(4);
    expect(chunks.at(-1).usageMetadata).toMatchObject({ promptTokenCount: 21, candidatesTokenCount: 9 });
  });

  it('serves the OpenAI-compatible surface to the official SDK with the bearer as API key', async () => {
    const up = await start('vertex', { expectBearer: 'ya29.token' });
    const client = new OpenAI({ apiKey: 'ya29.token', baseURL: `${up.url}${project}/endpoints/openapi` });
    const reply = await client.chat.completions.create({ model: 'google/gemini-2.5-flash', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.model).toBe('google/gemini-2.5-flash');
    expect(reply.usage?.prompt_tokens).toBe(21);
    const bare = await post(`${up.url}${project}/endpoints/openapi/chat/completions`, { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'hi' }] }, auth);
    expect(bare.status).toBe(400);
    expect(JSON.parse(bare.text).error.status).toBe('INVALID_ARGUMENT');
  });

  describe('Claude', () => {
    const claude = `${project}/publishers/anthropic/models/claude-sonnet-4@20250514`;
    const messages = [{ role: 'user', content: 'hi' }];

    it('requires anthropic_version and refuses model in the body', async () => {
      const up = await start('vertex');
      const withModel = await post(`${up.url}${claude}:rawPredict`, { model: 'claude-sonnet-4', anthropic_version: 'vertex-2023-10-16', max_tokens: 5, messages }, auth);
      expect(withModel.status).toBe(400);
      expect(JSON.parse(withModel.text).error).toMatchObject({ type: 'invalid_request_error', message: 'model: Extra inputs are not permitted' });
      const noVersion = await post(`${up.url}${claude}:rawPredict`, { max_tokens: 5, messages }, auth);
      expect(JSON.parse(noVersion.text).error.message).toBe('anthropic_version: Field required');
      const ok = await post(`${up.url}${claude}:rawPredict`, { anthropic_version: 'vertex-2023-10-16', max_tokens: 5, messages }, auth);
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.text)).toMatchObject({ type: 'message', model: 'claude-sonnet-4-20250514', stop_reason: 'end_turn' });
    });

    it('streams Anthropic events from streamRawPredict and counts tokens', async () => {
      const up = await start('vertex');
      up.behave({ usage: { input: 50, output: 20, cacheWrite: 7 } });
      const r = await post(`${up.url}${claude}:streamRawPredict`, { anthropic_version: 'vertex-2023-10-16', max_tokens: 5, stream: true, messages }, auth);
      const types = sseJson(r.text).map((e) => e.type);
      expect(types[0]).toBe('message_start');
      expect(types.at(-1)).toBe('message_stop');
      expect(types).toContain('ping');
      const count = await post(`${up.url}${project}/publishers/anthropic/models/count-tokens:rawPredict`, { model: 'claude-sonnet-4@20250514', messages }, auth);
      expect(JSON.parse(count.text)).toEqual({ input_tokens: 57 });
    });
  });
});
