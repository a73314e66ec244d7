import { request as httpRequest } from 'node:http';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { eventStreamCodec } from './llm-bedrock.ts';
import { expectedTokenUsage, startFakeUpstream } from './llm-upstream.ts';
import type { FakeUpstream } from './llm-upstream.ts';
import { waitFor } from '../support/wait-for.ts';

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
    .map((event) =>
      event
        .split(/\r?\n/)
        .find((line) => line.startsWith('data: '))
        ?.slice(6),
    )
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

describe('anthropic fake', () => {
  const messages = [{ role: 'user', content: 'hi' }];
  const headers = { 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' };

  it('checks x-api-key, anthropic-version and the body the way the API does', async () => {
    const up = await start('anthropic', { expectApiKey: 'sk-ant-test' });
    const url = `${up.url}/v1/messages`;
    const body = { model: 'claude-sonnet-4-20250514', max_tokens: 10, messages };
    const wrongKey = await post(url, body, { ...headers, 'x-api-key': 'nope' });
    expect(wrongKey.status).toBe(401);
    expect(JSON.parse(wrongKey.text)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const noVersion = await post(url, body, { 'x-api-key': 'sk-ant-test' });
    expect(noVersion.status).toBe(400);
    expect(JSON.parse(noVersion.text).error.message).toContain('anthropic-version');
    const noMax = await post(url, { model: 'claude-sonnet-4-20250514', messages }, headers);
    expect(JSON.parse(noMax.text).error.message).toBe('max_tokens: Field required');
    const systemRole = await post(url, { ...body, messages: [{ role: 'system', content: 'x' }, ...messages] }, headers);
    expect(JSON.parse(systemRole.text).error.message).toContain('messages.0.role');
    const vertexBody = await post(url, { ...body, anthropic_version: 'vertex-2023-10-16' }, headers);
    expect(JSON.parse(vertexBody.text).error.message).toBe('anthropic_version: Extra inputs are not permitted');
  });

  it('reports input_tokens without cache and the cache fields beside it', async () => {
    const up = await start('anthropic');
    up.behave({ usage: { input: 12, output: 30, cacheRead: 200, cacheWrite: 50, cacheWrite1h: 25, reasoning: 5 } });
    const r = await post(`${up.url}/v1/messages`, { model: 'claude-opus-4-1', max_tokens: 10, messages }, headers);
    expect(r.headers.get('request-id')).toMatch(/^req_/);
    expect(JSON.parse(r.text).usage).toMatchObject({
      input_tokens: 12,
      cache_read_input_tokens: 200,
      cache_creation_input_tokens: 75,
      cache_creation: { ephemeral_5m_input_tokens: 50, ephemeral_1h_input_tokens: 25 },
      output_tokens: 35,
    });
  });

  it('streams message_start … message_stop with cumulative message_delta usage', async () => {
    const up = await start('anthropic');
    up.behave({ usage: { input: 12, output: 30, cacheRead: 200 }, text: 'abc def ghi', chunkCount: 3 });
    const r = await post(`${up.url}/v1/messages`, { model: 'claude-haiku-4-5', max_tokens: 10, stream: true, messages }, headers);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const names = r.text
      .split('\n')
      .filter((l) => l.startsWith('event: '))
      .map((l) => l.slice(7));
    expect(names).toEqual([
      'message_start',
      'content_block_start',
      'ping',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const events = sseJson(r.text);
    expect(events[0].message.usage).toMatchObject({ input_tokens: 12, cache_read_input_tokens: 200, output_tokens: 1 });
    expect(events.find((e) => e.type === 'message_delta').usage).toMatchObject({ input_tokens: 12, cache_read_input_tokens: 200, output_tokens: 30 });
    expect(
      events
        .filter((e) => e.type === 'content_block_delta')
        .map((e) => e.delta.text)
        .join(''),
    ).toBe('abc def ghi');
  });

  it('streams a tool call as input_json_delta pieces', async () => {
    const up = await start('anthropic');
    up.behave({ toolCall: { name: 'lookup', arguments: { q: 'tollgate' } } });
    const r = await post(`${up.url}/v1/messages`, { model: 'claude-sonnet-4-5', max_tokens: 10, stream: true, messages }, headers);
    const events = sseJson(r.text);
    expect(events[1].content_block).toMatchObject({ type: 'tool_use', name: 'lookup' });
    const json = events
      .filter((e) => e.type === 'content_block_delta')
      .map((e) => e.delta.partial_json)
      .join('');
    expect(JSON.parse(json)).toEqual({ q: 'tollgate' });
    expect(events.find((e) => e.type === 'message_delta').delta.stop_reason).toBe('tool_use');
  });

  it('counts tokens', async () => {
    const up = await start('anthropic');
    up.behave({ usage: { input: 33, output: 0 } });
    const r = await post(`${up.url}/v1/messages/count_tokens`, { model: 'claude-sonnet-4-5', messages }, headers);
    expect(JSON.parse(r.text)).toEqual({ input_tokens: 33 });
  });
});

describe('bedrock fake', () => {
  const aws = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', sessionToken: 'session-token-1', region: 'eu-west-1' };
  const modelPath = `/model/${encodeURIComponent('anthropic.claude-sonnet-4-20250514-v1:0')}`;
  const claudeBody = { anthropic_version: 'bedrock-2023-05-31', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

  /** Signs like the AWS SDK does (path already percent-encoded, encoded again by the signer) and sends it. */
  async function signedCall(up: FakeUpstream, path: string, body: unknown, signer: { secretAccessKey?: string; uriEscapePath?: boolean; sessionToken?: string } = {}) {
    const { hostname, port } = new URL(up.url);
    const payload = JSON.stringify(body);
    const sigv4 = new SignatureV4({
      service: 'bedrock',
      region: aws.region,
      sha256: Sha256,
      uriEscapePath: signer.uriEscapePath ?? true,
      credentials: { accessKeyId: aws.accessKeyId, secretAccessKey: signer.secretAccessKey ?? aws.secretAccessKey, sessionToken: signer.sessionToken ?? aws.sessionToken },
    });
    const signed = await sigv4.sign({
      method: 'POST',
      protocol: 'http:',
      hostname,
      port: Number(port),
      path,
      query: {},
      headers: { host: `${hostname}:${port}`, 'content-type': 'application/json', accept: 'application/json' },
      body: payload,
    });
    return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const req = httpRequest({ host: hostname, port, method: 'POST', path, headers: signed.headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Cuts the body at each prelude's total length; the codec checks both CRCs of every frame. */
  function decodeFrames(bytes: Buffer) {
    const frames = [];
    for (let offset = 0; offset < bytes.length;) {
      const total = bytes.readUInt32BE(offset);
      frames.push(eventStreamCodec.decode(bytes.subarray(offset, offset + total)));
      offset += total;
    }
    return frames;
  }

  it('accepts a request signed with @smithy/signature-v4 and reports token counts in headers', async () => {
    const up = await start('bedrock', { aws });
    up.behave({ usage: { input: 15, output: 6, cacheRead: 4 } });
    const r = await signedCall(up, `${modelPath}/invoke`, claudeBody);
    expect(r.status).toBe(200);
    expect(r.headers['x-amzn-bedrock-input-token-count']).toBe('15');
    expect(r.headers['x-amzn-bedrock-output-token-count']).toBe('6');
    expect(r.headers['x-amzn-bedrock-invocation-latency']).toMatch(/^\d+$/);
    const message = JSON.parse(r.body.toString());
    expect(message).toMatchObject({ type: 'message', model: 'claude-sonnet-4-20250514', usage: { input_tokens: 15, cache_read_input_tokens: 4 } });
    expect(up.requests[0]?.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke');
  });

  it('answers 403 signature mismatch for a wrong secret and for a single-encoded canonical URI', async () => {
    const up = await start('bedrock', { aws });
    const wrongSecret = await signedCall(up, `${modelPath}/invoke`, claudeBody, { secretAccessKey: 'not-the-secret' });
    const singleEncoded = await signedCall(up, `${modelPath}/invoke`, claudeBody, { uriEscapePath: false });
    for (const r of [wrongSecret, singleEncoded]) {
      expect(r.status).toBe(403);
      expect(r.headers['x-amzn-errortype']).toMatch(/^InvalidSignatureException/);
      expect(JSON.parse(r.body.toString()).message).toMatch(/^The request signature we calculated does not match/);
    }
    expect(JSON.parse(singleEncoded.body.toString()).message).toContain('%253A0');
    const wrongToken = await signedCall(up, `${modelPath}/invoke`, claudeBody, { sessionToken: 'stale' });
    expect(wrongToken.status).toBe(403);
    expect(wrongToken.headers['x-amzn-errortype']).toMatch(/^UnrecognizedClientException/);
  });

  it('rejects model or stream in the body and a wrong anthropic_version', async () => {
    const up = await start('bedrock', { aws });
    for (const body of [
      { ...claudeBody, model: 'x' },
      { ...claudeBody, stream: true },
      { ...claudeBody, anthropic_version: '2023-06-01' },
    ]) {
      const r = await signedCall(up, `${modelPath}/invoke`, body);
      expect(r.status).toBe(400);
      expect(r.headers['x-amzn-errortype']).toMatch(/^ValidationException/);
    }
  });

  it('streams event-stream frames whose chunks decode to Anthropic events ending with invocation metrics', async () => {
    const up = await start('bedrock', { aws });
    up.behave({ usage: { input: 15, output: 6 }, text: 'streamed text', chunkCount: 2, splitFrames: true });
    const r = await signedCall(up, `${modelPath}/invoke-with-response-stream`, claudeBody);
    expect(r.headers['content-type']).toBe('application/vnd.amazon.eventstream');
    const frames = decodeFrames(r.body);
    expect(frames.every((f) => f.headers[':event-type']?.value === 'chunk' && f.headers[':message-type']?.value === 'event')).toBe(true);
    const events = frames.map((f) => JSON.parse(Buffer.from(JSON.parse(Buffer.from(f.body).toString()).bytes, 'base64').toString()));
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events.at(-1)['amazon-bedrock-invocationMetrics']).toMatchObject({ inputTokenCount: 15, outputTokenCount: 6 });
  });

  it('corrupts a frame CRC for malformedStream, which the decoder rejects', async () => {
    const up = await start('bedrock', { aws });
    up.behave({ malformedStream: true });
    const r = await signedCall(up, `${modelPath}/invoke-with-response-stream`, claudeBody);
    expect(() => decodeFrames(r.body)).toThrow(/checksum/i);
  });
});

describe('behaviours', () => {
  const headers = { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' };
  const body = { model: 'claude-sonnet-4-5', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

  it('replies with the requested status in the provider error shape, for forRequests requests only', async () => {
    const up = await start('anthropic');
    up.behave({ status: 529, forRequests: 1 });
    const overloaded = await post(`${up.url}/v1/messages`, body, headers);
    expect(overloaded.status).toBe(529);
    expect(JSON.parse(overloaded.text)).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
    expect((await post(`${up.url}/v1/messages`, body, headers)).status).toBe(200);
  });

  it('drain lets the answer being written finish, then refuses connections', async () => {
    const up = await start('anthropic');
    let release!: () => void;
    up.behave({ hold: new Promise<void>((resolve) => (release = resolve)) });
    const inFlight = post(`${up.url}/v1/messages`, body, headers);
    await waitFor('the held request to arrive', () => (up.requests.length === 1 ? true : undefined));
    let drained = false;
    const draining = up.drain().then(() => (drained = true));
    await expect(fetch(`${up.url}/v1/messages`, { method: 'POST' })).rejects.toThrow();
    expect(drained).toBe(false);
    release();
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    // Kept alive, the connection would carry the caller's next request to a server on its way out.
    expect(answered.headers.get('connection')).toBe('close');
    await draining;
    expect(up.requests).toHaveLength(1);
  });

  it('sends errorBody verbatim', async () => {
    const up = await start('openai');
    up.behave({ status: 503, errorBody: { custom: true } });
    const r = await post(`${up.url}/v1/chat/completions`, { model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }, { authorization: 'Bearer k' });
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text)).toEqual({ custom: true });
  });

  it('truncates a stream before its final events', async () => {
    const up = await start('openai');
    up.behave({ truncateStream: true, chunkCount: 6 });
    const r = await post(
      `${up.url}/v1/chat/completions`,
      { model: 'gpt-4o', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'x' }] },
      { authorization: 'Bearer k' },
    );
    const data = sseData(r.text);
    expect(data).not.toContain('[DONE]');
    expect(sseJson(r.text).some((c) => c.usage)).toBe(false);
    expect(data.length).toBe(1 + 3);
  });

  it('aborts the connection mid-stream and drops it before any response', async () => {
    const up = await start('anthropic');
    up.behave({ abortStream: true });
    await expect(post(`${up.url}/v1/messages`, { ...body, stream: true }, headers)).rejects.toThrow();
    up.behave({ destroySocket: true });
    await expect(post(`${up.url}/v1/messages`, body, headers)).rejects.toThrow();
    expect(up.requests).toHaveLength(2);
  });

  it('inserts a garbage event and an in-stream error', async () => {
    const up = await start('anthropic');
    up.behave({ malformedStream: true, streamError: true, chunkCount: 4 });
    const r = await post(`${up.url}/v1/messages`, { ...body, stream: true }, headers);
    const data = sseData(r.text);
    expect(() => data.map((d) => JSON.parse(d))).toThrow(SyntaxError);
    expect(JSON.parse(data.at(-1) ?? '')).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
  });

  it('streams a big body of the requested size, whole or as events', async () => {
    const up = await start('openai');
    up.behave({ bigBodyBytes: 1_000_000 });
    const request = { model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] };
    const stream = await post(`${up.url}/v1/chat/completions`, { ...request, stream: true }, { authorization: 'Bearer k' });
    const text = sseJson(stream.text)
      .map((c) => c.choices[0]?.delta.content ?? '')
      .join('');
    expect(text.length).toBe(1_000_000);
    const whole = await post(`${up.url}/v1/chat/completions`, request, { authorization: 'Bearer k' });
    expect(JSON.parse(whole.text).choices[0].message.content.length).toBe(1_000_000);
  });

  it('keeps the same events when frames are split into tiny writes', async () => {
    const up = await start('vertex');
    const url = `${up.url}/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse`;
    const call = () => post(url, { contents: [{ role: 'user', parts: [{ text: 'x' }] }] }, { authorization: 'Bearer t' });
    up.behave({ text: 'same text either way', chunkCount: 5 });
    const whole = sseJson((await call()).text).map((c) => c.candidates[0].content.parts[0].text);
    up.behave({ text: 'same text either way', chunkCount: 5, splitFrames: true });
    const split = sseJson((await call()).text).map((c) => c.candidates[0].content.parts[0].text);
    expect(split).toEqual(whole);
  });
});

describe('expectedTokenUsage', () => {
  it('normalises to input including cache and output including reasoning, per format', () => {
    const u = { input: 10, output: 20, cacheRead: 3, cacheWrite: 4, cacheWrite1h: 5, reasoning: 6 };
    expect(expectedTokenUsage(u, 'anthropic')).toEqual({
      inputTokens: 22,
      outputTokens: 26,
      cacheReadTokens: 3,
      cacheWriteTokens: 9,
      cacheWrite1hTokens: 5,
      reasoningTokens: 6,
      totalTokens: 48,
    });
    expect(expectedTokenUsage(u, 'gemini')).toMatchObject({ inputTokens: 13, cacheWriteTokens: 0, outputTokens: 26 });
  });
});
