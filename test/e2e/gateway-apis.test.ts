// The Responses API and the Messages API on /v1 as their users meet them: the official `openai` SDK
// (`client.responses.create`, streamed and not, a function-call round trip) and the official
// `@anthropic-ai/sdk` (`messages.create`, `messages.stream`, a tool round trip, count_tokens), unmodified,
// against a real `tollgate proxy` whose routes reach every provider's fake: OpenAI (Responses passed through,
// Messages translated), Claude on the Anthropic API, Vertex AI and Bedrock (Messages passed through, Responses
// translated), Gemini natively and through Vertex's OpenAI surface, and a local Ollama runtime. Each fake
// checks what it receives in its own wire format; each call's span is read back and its tokens and cost
// checked against costs worked out by hand.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectedTokenUsage, type FakeUsage } from '../fakes/llm-upstream.ts';
import { THOUGHT_SUMMARY } from '../fakes/llm-gemini.ts';
import { startFakeOllama, type FakeOllama } from '../fakes/ollama.ts';
import { findSpan } from '../support/spans.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let ollama: FakeOllama;
let proxy: ProxyProcess;
let openai: OpenAI;
let anthropic: Anthropic;

const usage: FakeUsage = { input: 1200, output: 300, cacheRead: 500, cacheWrite: 80, reasoning: 40 };
const LOCAL_USAGE = { prompt: 30, completion: 7 };

/*
 * What `usage` costs, worked out by hand from the built-in list prices (USD per million tokens); the fakes
 * report 1200 uncached input tokens, 500 cache reads, 80 five-minute cache writes (Anthropic formats only)
 * and 300 + 40 reasoning output tokens.
 *
 * gemini-2.5-flash (0.3 / cached 0.03 / 2.5): 1200 × 0.3 + 500 × 0.03 + 340 × 2.5 = 360 + 15 + 850 = 1225 → 0.001225
 * claude-sonnet-4 (3 / cached 0.3 / write 3.75 / 15): 1200 × 3 + 500 × 0.3 + 80 × 3.75 + 340 × 15
 *   = 3600 + 150 + 300 + 5100 = 9150 → 0.00915
 * gpt-4o-mini (0.15 / cached 0.075 / 0.6): 1200 × 0.15 + 500 × 0.075 + 340 × 0.6 = 180 + 37.5 + 204 = 421.5 → 0.0004215
 * A local model costs 0.
 */
const GEMINI_FLASH_COST = 0.001225;
const CLAUDE_SONNET_COST = 0.00915;
const GPT_4O_MINI_COST = 0.0004215;

type Format = 'anthropic' | 'openai' | 'gemini' | 'local';

interface Case {
  name: string;
  model: string;
  gateway: { anthropicRoute?: string; googleRoute?: string };
  route: string;
  provider: string;
  /** The wire format the upstream answers in (what the usage is read from). */
  format: Format;
  /** The model id the route receives, and the span records. */
  upstreamModel: string;
  costUsd: number;
  /** The upstream speaks the Responses API itself (OpenAI) / the Messages API itself (Claude). */
  nativeResponses: boolean;
  nativeMessages: boolean;
}

const CASES: Case[] = [
  {
    name: 'GPT on the OpenAI API (beta)',
    model: 'gpt-4o-mini',
    gateway: {},
    route: 'beta',
    provider: 'openai',
    format: 'openai',
    upstreamModel: 'gpt-4o-mini',
    costUsd: GPT_4O_MINI_COST,
    nativeResponses: true,
    nativeMessages: false,
  },
  {
    name: 'Claude on the Anthropic API (gamma-direct)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma-direct' },
    route: 'gamma-direct',
    provider: 'anthropic',
    format: 'anthropic',
    upstreamModel: 'claude-sonnet-4-20250514',
    costUsd: CLAUDE_SONNET_COST,
    nativeResponses: false,
    nativeMessages: true,
  },
  {
    name: 'Claude on Vertex AI (gamma)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma' },
    route: 'gamma',
    provider: 'anthropic',
    format: 'anthropic',
    upstreamModel: 'claude-sonnet-4@20250514',
    costUsd: CLAUDE_SONNET_COST,
    nativeResponses: false,
    nativeMessages: true,
  },
  {
    name: 'Claude on Bedrock (gamma-cloudb)',
    model: 'claude-sonnet-4',
    gateway: { anthropicRoute: 'gamma-cloudb' },
    route: 'gamma-cloudb',
    provider: 'anthropic',
    format: 'anthropic',
    upstreamModel: 'anthropic.claude-sonnet-4-20250514-v1:0',
    costUsd: CLAUDE_SONNET_COST,
    nativeResponses: false,
    nativeMessages: true,
  },
  {
    name: 'Gemini on Vertex AI, native (alpha)',
    model: 'gemini-2.5-flash',
    gateway: { googleRoute: 'alpha' },
    route: 'alpha',
    provider: 'google',
    format: 'gemini',
    upstreamModel: 'gemini-2.5-flash',
    costUsd: GEMINI_FLASH_COST,
    nativeResponses: false,
    nativeMessages: false,
  },
  {
    name: "Gemini through Vertex AI's OpenAI surface (alpha-compat)",
    model: 'gemini-2.5-flash',
    gateway: { googleRoute: 'alpha-compat' },
    route: 'alpha-compat',
    provider: 'google',
    format: 'openai',
    upstreamModel: 'google/gemini-2.5-flash',
    costUsd: GEMINI_FLASH_COST,
    nativeResponses: false,
    nativeMessages: false,
  },
  {
    name: 'a local model (Ollama)',
    model: 'llama3.2',
    gateway: {},
    route: 'local',
    provider: 'local',
    format: 'local',
    upstreamModel: 'llama3.2',
    costUsd: 0,
    nativeResponses: false,
    nativeMessages: false,
  },
];

interface Seen {
  path: string;
  json: Record<string, unknown>;
}

/** The last request the case's upstream received. */
function lastSeen(c: Case): Seen {
  if (c.format === 'local') {
    const request = ollama.requests.at(-1)!;
    return { path: request.path, json: request.json as Record<string, unknown> };
  }
  const fake = { beta: bed.openai, 'gamma-direct': bed.anthropic, 'gamma-cloudb': bed.bedrock }[c.route] ?? bed.vertex;
  const request = fake.requests.at(-1)!;
  return { path: request.path, json: request.json as Record<string, unknown> };
}

/** The next answers are this text (the local runtime answers a tool call while tools wait for a result). */
function answerText(c: Case, text: string): void {
  if (c.format === 'local') ollama.behave({ text, usage: LOCAL_USAGE, chunkCount: 4 });
  else fakeOf(c).behave({ usage, text, chunkCount: 4 });
}

function answerToolCall(c: Case, forRequests: number): void {
  if (c.format === 'local') ollama.behave({ toolArguments: { city: 'Paris' }, usage: LOCAL_USAGE });
  else fakeOf(c).behave({ usage, toolCall: { name: 'get_weather', arguments: { city: 'Paris' } }, forRequests });
}

function fakeOf(c: Case) {
  return { beta: bed.openai, 'gamma-direct': bed.anthropic, 'gamma-cloudb': bed.bedrock }[c.route] ?? bed.vertex;
}

/** The tokens the span and the answer report: the fake's usage as its format states it. */
function tokens(c: Case) {
  if (c.format === 'local')
    return { inputTokens: LOCAL_USAGE.prompt, outputTokens: LOCAL_USAGE.completion, cacheReadTokens: 0, totalTokens: LOCAL_USAGE.prompt + LOCAL_USAGE.completion };
  return expectedTokenUsage(usage, c.format);
}

async function spanOf(spanId: string | null | undefined): Promise<SpanJson> {
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId: spanId! });
}

function expectCostedSpan(span: SpanJson, c: Case, user = 'alice'): void {
  const t = tokens(c);
  expect(span).toMatchObject({
    route: c.route,
    provider: c.provider,
    model: c.upstreamModel,
    user_id: user,
    status: 'ok',
    status_code: 200,
    input_tokens: t.inputTokens,
    output_tokens: t.outputTokens,
    cached_tokens: t.cacheReadTokens,
  });
  expect(span.cost_usd).toBeCloseTo(c.costUsd, 10);
}

async function setGateway(gateway: Case['gateway']): Promise<void> {
  const res = await fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ gateway }) });
  expect(res.status, await res.clone().text()).toBe(200);
}

const weatherFunction = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
};

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

beforeAll(async () => {
  [bed, ollama] = await Promise.all([startUpstreamBed(), startFakeOllama({ models: ['llama3.2:latest'] })]);
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`local:
  runtime: { baseUrl: "${ollama.url}" }
budgets:
  policies:
    - { name: erin-tiny, users: [erin], limitUsd: 0.0001, period: month, timeZone: UTC, alertThresholds: [100], enforcement: block }
`),
    env: bed.env,
  });
  openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'alice' } });
  anthropic = new Anthropic({ baseURL: proxy.url, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'alice' } });
});

afterAll(async () => {
  await proxy?.stop();
  await Promise.all([bed?.close(), ollama?.close()]);
});

describe.each(CASES)('the Responses API: $name', (c) => {
  beforeEach(async () => {
    bed.reset();
    ollama.requests.length = 0;
    await setGateway({ anthropicRoute: 'gamma-direct', googleRoute: 'alpha', ...c.gateway });
  });

  it('answers a response; the span has the route, tokens and cost of the native route', async () => {
    answerText(c, `Hello from ${c.route}.`);
    const { data, response } = await openai.responses
      .create({ model: c.model, instructions: 'You are terse.', input: 'Say hello.', max_output_tokens: 200, temperature: 0.5 })
      .withResponse();
    expect(data.output_text).toBe(`Hello from ${c.route}.`);
    expect(data.status).toBe('completed');
    const t = tokens(c);
    expect(data.usage).toMatchObject({ input_tokens: t.inputTokens, output_tokens: t.outputTokens, input_tokens_details: { cached_tokens: t.cacheReadTokens } });
    expectCostedSpan(await spanOf(response.headers.get('x-proxy-span-id')), c);

    const seen = lastSeen(c);
    if (c.nativeResponses) {
      expect(seen.path).toBe('/v1/responses');
      expect(seen.json).toMatchObject({ model: c.upstreamModel, instructions: 'You are terse.', input: 'Say hello.', max_output_tokens: 200 });
    } else if (c.format === 'anthropic') {
      expect(seen.json).toMatchObject({
        system: [{ type: 'text', text: 'You are terse.' }],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }],
        max_tokens: 200,
        temperature: 0.5,
      });
    } else if (c.format === 'gemini') {
      expect(seen.json).toMatchObject({ systemInstruction: { parts: [{ text: 'You are terse.' }] }, contents: [{ role: 'user', parts: [{ text: 'Say hello.' }] }] });
      expect(seen.json.generationConfig).toEqual({ maxOutputTokens: 200, temperature: 0.5 });
    } else {
      expect(seen.path).toMatch(/chat\/completions$/);
      expect(seen.json.messages).toEqual([
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello.' },
      ]);
    }
  });

  it('streams the Responses event sequence, usage in response.completed, and costs the stream', async () => {
    const text = `Streaming hello from ${c.route}, in pieces.`;
    answerText(c, text);
    const { data: stream, response } = await openai.responses.create({ model: c.model, input: [{ role: 'user', content: 'Say hello.' }], stream: true }).withResponse();
    const types: string[] = [];
    let deltas = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(deltas).toBe(text);
    expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    // OpenAI may put a reasoning item first; the message's own events come in this order.
    const message = types.slice(types.lastIndexOf('response.output_item.added'));
    expect(message.slice(0, 3)).toEqual(['response.output_item.added', 'response.content_part.added', 'response.output_text.delta']);
    expect(message.filter((t) => t === 'response.output_text.delta').length).toBeGreaterThan(1);
    expect(message.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    const t = tokens(c);
    expect(completed?.usage).toMatchObject({ input_tokens: t.inputTokens, output_tokens: t.outputTokens });
    expect(completed?.output.at(-1)).toEqual(expect.objectContaining({ type: 'message', content: [expect.objectContaining({ type: 'output_text', text })] }));
    expectCostedSpan(await spanOf(response.headers.get('x-proxy-span-id')), c);
  });

  it('returns a function call, streamed and not, and takes its output back, by items and by previous_response_id', async () => {
    answerToolCall(c, 2);
    const question = { role: 'user' as const, content: 'Weather in Paris?' };
    const first = await openai.responses.create({ model: c.model, input: [question], tools: [weatherFunction], tool_choice: 'auto' });
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
    if (call?.type !== 'function_call') throw new Error('no function call');
    expect(JSON.parse(call.arguments)).toEqual({ city: 'Paris' });
    expect(call.call_id).toMatch(/\w+/);

    // Streamed: the call arrives as output_item.added, argument deltas, and done events.
    const stream = await openai.responses.create({ model: c.model, input: [question], tools: [weatherFunction], stream: true });
    let args = '';
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.function_call_arguments.delta') args += event.delta;
    }
    expect(JSON.parse(args)).toEqual({ city: 'Paris' });
    expect(types).toContain('response.function_call_arguments.done');
    expect(types.at(-1)).toBe('response.completed');

    // The output goes back as items, with its result.
    answerText(c, 'It is sunny in Paris.');
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: '{"temperature_c": 21, "sky": "clear"}' };
    const answer = await openai.responses.create({ model: c.model, tools: [weatherFunction], input: [question, call, output] });
    expect(answer.output_text).toBe('It is sunny in Paris.');
    expectToolResultUpstream(c, call.call_id);

    // Or the conversation is continued by id: Tollgate's store (OpenAI's own on OpenAI).
    const continued = await openai.responses.create({ model: c.model, tools: [weatherFunction], previous_response_id: first.id, input: [output] });
    expect(continued.output_text).toBe('It is sunny in Paris.');
    expectToolResultUpstream(c, call.call_id);
  });

  it("answers an upstream error in OpenAI's shape with the upstream's status", async () => {
    if (c.format === 'local') return; // the fake runtime has no failure switch; the chat path covers its errors
    fakeOf(c).behave({ status: 429 });
    const error = await openai.responses.create({ model: c.model, input: 'Hi' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as Error).message).toContain(`upstream ${c.route} answered 429`);
  });
});

/** The tool result reached the provider in its own form, answering the call it made. */
function expectToolResultUpstream(c: Case, callId: string): void {
  const sent = lastSeen(c).json;
  const result = '{"temperature_c": 21, "sky": "clear"}';
  if (c.nativeResponses) {
    const input = sent.input as Record<string, unknown>[];
    expect(input.at(-1)).toEqual({ type: 'function_call_output', call_id: callId, output: result });
  } else if (c.format === 'anthropic') {
    const messages = sent.messages as { role: string; content: Record<string, unknown>[] }[];
    expect(messages.at(-2)).toMatchObject({ role: 'assistant', content: [{ type: 'tool_use', id: callId, name: 'get_weather', input: { city: 'Paris' } }] });
    expect(messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: callId, content: result }] });
  } else if (c.format === 'gemini') {
    expect((sent.contents as unknown[]).slice(-2)).toEqual([
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temperature_c: 21, sky: 'clear' } } }] },
    ]);
  } else {
    expect((sent.messages as unknown[]).at(-1)).toEqual({ role: 'tool', tool_call_id: callId, content: result });
  }
}

describe.each(CASES)('the Messages API: $name', (c) => {
  beforeEach(async () => {
    bed.reset();
    ollama.requests.length = 0;
    await setGateway({ anthropicRoute: 'gamma-direct', googleRoute: 'alpha', ...c.gateway });
  });

  it('answers a message; the span has the route, tokens and cost of the native route', async () => {
    answerText(c, `Hello from ${c.route}.`);
    const { data, response } = await anthropic.messages
      .create({ model: c.model, max_tokens: 200, system: 'You are terse.', messages: [{ role: 'user', content: 'Say hello.' }], metadata: { user_id: 'bob' } })
      .withResponse();
    expect(data.content).toEqual([expect.objectContaining({ type: 'text', text: `Hello from ${c.route}.` })]);
    expect(data.stop_reason).toBe('end_turn');
    const t = tokens(c);
    // Anthropic counts input without cache reads (and writes): what the caller reads is the provider's split.
    expect(data.usage.input_tokens + (data.usage.cache_read_input_tokens ?? 0) + (data.usage.cache_creation_input_tokens ?? 0)).toBe(t.inputTokens);
    expect(data.usage.output_tokens).toBe(t.outputTokens);
    // The header names the user; the body's metadata.user_id is the fallback.
    expectCostedSpan(await spanOf(response.headers.get('x-proxy-span-id')), c);

    const seen = lastSeen(c);
    if (c.nativeMessages) {
      expect(seen.json).toMatchObject({ max_tokens: 200, system: 'You are terse.', messages: [{ role: 'user', content: 'Say hello.' }] });
    } else if (c.format === 'gemini') {
      expect(seen.json).toMatchObject({ systemInstruction: { parts: [{ text: 'You are terse.' }] }, generationConfig: { maxOutputTokens: 200 } });
    } else {
      expect(seen.json).toMatchObject({
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'Say hello.' },
        ],
        user: 'bob',
      });
      expect(seen.json[c.format === 'local' ? 'max_tokens' : 'max_completion_tokens']).toBe(200);
    }
  });

  it('streams the Messages events with a tool call, and takes the tool result back', async () => {
    answerToolCall(c, 1);
    const question = { role: 'user' as const, content: 'Weather in Paris?' };
    const types: string[] = [];
    const stream = anthropic.messages.stream({ model: c.model, max_tokens: 300, tools: [weatherTool], messages: [question] });
    stream.on('streamEvent', (event) => types.push(event.type));
    const message = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types).toContain('content_block_start');
    expect(types).toContain('content_block_delta');
    expect(types).toContain('content_block_stop');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    const use = message.content.find((block) => block.type === 'tool_use');
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: 'Paris' } });
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage.output_tokens).toBe(tokens(c).outputTokens);
    if (use?.type !== 'tool_use') throw new Error('no tool_use');

    answerText(c, 'It is sunny in Paris.');
    const result = '{"temperature_c": 21, "sky": "clear"}';
    const answerStream = anthropic.messages.stream({
      model: c.model,
      max_tokens: 300,
      tools: [weatherTool],
      messages: [question, { role: 'assistant', content: message.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] }],
    });
    const answer = await answerStream.finalMessage();
    expect(answer.content.find((block) => block.type === 'text')).toMatchObject({ text: 'It is sunny in Paris.' });

    const sent = lastSeen(c).json;
    if (c.nativeMessages) {
      expect((sent.messages as unknown[]).at(-1)).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] });
    } else if (c.format === 'gemini') {
      expect((sent.contents as unknown[]).at(-1)).toEqual({ role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temperature_c: 21, sky: 'clear' } } }] });
    } else {
      expect((sent.messages as unknown[]).slice(-2)).toEqual([
        { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: use.id, content: result },
      ]);
    }
  });

  it('costs a streamed message from the upstream usage', async () => {
    answerText(c, 'A streamed hello, in several pieces.');
    const stream = anthropic.messages.stream({ model: c.model, max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] });
    const message = await stream.finalMessage();
    expect(message.content).toEqual([expect.objectContaining({ type: 'text', text: 'A streamed hello, in several pieces.' })]);
    const { response } = await stream.withResponse();
    expectCostedSpan(await spanOf(response.headers.get('x-proxy-span-id')), c);
  });

  it('counts tokens where the provider can, and says so clearly where it cannot', async () => {
    answerText(c, 'unused');
    const request = { model: c.model, messages: [{ role: 'user' as const, content: 'How many tokens is this?' }], system: 'You are terse.' };
    const counting = c.route === 'gamma-direct' || c.route === 'gamma' || c.route === 'gamma-cloudb' || c.route === 'alpha';
    const counted = await anthropic.messages.countTokens(request).catch((e: unknown) => e);
    if (!counting) {
      expect(counted).toBeInstanceOf(Anthropic.BadRequestError);
      expect((counted as Error).message).toMatch(/cannot count tokens here|token counting is not served/);
      return;
    }
    // Anthropic counts input, cache reads and writes: 1200 + 500 + 80; Gemini its prompt: 1200 + 500.
    expect(counted).toEqual({ input_tokens: c.format === 'anthropic' ? 1780 : 1700 });
    const seen = lastSeen(c);
    if (c.route === 'gamma-cloudb') {
      // Bedrock's CountTokens (the fake checked the signature): the InvokeModel body the request would be, base64.
      expect(seen.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/count-tokens');
      const invokeModel = (seen.json.input as { invokeModel: { body: string } }).invokeModel;
      expect(JSON.parse(Buffer.from(invokeModel.body, 'base64').toString('utf8'))).toEqual({
        anthropic_version: 'bedrock-2023-05-31',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'How many tokens is this?' }],
        system: 'You are terse.',
      });
    }
    if (c.route === 'alpha') {
      expect(seen.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:countTokens`);
      expect(seen.json).toEqual({ contents: [{ role: 'user', parts: [{ text: 'How many tokens is this?' }] }], systemInstruction: { parts: [{ text: 'You are terse.' }] } });
    }
  });

  it("answers an upstream error in Anthropic's shape with the upstream's status", async () => {
    if (c.format === 'local') return; // the fake runtime has no failure switch
    fakeOf(c).behave({ status: 429 });
    const error = await anthropic.messages.create({ model: c.model, max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    expect((error as Error).message).toContain(`upstream ${c.route} answered 429`);
  });
});

describe('reasoning', () => {
  beforeEach(async () => {
    bed.reset();
    await setGateway({ anthropicRoute: 'gamma-direct', googleRoute: 'alpha' });
  });

  it('Responses on Claude: effort becomes a thinking budget, the signed thinking goes back as encrypted_content with store: false', async () => {
    bed.anthropic.behave({ usage, toolCall: { name: 'get_weather', arguments: { city: 'Paris' } }, forRequests: 1 });
    const question = { role: 'user' as const, content: 'Weather in Paris?' };
    const request = {
      model: 'claude-sonnet-4',
      tools: [weatherFunction],
      reasoning: { effort: 'low' as const, summary: 'auto' as const },
      include: ['reasoning.encrypted_content' as const],
      store: false,
    };
    const first = await openai.responses.create({ ...request, input: [question] });
    expect(bed.anthropic.requests.at(-1)!.json).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 1024 } });
    expect(first.output.map((item) => item.type)).toEqual(['reasoning', 'function_call']);
    const reasoning = first.output[0]!;
    if (reasoning.type !== 'reasoning') throw new Error('no reasoning item');
    expect(reasoning.summary).toEqual([{ type: 'summary_text', text: 'The user wants a short answer; nothing needs looking up.' }]);
    expect(reasoning.encrypted_content).toMatch(/^tollgate\.thinking\.v1\./);
    const call = first.output[1]!;
    if (call.type !== 'function_call') throw new Error('no function call');

    // The fake refuses a tool loop whose assistant turn lacks Anthropic's signed thinking (as Anthropic does).
    bed.anthropic.behave({ usage, text: 'It is sunny in Paris.' });
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' };
    const answer = await openai.responses.create({ ...request, input: [question, ...(first.output as OpenAI.Responses.ResponseInputItem[]), output] });
    expect(answer.output_text).toBe('It is sunny in Paris.');
    const assistant = (bed.anthropic.requests.at(-1)!.json as { messages: { role: string; content: { type: string }[] }[] }).messages[1]!;
    expect(assistant.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);

    // Without the thinking (a summary alone cannot be signed), Anthropic's refusal comes back as a 400.
    const stripped = await openai.responses.create({ ...request, input: [question, call, output] }).catch((e: unknown) => e);
    expect(stripped).toBeInstanceOf(OpenAI.BadRequestError);
    expect((stripped as Error).message).toContain('must start with a thinking block');
  });

  it('Responses on Claude, streamed and stored: the tool loop continues by previous_response_id with its thinking', async () => {
    bed.anthropic.behave({ usage, toolCall: { name: 'get_weather', arguments: { city: 'Paris' } }, forRequests: 1 });
    const request = { model: 'claude-sonnet-4', tools: [weatherFunction], reasoning: { effort: 'medium' as const, summary: 'detailed' as const } };
    const stream = await openai.responses.create({ ...request, input: 'Weather in Paris?', stream: true });
    const types: string[] = [];
    let summary = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.reasoning_summary_text.delta') summary += event.delta;
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(summary).toBe('The user wants a short answer; nothing needs looking up.');
    expect(types).toContain('response.reasoning_summary_part.added');
    expect(completed!.output.map((item) => item.type)).toEqual(['reasoning', 'function_call']);
    const call = completed!.output[1]!;
    if (call.type !== 'function_call') throw new Error('no function call');

    bed.anthropic.behave({ usage, text: 'It is sunny in Paris.' });
    const answer = await openai.responses.create({
      ...request,
      previous_response_id: completed!.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    expect(answer.output_text).toBe('It is sunny in Paris.');
    expect(answer.previous_response_id).toBe(completed!.id);
  });

  it('Responses on Gemini: effort becomes thinkingBudget and the thought summary a reasoning item', async () => {
    bed.vertex.behave({ usage, text: 'Paris is sunny.' });
    const response = await openai.responses.create({ model: 'gemini-2.5-flash', input: 'Weather?', reasoning: { effort: 'low', summary: 'auto' } });
    expect((bed.vertex.requests.at(-1)!.json as { generationConfig: unknown }).generationConfig).toEqual({ thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } });
    expect(response.output[0]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text', text: THOUGHT_SUMMARY }] });
    expect(response.output_text).toBe('Paris is sunny.');
    expect(response.usage?.output_tokens_details.reasoning_tokens).toBe(40);
  });

  it('Messages on Gemini: a thinking budget becomes thinkingBudget and the thoughts a thinking block', async () => {
    bed.vertex.behave({ usage, text: 'Paris is sunny.' });
    const stream = anthropic.messages.stream({
      model: 'gemini-2.5-flash',
      max_tokens: 4000,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [{ role: 'user', content: 'Weather?' }],
    });
    const message = await stream.finalMessage();
    expect((bed.vertex.requests.at(-1)!.json as { generationConfig: unknown }).generationConfig).toEqual({
      maxOutputTokens: 4000,
      thinkingConfig: { thinkingBudget: 2048, includeThoughts: true },
    });
    expect(message.content).toEqual([expect.objectContaining({ type: 'thinking', thinking: THOUGHT_SUMMARY }), expect.objectContaining({ type: 'text', text: 'Paris is sunny.' })]);
  });

  it('Messages on GPT: a thinking budget becomes the nearest reasoning effort', async () => {
    bed.openai.behave({ usage, text: 'Sunny.' });
    await anthropic.messages.create({ model: 'gpt-5', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 8000 }, messages: [{ role: 'user', content: 'Weather?' }] });
    expect(bed.openai.requests.at(-1)!.json).toMatchObject({ model: 'gpt-5', reasoning_effort: 'medium', max_completion_tokens: 4000 });
  });
});

describe('translated streams that fail upstream', () => {
  beforeEach(async () => {
    bed.reset();
    await setGateway({ anthropicRoute: 'gamma-direct', googleRoute: 'alpha' });
  });

  it('a Responses stream from Claude cut by an in-stream error raises an APIError after response.failed; the span says error', async () => {
    bed.anthropic.behave({ usage, streamError: true, chunkCount: 6 });
    const { data: stream, response } = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Hi', stream: true }).withResponse();
    const types: string[] = [];
    const error = await (async () => {
      for await (const event of stream) types.push(event.type);
      return null;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('upstream gamma-direct stream failed');
    expect(types).toContain('response.output_text.delta');
    expect(types.at(-1)).toBe('response.failed');
    expect(await spanOf(response.headers.get('x-proxy-span-id'))).toMatchObject({ route: 'gamma-direct', status: 'error' });
  });

  it('a Messages stream from Gemini that ends before its finishReason raises an APIError, never a clean end', async () => {
    bed.vertex.behave({ usage, truncateStream: true, chunkCount: 6 });
    const error = await anthropic.messages
      .stream({ model: 'gemini-2.5-flash', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] })
      .finalMessage()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as Error).message).toContain('stream ended before a finishReason');
  });
});

describe('Messages passed through to Claude', () => {
  beforeEach(() => bed.reset());

  it('keeps the betas where each platform reads them: the header on the Anthropic API, the body on Bedrock', async () => {
    const request = { model: 'claude-sonnet-4', max_tokens: 50, messages: [{ role: 'user' as const, content: 'Hi' }], betas: ['interleaved-thinking-2025-05-14'] };
    await setGateway({ anthropicRoute: 'gamma-direct' });
    await anthropic.beta.messages.create(request);
    expect(bed.anthropic.requests.at(-1)!.headers['anthropic-beta']).toBe('interleaved-thinking-2025-05-14');
    await setGateway({ anthropicRoute: 'gamma-cloudb' });
    bed.bedrock.behave({ usage, text: 'Hello.' });
    const stream = anthropic.beta.messages.stream({ ...request, thinking: { type: 'enabled', budget_tokens: 1024 }, max_tokens: 2048 });
    const message = await stream.finalMessage();
    await setGateway({ anthropicRoute: 'gamma-direct' });
    expect(message.content.map((block) => block.type)).toEqual(['thinking', 'text']);
    const sent = bed.bedrock.requests.at(-1)!;
    expect(sent.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream');
    expect(sent.json).toMatchObject({
      anthropic_version: 'bedrock-2023-05-31',
      anthropic_beta: ['interleaved-thinking-2025-05-14'],
      thinking: { type: 'enabled', budget_tokens: 1024 },
    });
    expect(sent.json).not.toHaveProperty('model');
    expect(sent.json).not.toHaveProperty('stream');
  });

  it("a Bedrock stream that fails mid-way ends with Anthropic's error event, which the SDK raises", async () => {
    await setGateway({ anthropicRoute: 'gamma-cloudb' });
    bed.bedrock.behave({ usage, streamError: true, chunkCount: 6 });
    const error = await anthropic.messages
      .stream({ model: 'claude-sonnet-4', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] })
      .finalMessage()
      .catch((e: unknown) => e);
    await setGateway({ anthropicRoute: 'gamma-direct' });
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as Error).message).toContain('upstream gamma-cloudb stream failed');
  });
});

describe('refusals', () => {
  beforeEach(() => bed.reset());

  it('previous_response_id: an id Tollgate did not keep is a 400 naming it; store: false keeps nothing', async () => {
    const unknown = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Hi', previous_response_id: 'resp_not_made_here' }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect((unknown as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('previous_response_id');
    const unstored = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Hi', store: false });
    const again = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Again', previous_response_id: unstored.id }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bed.anthropic.requests).toHaveLength(1);
  });

  it("a conversation stored for one user is not another's", async () => {
    const first = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Hi' });
    const other = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'mallory' } });
    const stolen = await other.responses.create({ model: 'claude-sonnet-4', input: 'Go on', previous_response_id: first.id }).catch((e: unknown) => e);
    expect(stolen).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('a Responses parameter a provider cannot honour is a 400 naming it, and nothing reaches the provider', async () => {
    const error = await openai.responses.create({ model: 'gemini-2.5-flash', input: 'Hi', tools: [{ type: 'web_search' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools[0].type');
    expect(bed.vertex.requests).toHaveLength(0);
  });

  it("a chat-level refusal names the caller's own field (input[0], not messages[0])", async () => {
    await setGateway({ anthropicRoute: 'gamma-cloudb' });
    const error = await openai.responses
      .create({ model: 'claude-sonnet-4', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/cat.png', detail: 'auto' }] }] })
      .catch((e: unknown) => e);
    await setGateway({ anthropicRoute: 'gamma-direct' });
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('input[0].content[0].image_url.url');
    expect(bed.bedrock.requests).toHaveLength(0);
  });

  it('a Messages server tool is a 400 in the Anthropic shape; an unknown model a 404', async () => {
    const error = await anthropic.messages
      .create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect((error as Error).message).toContain('tools[0].type');
    const missing = await anthropic.messages.create({ model: 'no-such-model-9', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("a spent budget is a 429 in each API's own shape: RateLimitError in both SDKs, nothing upstream", async () => {
    const erin = { 'x-tollgate-user': 'erin' };
    // One priced call spends erin's tiny budget (0.0001 USD). It is admitted: while it runs it holds max_tokens
    // 1 × 15 USD per million = 0.000015 plus its input estimated from its body (a few dozen bytes at four a
    // token × 3 per million, under 0.00006; ADR 1308); it then costs far more than the limit.
    bed.anthropic.behave({ usage });
    await anthropic.messages.create({ model: 'claude-sonnet-4', max_tokens: 1, messages: [{ role: 'user', content: 'Hi' }] }, { headers: erin });
    bed.reset();
    const viaResponses = await openai.responses.create({ model: 'claude-sonnet-4', input: 'Hi' }, { headers: erin }).catch((e: unknown) => e);
    expect(viaResponses).toBeInstanceOf(OpenAI.RateLimitError);
    expect((viaResponses as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('budget_exceeded');
    const viaMessages = await anthropic.messages
      .create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }, { headers: erin })
      .catch((e: unknown) => e);
    expect(viaMessages).toBeInstanceOf(Anthropic.RateLimitError);
    expect((viaMessages as Error).message).toContain('budget_exceeded');
    expect(bed.anthropic.requests).toHaveLength(0);
    expect(bed.openai.requests).toHaveLength(0);
  });
});
