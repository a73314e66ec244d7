// The OpenAI-compatible gateway as a user meets it: the official `openai` SDK, unmodified, pointed at a real
// `tollgate proxy` process whose routes reach the fake upstreams. Every model family, every Claude route,
// streaming and not, tool calls and results, a refused parameter, upstream errors; each call's span is read
// back and its tokens and cost checked against the usage the fake reported and costs worked out by hand.

import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectedTokenUsage, type FakeUpstream, type FakeUsage } from '../fakes/llm-upstream.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { ANTHROPIC_KEY, OPENAI_KEY, PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';
import type { PriceEntry } from '../../contracts/price-entry.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan, recentSpans } from '../support/spans.ts';

type Format = 'anthropic' | 'openai' | 'gemini';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let client: OpenAI;

const usage: FakeUsage = { input: 1200, output: 300, cacheRead: 500, cacheWrite: 80, reasoning: 40 };
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

async function api<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${proxy.url}${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as T;
}

async function prices(): Promise<PriceEntry[]> {
  return (await api<{ config: { pricing: { models: PriceEntry[] } } }>('/_local/api/config')).config.pricing.models;
}

/*
 * What `usage` costs, worked out by hand from the built-in list prices (USD per million tokens), so the test
 * does not share a formula with the code it checks. The fake reports 1200 uncached input tokens, 500 cache
 * reads, 80 five-minute cache writes (Anthropic formats only) and 300 + 40 reasoning output tokens.
 *
 * gemini-2.5-flash (0.3 / cached 0.03 / 2.5): 1200 × 0.3 + 500 × 0.03 + 340 × 2.5 = 360 + 15 + 850 = 1225 → 0.001225
 * claude-sonnet-4 (3 / cached 0.3 / write 3.75 / 15): 1200 × 3 + 500 × 0.3 + 80 × 3.75 + 340 × 15
 *   = 3600 + 150 + 300 + 5100 = 9150 → 0.00915
 * gpt-4o-mini (0.15 / cached 0.075 / 0.6): 1200 × 0.15 + 500 × 0.075 + 340 × 0.6 = 180 + 37.5 + 204 = 421.5 → 0.0004215
 */
const GEMINI_FLASH_COST = 0.001225;
const CLAUDE_SONNET_COST = 0.00915;
const GPT_4O_MINI_COST = 0.0004215;

async function spanById(spanId: string | null): Promise<SpanJson> {
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  // The SDK stops reading at `data: [DONE]`, which can be before the proxy has seen the upstream end and
  // recorded the span: findSpan waits for it rather than racing it.
  return findSpan(proxy.url, { spanId });
}

async function setGateway(gateway: { anthropicRoute?: string; googleRoute?: string }): Promise<void> {
  await api('/_local/api/config', { gateway });
}

interface Case {
  name: string;
  model: string;
  gateway: { anthropicRoute?: string; googleRoute?: string };
  fake: () => FakeUpstream;
  format: Format;
  route: string;
  /** The model id the route must receive (in the path or the body). */
  upstreamModel: string;
  upstreamPath: (stream: boolean) => string;
  /** What `usage` costs on this model (worked out above). */
  costUsd: number;
}

const vertex = `/v1/projects/${PROJECT}/locations`;

const CASES: Case[] = [
  {
    name: 'Gemini through alpha (translated to generateContent)',
    model: 'gemini-2.5-flash',
    gateway: { googleRoute: 'alpha' },
    fake: () => bed.vertex,
    format: 'gemini',
    route: 'alpha',
    upstreamModel: 'gemini-2.5-flash',
    upstreamPath: (s) => `${vertex}/us-central1/publishers/google/models/gemini-2.5-flash:${s ? 'streamGenerateContent' : 'generateContent'}`,
    costUsd: GEMINI_FLASH_COST,
  },
  {
    name: 'Gemini through alpha-compat (passed through)',
    model: 'gemini-2.5-flash',
    gateway: { googleRoute: 'alpha-compat' },
    fake: () => bed.vertex,
    format: 'openai',
    route: 'alpha-compat',
    upstreamModel: 'google/gemini-2.5-flash',
    upstreamPath: () => `${vertex}/us-central1/endpoints/openapi/chat/completions`,
    costUsd: GEMINI_FLASH_COST,
  },
  {
    name: 'Claude through gamma-direct (Anthropic API)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma-direct' },
    fake: () => bed.anthropic,
    format: 'anthropic',
    route: 'gamma-direct',
    upstreamModel: 'claude-sonnet-4-20250514',
    upstreamPath: () => '/v1/messages',
    costUsd: CLAUDE_SONNET_COST,
  },
  {
    name: 'Claude through gamma (Vertex AI rawPredict)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma' },
    fake: () => bed.vertex,
    format: 'anthropic',
    route: 'gamma',
    upstreamModel: 'claude-sonnet-4@20250514',
    upstreamPath: (s) => `${vertex}/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:${s ? 'streamRawPredict' : 'rawPredict'}`,
    costUsd: CLAUDE_SONNET_COST,
  },
  {
    name: 'Claude through gamma-cloudb (Bedrock InvokeModel)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma-cloudb' },
    fake: () => bed.bedrock,
    format: 'anthropic',
    route: 'gamma-cloudb',
    upstreamModel: 'anthropic.claude-sonnet-4-20250514-v1:0',
    upstreamPath: (s) => `/model/anthropic.claude-sonnet-4-20250514-v1%3A0/${s ? 'invoke-with-response-stream' : 'invoke'}`,
    costUsd: CLAUDE_SONNET_COST,
  },
  {
    name: 'GPT through beta (passed through)',
    model: 'gpt-4o-mini',
    gateway: {},
    fake: () => bed.openai,
    format: 'openai',
    route: 'beta',
    upstreamModel: 'gpt-4o-mini',
    upstreamPath: () => '/v1/chat/completions',
    costUsd: GPT_4O_MINI_COST,
  },
];

const weatherTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
  // The caller's key is never used upstream: Tollgate attaches its own credentials.
  client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-caller-key-not-forwarded', maxRetries: 0 });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(async () => {
  bed.reset();
  await setGateway({ anthropicRoute: 'gamma-direct', googleRoute: 'alpha' });
});

describe.each(CASES)('$name', (c) => {
  beforeEach(async () => {
    await setGateway(c.gateway);
  });

  it('answers a chat completion; the span has the route, tokens and cost of the native route', async () => {
    const text = `Hello from ${c.route}.`;
    c.fake().behave({ usage, text });
    const { data, response } = await client.chat.completions
      .create(
        {
          model: c.model,
          messages: [
            { role: 'system', content: 'You are terse.' },
            { role: 'user', content: 'Say hello.' },
          ],
          max_tokens: 100,
          temperature: 0.5,
          user: 'alice',
        },
        { headers: { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` } },
      )
      .withResponse();
    // The caller's trace continues: same trace id on the response and upstream, the proxy's span as parent.
    expect(response.headers.get('x-proxy-trace-id')).toBe(TRACE_ID);
    expect(c.fake().requests.at(-1)!.headers.traceparent).toBe(`00-${TRACE_ID}-${response.headers.get('x-proxy-span-id')}-01`);
    expect(data.choices[0]!.message.content).toBe(text);
    expect(data.choices[0]!.finish_reason).toBe('stop');
    const tokens = expectedTokenUsage(usage, c.format);
    expect(data.usage).toMatchObject({
      prompt_tokens: tokens.inputTokens,
      completion_tokens: tokens.outputTokens,
      total_tokens: tokens.totalTokens,
      prompt_tokens_details: { cached_tokens: tokens.cacheReadTokens },
    });
    const seen = c.fake().requests.at(-1)!;
    expect(seen.path).toBe(c.upstreamPath(false));
    expect(JSON.stringify(seen.headers)).not.toContain('sk-caller-key-not-forwarded');
    if (c.route === 'gamma-direct') expect(seen.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    if (c.route === 'beta') expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    const body = seen.json as Record<string, unknown>;
    if (c.format === 'anthropic') {
      expect(body.system).toEqual([{ type: 'text', text: 'You are terse.' }]);
      expect(body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }]);
      expect(body.max_tokens).toBe(100);
      expect(body.temperature).toBe(0.5);
    }
    if (c.route === 'gamma') expect(body.anthropic_version).toBe('vertex-2023-10-16');
    if (c.route === 'gamma-cloudb') expect(body.anthropic_version).toBe('bedrock-2023-05-31');
    if (c.route === 'gamma-direct') expect(body.model).toBe(c.upstreamModel);
    if (c.route === 'alpha') {
      expect(body.systemInstruction).toEqual({ parts: [{ text: 'You are terse.' }] });
      expect(body.generationConfig).toEqual({ maxOutputTokens: 100, temperature: 0.5 });
    }
    if (c.format === 'openai') expect(body.model).toBe(c.upstreamModel);

    const span = await spanById(response.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({
      route: c.route,
      provider: c.model.startsWith('gpt') ? 'openai' : c.model.startsWith('gemini') ? 'google' : 'anthropic',
      model: c.upstreamModel,
      user_id: 'alice',
      status: 'ok',
      status_code: 200,
      priced: true,
      input_tokens: tokens.inputTokens,
      output_tokens: tokens.outputTokens,
      cached_tokens: tokens.cacheReadTokens,
      cache_write_tokens: tokens.cacheWriteTokens,
    });
    expect(span.cost_usd).toBeCloseTo(c.costUsd, 10);
  });

  it('streams chunks, ends with a usage chunk when asked for one, and costs the stream', async () => {
    const text = `Streaming hello from ${c.route}, in several pieces.`;
    c.fake().behave({ usage, text, chunkCount: 5 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: c.model, messages: [{ role: 'user', content: 'Say hello.' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((ch) => ch.choices[0]?.delta.content ?? '').join('')).toBe(text);
    expect(chunks.filter((ch) => ch.choices[0]?.delta.content).length).toBeGreaterThan(1);
    expect(chunks.find((ch) => ch.choices[0]?.finish_reason)?.choices[0]!.finish_reason).toBe('stop');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    const tokens = expectedTokenUsage(usage, c.format);
    expect(last.usage).toMatchObject({ prompt_tokens: tokens.inputTokens, completion_tokens: tokens.outputTokens, total_tokens: tokens.totalTokens });
    expect(c.fake().requests.at(-1)!.path).toBe(c.upstreamPath(true));

    const span = await spanById(response.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({ route: c.route, model: c.upstreamModel, status: 'ok', input_tokens: tokens.inputTokens, output_tokens: tokens.outputTokens });
    expect(span.cost_usd).toBeCloseTo(c.costUsd, 10);
  });

  it('costs a stream whose caller did not ask for usage, without sending a usage chunk', async () => {
    c.fake().behave({ usage });
    const { data: stream, response } = await client.chat.completions.create({ model: c.model, messages: [{ role: 'user', content: 'Say hello.' }], stream: true }).withResponse();
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((ch) => !ch.usage)).toBe(true);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    const span = await spanById(response.headers.get('x-proxy-span-id'));
    expect(span.input_tokens).toBe(expectedTokenUsage(usage, c.format).inputTokens);
    expect(span.cost_usd).toBeCloseTo(c.costUsd, 10);
  });

  it("returns a tool call, then sends the tool result back in the provider's own form", async () => {
    c.fake().behave({ usage, toolCall: { name: 'get_weather', arguments: { city: 'Paris' } } });
    const question: ChatCompletionMessageParam = { role: 'user', content: 'Weather in Paris?' };
    const first = await client.chat.completions.create({ model: c.model, messages: [question], tools: [weatherTool], tool_choice: 'auto' });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const call = choice.message.tool_calls![0]!;
    expect(call.type).toBe('function');
    if (call.type !== 'function') throw new Error('not a function call');
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'Paris' });
    expect(call.id).toMatch(/\w+/);

    // The same call streamed: the tool call arrives as deltas that add up to the same call.
    const stream = await client.chat.completions.create({ model: c.model, messages: [question], tools: [weatherTool], stream: true });
    let name = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      for (const tc of delta?.tool_calls ?? []) {
        expect(tc.index).toBe(0);
        name += tc.function?.name ?? '';
        args += tc.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe('get_weather');
    expect(JSON.parse(args)).toEqual({ city: 'Paris' });
    expect(finish).toBe('tool_calls');

    c.fake().behave({ usage, text: 'It is sunny in Paris.' });
    const answer = await client.chat.completions.create({
      model: c.model,
      tools: [weatherTool],
      messages: [question, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21, "sky": "clear"}' }],
    });
    expect(answer.choices[0]!.message.content).toBe('It is sunny in Paris.');
    const sent = c.fake().requests.at(-1)!.json as Record<string, unknown>;
    if (c.format === 'anthropic') {
      expect(sent.messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: call.id, name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '{"temperature_c": 21, "sky": "clear"}' }] },
      ]);
      expect(sent.tools).toEqual([{ name: 'get_weather', description: 'Current weather for a city', input_schema: weatherTool.function.parameters }]);
    } else if (c.route === 'alpha') {
      expect(sent.contents).toEqual([
        { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
        { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temperature_c: 21, sky: 'clear' } } }] },
      ]);
      expect(sent.tools).toEqual([
        { functionDeclarations: [{ name: 'get_weather', description: 'Current weather for a city', parametersJsonSchema: weatherTool.function.parameters }] },
      ]);
    } else {
      expect((sent.messages as unknown[]).at(-1)).toEqual({ role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21, "sky": "clear"}' });
    }
  });

  it("answers an upstream error in OpenAI's shape with the upstream status, and records it", async () => {
    c.fake().behave({ status: 429 });
    const error = await client.chat.completions.create({ model: c.model, messages: [{ role: 'user', content: 'Say hello.' }] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const apiError = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(apiError.status).toBe(429);
    expect(apiError.message).toContain(`upstream ${c.route} answered 429`);
    expect(apiError.message).toContain('Fake upstream error 429');
    const span = await spanById(apiError.headers?.get('x-proxy-span-id') ?? null);
    expect(span).toMatchObject({ route: c.route, status: 'upstream_error', status_code: 429, cost_usd: 0 });
  });
});

describe('streams that fail upstream', () => {
  it.each([
    ['gamma-direct', () => bed.anthropic],
    ['gamma-cloudb', () => bed.bedrock],
  ] as const)('a Claude stream cut by an in-stream error (%s) raises an APIError in the SDK', async (route, fake) => {
    await setGateway({ anthropicRoute: route });
    fake().behave({ streamError: true, chunkCount: 6 });
    const stream = await client.chat.completions.create({ model: 'claude-sonnet-4', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    const received: string[] = [];
    const error = await (async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? '');
      return null;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain(`upstream ${route} stream failed`);
    expect(received.join('').length).toBeGreaterThan(0);
    const spans = await recentSpans(proxy.url, 5);
    expect(spans.find((s) => s.route === route)).toMatchObject({ status: 'error' });
  });

  it('a Gemini stream that ends before its finishReason raises an APIError, never a clean end', async () => {
    bed.vertex.behave({ truncateStream: true, chunkCount: 6 });
    const stream = await client.chat.completions.create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    const error = await (async () => {
      for await (const _chunk of stream) {
        // draining
      }
      return null;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('stream ended before a finishReason');
  });
});

describe('parameters a provider cannot honour', () => {
  it('n > 1 for a Claude model is a 400 naming `n`, and nothing reaches the provider', async () => {
    const error = await client.chat.completions.create({ model: 'claude-sonnet-4', messages: [{ role: 'user', content: 'Hi' }], n: 2 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const bad = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.param).toBe('n');
    expect(bad.message).toContain('Anthropic returns one completion per request');
    expect(bed.anthropic.requests).toHaveLength(0);
    const span = await spanById(bad.headers?.get('x-proxy-span-id') ?? null);
    expect(span).toMatchObject({ route: 'gamma-direct', status: 'rejected', model: 'claude-sonnet-4' });
  });

  it('n > 1 for a Gemini model becomes candidateCount and one choice per candidate comes back', async () => {
    await client.chat.completions.create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], n: 2 });
    expect((bed.vertex.requests.at(-1)!.json as { generationConfig: unknown }).generationConfig).toEqual({ candidateCount: 2 });
  });

  it('parallel_tool_calls: false for Gemini is a 400 naming it', async () => {
    const error = await client.chat.completions
      .create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], tools: [weatherTool], parallel_tool_calls: false })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('parallel_tool_calls');
    expect(bed.vertex.requests).toHaveLength(0);
  });

  it('an image by URL on Claude through Bedrock is a 400 naming the content part', async () => {
    await setGateway({ anthropicRoute: 'gamma-cloudb' });
    const error = await client.chat.completions
      .create({
        model: 'claude-sonnet-4',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
            ],
          },
        ],
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages[0].content[1].image_url.url');
    expect(bed.bedrock.requests).toHaveLength(0);
  });

  it('response_format json_schema on Claude becomes a forced tool, and the JSON comes back as content', async () => {
    bed.anthropic.behave({ toolCall: { name: 'json_response', arguments: { answer: 42 } } });
    const schema = { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] };
    const res = await client.chat.completions.create({
      model: 'claude-sonnet-4',
      messages: [{ role: 'user', content: 'The answer?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema } },
    });
    expect(JSON.parse(res.choices[0]!.message.content!)).toEqual({ answer: 42 });
    expect(res.choices[0]!.finish_reason).toBe('stop');
    const sent = bed.anthropic.requests.at(-1)!.json as Record<string, unknown>;
    expect(sent.tool_choice).toEqual({ type: 'tool', name: 'json_response' });
    expect((sent.tools as { input_schema: unknown }[])[0]!.input_schema).toEqual(schema);
  });

  it('an unknown model is a 404 model_not_found', async () => {
    const error = await client.chat.completions.create({ model: 'no-such-model-7', messages: [{ role: 'user', content: 'Hi' }] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  });

  it('a call refused before its model names a provider still has the span its X-Proxy-Span-Id points to', async () => {
    const unknown = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'dora' },
      body: JSON.stringify({ model: 'no-such-model-8', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(unknown.status).toBe(404);
    expect(await spanById(unknown.headers.get('x-proxy-span-id'))).toMatchObject({
      route: 'v1',
      provider: 'unknown',
      model: 'no-such-model-8',
      user_id: 'dora',
      status: 'rejected',
      cost_usd: 0,
      priced: false,
      error: expect.stringContaining('model_not_found'),
    });
    const badJson = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":' });
    expect(badJson.status).toBe(400);
    expect(await spanById(badJson.headers.get('x-proxy-span-id'))).toMatchObject({ provider: 'unknown', model: 'unknown', status: 'rejected' });
  });
});

describe('GET /v1/models', () => {
  it('lists exactly the enabled priced models and follows a price override at once', async () => {
    const listed = async () => {
      const out: { id: string; owned_by: string }[] = [];
      for await (const model of client.models.list()) out.push({ id: model.id, owned_by: model.owned_by });
      return out.sort((a, b) => a.id.localeCompare(b.id));
    };
    const priced = async () =>
      (await prices())
        .filter((p) => p.disabled !== true)
        .map((p) => ({ id: p.model, owned_by: p.provider }))
        .sort((a, b) => a.id.localeCompare(b.id));
    const before = await listed();
    expect(before).toEqual(await priced());
    expect(before).toContainEqual({ id: 'claude-sonnet-4', owned_by: 'anthropic' });
    expect(before).toContainEqual({ id: 'gemini-2.5-flash', owned_by: 'google' });
    expect(before).toContainEqual({ id: 'gpt-4o-mini', owned_by: 'openai' });

    await api('/_local/api/config', {
      pricing: {
        models: [
          { provider: 'openai', model: 'gpt-tollgate-test', input_per_million: 1, cached_input_per_million: 0.5, output_per_million: 2 },
          { provider: 'openai', model: 'gpt-4.1-nano', disabled: true, input_per_million: 0, output_per_million: 0 },
        ],
      },
    });
    const after = await listed();
    expect(after).toEqual(await priced());
    expect(after).toContainEqual({ id: 'gpt-tollgate-test', owned_by: 'openai' });
    expect(after.map((m) => m.id)).not.toContain('gpt-4.1-nano');
    expect(after).toHaveLength(before.length); // one added, one removed

    // The added model routes and is costed at its new price; the disabled one is gone.
    bed.openai.behave({ usage: { input: 1000, output: 500 } });
    const { response } = await client.chat.completions.create({ model: 'gpt-tollgate-test', messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    const span = await spanById(response.headers.get('x-proxy-span-id'));
    // 1000 × 1 + 500 × 2 = 2000 USD per million → 0.002
    expect(span.cost_usd).toBeCloseTo(0.002, 10);
    const gone = await client.chat.completions.create({ model: 'gpt-4.1-nano', messages: [{ role: 'user', content: 'Hi' }] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('lists a model under the id its override was written with, canonical id too, and that id works', async () => {
    await api('/_local/api/config', {
      pricing: { models: [{ provider: 'anthropic', model: 'claude-sonnet-4-20250514', aliases: ['team-sonnet'], input_per_million: 4, output_per_million: 20 }] },
    });
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(expect.arrayContaining(['claude-sonnet-4', 'claude-sonnet-4-20250514', 'team-sonnet']));
    expect(ids.filter((id) => id === 'claude-sonnet-4')).toHaveLength(1);
    expect(await client.models.retrieve('claude-sonnet-4-20250514')).toMatchObject({ id: 'claude-sonnet-4-20250514', owned_by: 'anthropic' });

    // Chat completions take the configured id and cost it at the override's price.
    bed.anthropic.behave({ usage: { input: 1000, output: 500 } });
    const { response } = await client.chat.completions.create({ model: 'claude-sonnet-4-20250514', messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    const span = await spanById(response.headers.get('x-proxy-span-id'));
    // 1000 × 4 + 500 × 20 = 14000 µ$
    expect(span).toMatchObject({ model: 'claude-sonnet-4-20250514', route: 'gamma-direct', cost_usd: 0.014, priced: true });
    expect(bed.anthropic.requests.at(-1)!.json).toMatchObject({ model: 'claude-sonnet-4-20250514' });
  });
});
