// Tool calls on the span (ADR 1603), end to end: a real `tollgate proxy` process with provenance on, the fake
// Tetragon agent, and the fake providers answering with a tool call. Each span from /_local/api/traces names
// the call the caller received (its id, the one the caller's tool result will echo), streamed and not, on the
// OpenAI route, the Anthropic route and /v1 translated from Anthropic and from Gemini; without provenance no span
// has them.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeTetragonAgent, startFakeTetragonAgent } from '../fakes/tetragon-agent.ts';
import { findSpan } from '../support/spans.ts';
import { type ProxyProcess, startProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

// The fakes send the arguments {"city":"Paris"}: printf '%s' '{"city":"Paris"}' | sha256sum
const PARIS = '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d';
const TOOL_CALL = { name: 'get_weather', arguments: { city: 'Paris' } };
const POD_ENV = { TOLLGATE_POD_NAME: 'web-1', TOLLGATE_POD_NAMESPACE: 'team-a' };

const weatherTool: ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const claudeWeatherTool = { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } };
const question = { role: 'user' as const, content: 'Weather in Paris?' };

let bed: UpstreamBed;

beforeAll(async () => {
  bed = await startUpstreamBed();
});

afterAll(async () => {
  await bed?.close();
});

beforeEach(() => {
  bed.reset();
});

/** Reads an OpenAI chat stream to its end; the id of its tool call. */
async function streamedCallId(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>): Promise<string> {
  let id = '';
  for await (const chunk of stream) for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) id ||= tc.id ?? '';
  return id;
}

describe('tool calls on the span, provenance on', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let proxy: ProxyProcess;
  let openai: OpenAI;
  let v1: OpenAI;
  let claude: Anthropic;

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    proxy = await startProxyProcess({
      configYaml: bed.configYaml(`
gateway:
  anthropicRoute: gamma-direct
  googleRoute: alpha
provenance:
  address: "${agent.address}"
  attributionWindowMs: 50
`),
      env: { ...bed.env, ...POD_ENV },
    });
    await agent.waitForSubscribers(1);
    openai = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0 });
    v1 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    claude = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0 });
  });

  afterAll(async () => {
    await proxy?.stop();
    await agent?.stop();
  });

  it('OpenAI chat: the call the caller received, whole and streamed, hashed alike', async () => {
    bed.openai.behave({ toolCall: TOOL_CALL });
    const { data, response } = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [question], tools: [weatherTool] }).withResponse();
    const id = data.choices[0]!.message.tool_calls![0]!.id;
    expect((await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([{ id, name: 'get_weather', arguments_sha256: PARIS }]);

    const streamed = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [question], tools: [weatherTool], stream: true }).withResponse();
    const streamedId = await streamedCallId(streamed.data);
    expect(streamedId).toMatch(/^call_/);
    expect((await findSpan(proxy.url, { spanId: streamed.response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: streamedId, name: 'get_weather', arguments_sha256: PARIS },
    ]);
  });

  it('Anthropic Messages: the tool_use block, whole and streamed', async () => {
    bed.anthropic.behave({ toolCall: TOOL_CALL });
    const { data, response } = await claude.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 256, tools: [claudeWeatherTool], messages: [question] }).withResponse();
    const use = data.content.find((b) => b.type === 'tool_use')!;
    expect((await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([{ id: use.id, name: 'get_weather', arguments_sha256: PARIS }]);

    const stream = claude.messages.stream({ model: 'claude-sonnet-4-6', max_tokens: 256, tools: [claudeWeatherTool], messages: [question] });
    const final = await stream.finalMessage();
    const streamedUse = final.content.find((b) => b.type === 'tool_use')!;
    const { response: streamedResponse } = await stream.withResponse();
    expect((await findSpan(proxy.url, { spanId: streamedResponse.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: streamedUse.id, name: 'get_weather', arguments_sha256: PARIS },
    ]);
  });

  it('/v1 translated from Anthropic: the call as the caller received it in chat form, whole and streamed', async () => {
    bed.anthropic.behave({ toolCall: TOOL_CALL });
    const { data, response } = await v1.chat.completions.create({ model: 'claude-sonnet-4', messages: [question], tools: [weatherTool] }).withResponse();
    const id = data.choices[0]!.message.tool_calls![0]!.id;
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') });
    expect(span.route).toBe('gamma-direct');
    expect(span.tool_calls).toEqual([{ id, name: 'get_weather', arguments_sha256: PARIS }]);

    const streamed = await v1.chat.completions.create({ model: 'claude-sonnet-4', messages: [question], tools: [weatherTool], stream: true }).withResponse();
    const streamedId = await streamedCallId(streamed.data);
    expect(streamedId).not.toBe('');
    expect((await findSpan(proxy.url, { spanId: streamed.response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: streamedId, name: 'get_weather', arguments_sha256: PARIS },
    ]);
  });

  it('/v1 translated from Gemini: the id the translation made up for the caller, though Gemini sent none', async () => {
    bed.vertex.behave({ toolCall: TOOL_CALL });
    const { data, response } = await v1.chat.completions.create({ model: 'gemini-2.5-flash', messages: [question], tools: [weatherTool] }).withResponse();
    const id = data.choices[0]!.message.tool_calls![0]!.id;
    expect(id).toMatch(/^call_/);
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') });
    expect(span.route).toBe('alpha');
    expect(span.tool_calls).toEqual([{ id, name: 'get_weather', arguments_sha256: PARIS }]);

    const streamed = await v1.chat.completions.create({ model: 'gemini-2.5-flash', messages: [question], tools: [weatherTool], stream: true }).withResponse();
    const streamedId = await streamedCallId(streamed.data);
    expect(streamedId).toMatch(/^call_/);
    expect((await findSpan(proxy.url, { spanId: streamed.response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: streamedId, name: 'get_weather', arguments_sha256: PARIS },
    ]);
  });

  it('/v1/responses translated from Anthropic: the function_call item by its call_id, whole and streamed', async () => {
    bed.anthropic.behave({ toolCall: TOOL_CALL });
    const fn = { type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false };
    const { data, response } = await v1.responses.create({ model: 'claude-sonnet-4', input: [question], tools: [fn] }).withResponse();
    const item = data.output.find((o) => o.type === 'function_call');
    if (item?.type !== 'function_call') throw new Error('no function call in the answer');
    expect((await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: item.call_id, name: 'get_weather', arguments_sha256: PARIS },
    ]);

    const streamed = await v1.responses.create({ model: 'claude-sonnet-4', input: [question], tools: [fn], stream: true }).withResponse();
    let callId = '';
    for await (const event of streamed.data) if (event.type === 'response.output_item.done' && event.item.type === 'function_call') callId = event.item.call_id;
    expect(callId).not.toBe('');
    expect((await findSpan(proxy.url, { spanId: streamed.response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([
      { id: callId, name: 'get_weather', arguments_sha256: PARIS },
    ]);
  });

  it('an answer without tool calls has an empty list', async () => {
    bed.openai.behave({ text: 'Sunny.' });
    const { response } = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [question] }).withResponse();
    expect((await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') })).tool_calls).toEqual([]);
  });
});

describe('tool calls on the span, provenance off', { timeout: 60_000 }, () => {
  let proxy: ProxyProcess;

  beforeAll(async () => {
    proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
  });

  afterAll(async () => {
    await proxy?.stop();
  });

  it('shows no tool_calls (nor process) on the span of an answer that asked for one', async () => {
    bed.openai.behave({ toolCall: TOOL_CALL });
    const openai = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0 });
    const { data, response } = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [question], tools: [weatherTool] }).withResponse();
    expect(data.choices[0]!.message.tool_calls).toHaveLength(1);
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id') });
    expect(span).not.toHaveProperty('tool_calls');
    expect(span).not.toHaveProperty('process');
  });
});
