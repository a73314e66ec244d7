// Bedrock's models other than Claude on /v1 (ADR 0914), as their users meet them: the official `openai` SDK's
// chat.completions.create, streamed and not, on Amazon Nova ids, against a real `tollgate proxy` whose gamma-cloudb
// route reaches the fake Bedrock (which checks the SigV4 signature and the Converse body it receives). Claude stays
// on the Anthropic API (the default gateway config): the Nova calls go to gamma-cloudb all the same. Each call's
// span is read back, its tokens and cost checked against costs worked out by hand from the built-in prices:
// Nova Pro 0.80 / 3.20 USD per million input / output tokens, Nova Lite 0.06 / 0.24 (cache reads 0.015).

import OpenAI, { BadRequestError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let openai: OpenAI;

beforeAll(async () => {
  bed = await startUpstreamBed();
  // Llama is not built in: priced by an override under provider anthropic, as docs/openai-gateway.md shows.
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`pricing:
  models:
    - { provider: anthropic, model: meta.llama3-3-70b-instruct-v1:0, input_per_million: 0.72, output_per_million: 0.72 }
`),
    env: bed.env,
  });
  openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'alice' } });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

function spanOf(headers: Headers): Promise<SpanJson> {
  const spanId = headers.get('x-proxy-span-id');
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId: spanId! });
}

const lastRequest = () => bed.bedrock.requests.at(-1)!;

describe('chat completions on Amazon Nova through Converse', () => {
  it('a completion: the Converse body Bedrock receives, signed; the answer and its usage; 0.00192 USD on the span', async () => {
    bed.bedrock.behave({ usage: { input: 1200, output: 300 } });
    const { data, response } = await openai.chat.completions
      .create({
        model: 'amazon.nova-pro-v1:0',
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'Say hello.' },
        ],
        max_completion_tokens: 200,
        temperature: 0.3,
      })
      .withResponse();
    expect(data.choices[0]).toMatchObject({ message: { role: 'assistant', content: 'Hello from the fake Converse upstream.' }, finish_reason: 'stop' });
    // Converse's usage as OpenAI's: no cache here, so prompt = input.
    expect(data.usage).toMatchObject({ prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500 });
    expect(data.model).toBe('amazon.nova-pro-v1:0');

    const seen = lastRequest();
    expect(seen.path).toBe('/model/amazon.nova-pro-v1%3A0/converse');
    expect(seen.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    expect(seen.json).toEqual({
      system: [{ text: 'You are terse.' }],
      messages: [{ role: 'user', content: [{ text: 'Say hello.' }] }],
      inferenceConfig: { maxTokens: 200, temperature: 0.3 },
    });

    // 1200 × 0.80 / 10⁶ + 300 × 3.20 / 10⁶ = 0.00096 + 0.00096 = 0.00192 USD.
    const span = await spanOf(response.headers);
    expect(span).toMatchObject({
      route: 'gamma-cloudb',
      provider: 'anthropic',
      model: 'amazon.nova-pro-v1:0',
      user_id: 'alice',
      status: 'ok',
      input_tokens: 1200,
      output_tokens: 300,
      priced: true,
    });
    expect(span.cost_usd).toBeCloseTo(0.00192, 12);
  });

  it('a stream with include_usage, on an inference profile id: the text in pieces, the usage chunk, cache reads priced apart', async () => {
    bed.bedrock.behave({ usage: { input: 2000, output: 500, cacheRead: 1000 }, text: 'Bonjour, le monde entier.', chunkCount: 3 });
    const { data: stream, response } = await openai.chat.completions
      .create({ model: 'us.amazon.nova-lite-v1:0', messages: [{ role: 'user', content: 'Say hello.' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Bonjour, le monde entier.');
    expect(chunks.filter((c) => (c.choices[0]?.delta.content ?? '') !== '')).toHaveLength(3);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe('stop');
    // Converse's inputTokens (2000) leaves the 1000 cache reads out; OpenAI's prompt_tokens counts them.
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 3000, completion_tokens: 500, total_tokens: 3500, prompt_tokens_details: { cached_tokens: 1000 } });
    expect(lastRequest().path).toBe('/model/us.amazon.nova-lite-v1%3A0/converse-stream');

    // 2000 × 0.06 + 1000 × 0.015 + 500 × 0.24 per million = 0.00012 + 0.000015 + 0.00012 = 0.000255 USD.
    const span = await spanOf(response.headers);
    expect(span).toMatchObject({ route: 'gamma-cloudb', model: 'us.amazon.nova-lite-v1:0', status: 'ok', input_tokens: 3000, cached_tokens: 1000, output_tokens: 500 });
    expect(span.cost_usd).toBeCloseTo(0.000255, 12);
  });

  it('a streamed tool call: the SDK reassembles its id, name and arguments; the tools reach Bedrock as toolConfig', async () => {
    bed.bedrock.behave({ usage: { input: 300, output: 40 }, toolCall: { name: 'lookup_quarter', arguments: { quarter: 'Q3', year: 2026 } } });
    const stream = openai.chat.completions.stream({
      model: 'amazon.nova-pro-v1:0',
      messages: [{ role: 'user', content: 'Q3 revenue?' }],
      tools: [{ type: 'function', function: { name: 'lookup_quarter', parameters: { type: 'object', properties: { quarter: { type: 'string' }, year: { type: 'integer' } } } } }],
      tool_choice: 'required',
    });
    const completion = await stream.finalChatCompletion();
    const call = completion.choices[0]!.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function).toEqual({ name: 'lookup_quarter', arguments: '{"quarter":"Q3","year":2026}' });
    expect(call.id).toMatch(/^tooluse_/);
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect((lastRequest().json as { toolConfig: unknown }).toolConfig).toEqual({
      tools: [{ toolSpec: { name: 'lookup_quarter', inputSchema: { json: { type: 'object', properties: { quarter: { type: 'string' }, year: { type: 'integer' } } } } } }],
      toolChoice: { any: {} },
    });
  });

  it('a parameter Converse cannot take is a 400 naming it, nothing reaches Bedrock, and the span is rejected on gamma-cloudb', async () => {
    const refused = await openai.chat.completions.create({ model: 'amazon.nova-pro-v1:0', messages: [{ role: 'user', content: 'Hi' }], seed: 7 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(BadRequestError);
    expect((refused as BadRequestError).param).toBe('seed');
    expect(bed.bedrock.requests).toHaveLength(0);
    const span = await spanOf((refused as BadRequestError).headers);
    expect(span).toMatchObject({ route: 'gamma-cloudb', model: 'amazon.nova-pro-v1:0', status: 'rejected', cost_usd: 0 });
  });
});

describe('other vendors, and Claude beside them', () => {
  it('a Llama model priced by an override goes through Converse too: 1250 tokens × 0.72 USD per million = 0.0009 USD', async () => {
    bed.bedrock.behave({ usage: { input: 1000, output: 250 } });
    const { data, response } = await openai.chat.completions
      .create({ model: 'us.meta.llama3-3-70b-instruct-v1:0', messages: [{ role: 'user', content: 'Say hello.' }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toBe('Hello from the fake Converse upstream.');
    expect(lastRequest().path).toBe('/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse');
    const span = await spanOf(response.headers);
    expect(span).toMatchObject({ route: 'gamma-cloudb', model: 'us.meta.llama3-3-70b-instruct-v1:0', input_tokens: 1000, output_tokens: 250, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.0009, 12);
  });

  it('Claude stays on the Anthropic API, the route the gateway config picks for it', async () => {
    const { response } = await openai.chat.completions.create({ model: 'claude-sonnet-4', messages: [{ role: 'user', content: 'Say hello.' }] }).withResponse();
    expect(bed.anthropic.requests).toHaveLength(1);
    expect(bed.bedrock.requests).toHaveLength(0);
    expect((await spanOf(response.headers)).route).toBe('gamma-direct');
  });
});

describe('the Responses and Messages APIs on Nova, through the chat pivot', () => {
  it('responses.create answers from Converse', async () => {
    bed.bedrock.behave({ usage: { input: 100, output: 20 } });
    const { data, response } = await openai.responses.create({ model: 'amazon.nova-micro-v1:0', input: 'Say hello.', store: false }).withResponse();
    expect(data.output_text).toBe('Hello from the fake Converse upstream.');
    expect(lastRequest().path).toBe('/model/amazon.nova-micro-v1%3A0/converse');
    // 100 × 0.035 + 20 × 0.14 per million = 0.0000035 + 0.0000028 = 0.0000063 USD.
    expect((await spanOf(response.headers)).cost_usd).toBeCloseTo(0.0000063, 12);
  });

  it('a Messages call is translated, not passed to InvokeModel in Anthropic’s format', async () => {
    bed.bedrock.behave({ usage: { input: 100, output: 20 } });
    const response = await fetch(`${proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'amazon.nova-micro-v1:0', max_tokens: 50, messages: [{ role: 'user', content: 'Say hello.' }] }),
    });
    expect(response.status).toBe(200);
    const message = (await response.json()) as { type: string; content: unknown; usage: unknown };
    expect(message).toMatchObject({
      type: 'message',
      content: [{ type: 'text', text: 'Hello from the fake Converse upstream.' }],
      usage: { input_tokens: 100, output_tokens: 20 },
    });
    expect(lastRequest().path).toBe('/model/amazon.nova-micro-v1%3A0/converse');
    expect(lastRequest().json).toEqual({ messages: [{ role: 'user', content: [{ text: 'Say hello.' }] }], inferenceConfig: { maxTokens: 50 } });
  });
});
