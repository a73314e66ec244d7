// Coding agents through Tollgate, called the way they call: the official SDKs, unmodified, pointed at a real
// `tollgate proxy` with the base URLs docs/clients.md gives. Claude Code's calls (the Anthropic SDK's Messages
// with tools and thinking, streamed and not) on the Anthropic API, Vertex AI and Bedrock routes; the OpenAI
// Codex CLI's (the OpenAI SDK's Responses API, streamed). Each span is costed from the usage the provider
// reported, with expected costs worked out by hand from the price table.

import Anthropic from '@anthropic-ai/sdk';
import { AnthropicBedrock } from '@anthropic-ai/bedrock-sdk';
import { AnthropicVertex } from '@anthropic-ai/vertex-sdk';
import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

/** What Claude Code sends: a system prompt, tools, thinking with a budget, a user turn. */
function claudeCodeRequest(model: string) {
  return {
    model,
    max_tokens: 8192,
    system: 'You are Claude Code, an interactive CLI tool.',
    thinking: { type: 'enabled' as const, budget_tokens: 2048 },
    tools: [weatherTool],
    messages: [{ role: 'user' as const, content: 'What is the weather in Lisbon?' }],
  };
}

// The fake reports, in Anthropic's fields: input_tokens 1200, cache_creation_input_tokens 1000 (5-minute),
// cache_read_input_tokens 2000, output_tokens 300 + 180 thinking = 480.
const CLAUDE_USAGE = { input: 1200, output: 300, reasoning: 180, cacheRead: 2000, cacheWrite: 1000 };
// claude-sonnet-4-6 (and 4-5) at 3 / 3.75 (5-minute write) / 0.30 (read) / 15 per million:
// 1200 × 3 + 1000 × 3.75 + 2000 × 0.30 + 480 × 15 = 3600 + 3750 + 600 + 7200 = 15150 µ$.
const CLAUDE_COST = 0.01515;

function expectClaudeSpan(span: Awaited<ReturnType<typeof findSpan>>, route: string, model: string) {
  expect(span).toMatchObject({
    route,
    provider: 'anthropic',
    model,
    status: 'ok',
    input_tokens: 4200,
    output_tokens: 480,
    cached_tokens: 2000,
    cache_write_tokens: 1000,
    cost_usd: CLAUDE_COST,
    priced: true,
    user_id: 'alice',
  });
}

describe('Claude Code: the Anthropic SDK with tools and thinking', () => {
  it('on the Anthropic API route (ANTHROPIC_BASE_URL), streamed', async () => {
    bed.anthropic.behave({ usage: CLAUDE_USAGE, toolCall: { name: 'get_weather', arguments: { city: 'Lisbon' } } });
    const client = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, authToken: 'unused', maxRetries: 0 });
    const requestId = randomUUID();
    const stream = client.messages.stream(claudeCodeRequest('claude-sonnet-4-6'), { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'alice' } });
    const message = await stream.finalMessage();
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    expect(message.content[1]).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: 'Lisbon' } });
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage).toMatchObject({ input_tokens: 1200, output_tokens: 480, cache_read_input_tokens: 2000 });
    expectClaudeSpan(await findSpan(proxy.url, { requestId }), 'gamma-direct', 'claude-sonnet-4-6');
    // What reached Anthropic: Tollgate's key, not the caller's token, and the body as the SDK sent it.
    const sent = bed.anthropic.requests.at(-1)!;
    expect(sent.headers['x-api-key']).toBe('sk-ant-proxy-key');
    expect(sent.headers.authorization).toBeUndefined();
    expect(sent.json).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 2048 }, tools: [{ name: 'get_weather' }], stream: true });
  });

  it('on the Anthropic API route, not streamed', async () => {
    bed.anthropic.behave({ usage: CLAUDE_USAGE, text: 'It is sunny in Lisbon.' });
    const client = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0 });
    const requestId = randomUUID();
    const message = await client.messages.create(claudeCodeRequest('claude-sonnet-4-5-20250929'), { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'alice' } });
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(message.content[1]).toMatchObject({ text: 'It is sunny in Lisbon.' });
    expectClaudeSpan(await findSpan(proxy.url, { requestId }), 'gamma-direct', 'claude-sonnet-4-5-20250929');
  });

  it("on Vertex AI in Claude Code's Vertex mode (ANTHROPIC_VERTEX_BASE_URL, CLAUDE_CODE_SKIP_VERTEX_AUTH)", async () => {
    bed.vertex.behave({ usage: CLAUDE_USAGE, toolCall: { name: 'get_weather', arguments: { city: 'Lisbon' } } });
    // CLAUDE_CODE_SKIP_VERTEX_AUTH: the SDK gets no Google credentials and sends no token; Tollgate attaches ADC.
    const noGoogleCredentials = { projectId: PROJECT, getRequestHeaders: async () => new Headers() };
    const client = new AnthropicVertex({
      baseURL: `${proxy.url}/proxy/gamma-cloud/v1`,
      region: 'us-east5',
      projectId: PROJECT,
      authClient: noGoogleCredentials as never,
      maxRetries: 0,
    });
    const requestId = randomUUID();
    const stream = client.messages.stream(claudeCodeRequest('claude-sonnet-4-6'), { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'alice' } });
    const message = await stream.finalMessage();
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    expectClaudeSpan(await findSpan(proxy.url, { requestId }), 'gamma-cloud', 'claude-sonnet-4-6');
    expect(bed.vertex.requests.at(-1)!.path).toBe(`/v1/projects/${PROJECT}/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-6:streamRawPredict`);
  });

  it("on Bedrock in Claude Code's Bedrock mode (ANTHROPIC_BEDROCK_BASE_URL, CLAUDE_CODE_SKIP_BEDROCK_AUTH)", async () => {
    bed.bedrock.behave({ usage: CLAUDE_USAGE, text: 'It is sunny in Lisbon.' });
    const client = new AnthropicBedrock({ baseURL: `${proxy.url}/proxy/gamma-cloudb`, awsRegion: 'us-east-1', skipAuth: true, maxRetries: 0 });
    const requestId = randomUUID();
    const stream = client.messages.stream(claudeCodeRequest('us.anthropic.claude-sonnet-4-6-v1'), { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'alice' } });
    const message = await stream.finalMessage();
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const span = await findSpan(proxy.url, { requestId });
    expect(span).toMatchObject({ route: 'gamma-cloudb', model: 'us.anthropic.claude-sonnet-4-6-v1', cost_usd: CLAUDE_COST, priced: true, status: 'ok' });
  });
});

// The fake reports, in the Responses API's fields: input_tokens 3000 + 1000 cached = 4000,
// input_tokens_details.cached_tokens 1000, output_tokens 400 + 600 reasoning = 1000, reasoning_tokens 600.
const CODEX_USAGE = { input: 3000, cacheRead: 1000, output: 400, reasoning: 600 };
// gpt-5-codex is priced as gpt-5, 1.25 / 0.125 (cached) / 10 per million:
// (4000 − 1000) × 1.25 + 1000 × 0.125 + 1000 × 10 = 3750 + 125 + 10000 = 13875 µ$.
const CODEX_COST = 0.013875;

describe('OpenAI Codex CLI: the Responses API through /proxy/beta (OPENAI_BASE_URL)', () => {
  const codexRequest = {
    model: 'gpt-5-codex',
    instructions: 'You are Codex, a coding agent.',
    input: [{ role: 'user' as const, content: 'List the files in this repository.' }],
    tools: [
      {
        type: 'function' as const,
        name: 'shell',
        description: 'Run a command',
        strict: false,
        parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } } },
      },
    ],
    reasoning: { effort: 'medium' as const },
    store: false,
  };

  it('streams, and the span is costed from response.completed', async () => {
    bed.openai.behave({ usage: CODEX_USAGE, toolCall: { name: 'shell', arguments: { command: ['ls'] } } });
    const client = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0 });
    const requestId = randomUUID();
    const stream = await client.responses.create({ ...codexRequest, stream: true }, { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'bob' } });
    const types: string[] = [];
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.function_call_arguments.delta');
    expect(types.at(-1)).toBe('response.completed');
    expect(completed?.output.at(-1)).toMatchObject({ type: 'function_call', name: 'shell', arguments: '{"command":["ls"]}' });
    expect(completed?.usage).toMatchObject({ input_tokens: 4000, output_tokens: 1000 });
    expect(await findSpan(proxy.url, { requestId })).toMatchObject({
      route: 'beta',
      provider: 'openai',
      model: 'gpt-5-codex',
      status: 'ok',
      input_tokens: 4000,
      output_tokens: 1000,
      cached_tokens: 1000,
      reasoning_tokens: 600,
      cost_usd: CODEX_COST,
      priced: true,
      user_id: 'bob',
    });
    // Forwarded as sent: no stream_options.include_usage (the Responses API refuses it), Tollgate's own key.
    const sent = bed.openai.requests.at(-1)!;
    expect(sent.path).toBe('/v1/responses');
    expect(sent.json).not.toHaveProperty('stream_options');
    expect(sent.headers.authorization).toBe('Bearer sk-openai-proxy-key');
  });

  it('answers without streaming too', async () => {
    bed.openai.behave({ usage: CODEX_USAGE, text: 'README.md package.json' });
    const client = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0 });
    const requestId = randomUUID();
    const response = await client.responses.create(codexRequest, { headers: { 'x-request-id': requestId } });
    expect(response.output_text).toBe('README.md package.json');
    expect(await findSpan(proxy.url, { requestId })).toMatchObject({ model: 'gpt-5-codex', cost_usd: CODEX_COST, reasoning_tokens: 600 });
  });
});

// The same clients through /v1 with another provider's model behind them: the gateway translates the
// Responses API (Codex) and the Messages API (Claude Code), docs/clients.md's recipes.
describe('OpenAI Codex CLI with Claude or Gemini behind it (/v1/responses)', () => {
  /** What Codex sends for a model family it does not know: function tools, one call at a time, nothing stored. */
  const codexOn = (model: string) => ({
    model,
    instructions: 'You are Codex, a coding agent.',
    tools: [
      {
        type: 'function' as const,
        name: 'shell',
        description: 'Run a command',
        strict: false,
        parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] },
      },
    ],
    tool_choice: 'auto' as const,
    parallel_tool_calls: false,
    reasoning: { effort: 'medium' as const, summary: 'auto' as const },
    store: false,
    include: ['reasoning.encrypted_content' as const],
    prompt_cache_key: 'a1b2c3',
    stream: true as const,
  });

  /** One Codex turn: the streamed events, the completed response. */
  async function codexTurn(client: OpenAI, body: ReturnType<typeof codexOn> & { input: OpenAI.Responses.ResponseInput }, requestId: string) {
    const stream = await client.responses.create(body, { headers: { 'x-request-id': requestId, 'x-tollgate-user': 'bob' } });
    let completed: OpenAI.Responses.Response | undefined;
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types[0]).toBe('response.created');
    return completed!;
  }

  it.each([
    // claude-sonnet-4-6 on the Anthropic API: CLAUDE_COST, worked out above.
    { model: 'claude-sonnet-4-6', fake: () => bed.anthropic, route: 'gamma-direct', provider: 'anthropic', usage: CLAUDE_USAGE, cost: CLAUDE_COST, input: 4200 },
    // gemini-2.5-flash (0.3 / cached 0.03 / 2.5) with Codex's usage: 3000 × 0.3 + 1000 × 0.03 + 1000 × 2.5 = 900 + 30 + 2500 = 3430 µ$.
    { model: 'gemini-2.5-flash', fake: () => bed.vertex, route: 'alpha', provider: 'google', usage: CODEX_USAGE, cost: 0.00343, input: 4000 },
  ])('$model: a shell call round trip, streamed, each turn costed', async ({ model, fake, route, provider, usage, cost, input }) => {
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    fake().behave({ usage, toolCall: { name: 'shell', arguments: { command: ['ls'] } }, forRequests: 1 });
    const question = { role: 'user' as const, content: 'List the files in this repository.' };
    const firstId = randomUUID();
    const first = await codexTurn(client, { ...codexOn(model), input: [question] }, firstId);
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toMatchObject({ name: 'shell', arguments: '{"command":["ls"]}' });
    if (call?.type !== 'function_call') throw new Error('no function call');
    expect(await findSpan(proxy.url, { requestId: firstId })).toMatchObject({
      route,
      provider,
      model,
      status: 'ok',
      input_tokens: input,
      cost_usd: cost,
      priced: true,
      user_id: 'bob',
    });

    // Codex sends the whole conversation back (store: false), the reasoning items with their encrypted content.
    fake().behave({ usage, text: 'README.md package.json' });
    const secondId = randomUUID();
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'README.md\npackage.json' };
    const second = await codexTurn(client, { ...codexOn(model), input: [question, ...(first.output as OpenAI.Responses.ResponseInputItem[]), output] }, secondId);
    expect(second.output.at(-1)).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: 'README.md package.json' }] });
    expect(await findSpan(proxy.url, { requestId: secondId })).toMatchObject({ route, status: 'ok', cost_usd: cost });
  });
});

describe('Claude Code with GPT or Gemini behind it (/v1/messages)', () => {
  /** What Claude Code sends, through the SDK's beta Messages (`?beta=true`): cached system blocks, tools, thinking, the user in metadata, its betas. */
  const claudeCodeOn = (model: string) => ({
    model,
    betas: ['claude-code-20250219', 'interleaved-thinking-2025-05-14'],
    max_tokens: 32000,
    system: [{ type: 'text' as const, text: 'You are Claude Code, an interactive CLI tool.', cache_control: { type: 'ephemeral' as const } }],
    thinking: { type: 'enabled' as const, budget_tokens: 2048 },
    tools: [weatherTool],
    metadata: { user_id: 'user_abc_account_def_session_ghi' },
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'What is the weather in Lisbon?', cache_control: { type: 'ephemeral' as const } }] }],
  });
  const headers = { 'x-tollgate-user': 'alice' };

  it.each([
    // gpt-5 (1.25 / cached 0.125 / 10) with Claude Code's usage in OpenAI's fields (no cache writes there):
    // 1200 × 1.25 + 2000 × 0.125 + 480 × 10 = 1500 + 250 + 4800 = 6550 µ$.
    { model: 'gpt-5', fake: () => bed.openai, route: 'beta', cost: 0.00655 },
    // gemini-2.5-flash (0.3 / cached 0.03 / 2.5): 1200 × 0.3 + 2000 × 0.03 + 480 × 2.5 = 360 + 60 + 1200 = 1620 µ$.
    { model: 'gemini-2.5-flash', fake: () => bed.vertex, route: 'alpha', cost: 0.00162 },
  ])('$model: a tool round trip streamed, each turn costed', async ({ model, fake, route, cost }) => {
    const client = new Anthropic({ baseURL: proxy.url, authToken: 'unused', maxRetries: 0 });
    fake().behave({ usage: CLAUDE_USAGE, toolCall: { name: 'get_weather', arguments: { city: 'Lisbon' } }, forRequests: 1 });
    const firstId = randomUUID();
    const message = await client.beta.messages.stream(claudeCodeOn(model), { headers: { ...headers, 'x-request-id': firstId } }).finalMessage();
    const use = message.content.find((block) => block.type === 'tool_use');
    expect(use).toMatchObject({ name: 'get_weather', input: { city: 'Lisbon' } });
    expect(message.stop_reason).toBe('tool_use');
    if (use?.type !== 'tool_use') throw new Error('no tool_use');
    expect(await findSpan(proxy.url, { requestId: firstId })).toMatchObject({
      route,
      model,
      status: 'ok',
      input_tokens: 3200,
      output_tokens: 480,
      cost_usd: cost,
      user_id: 'alice',
    });
    // Anthropic's betas and cache breakpoints are not another provider's.
    const sent = fake().requests.at(-1)!;
    expect(sent.headers['anthropic-beta']).toBeUndefined();
    expect(JSON.stringify(sent.json)).not.toContain('cache_control');

    fake().behave({ usage: CLAUDE_USAGE, text: 'It is sunny in Lisbon.' });
    const secondId = randomUUID();
    const request = claudeCodeOn(model);
    const answer = await client.beta.messages
      .stream(
        {
          ...request,
          messages: [
            ...request.messages,
            { role: 'assistant', content: message.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 24 °C' }] },
          ],
        },
        { headers: { ...headers, 'x-request-id': secondId } },
      )
      .finalMessage();
    expect(answer.content.find((block) => block.type === 'text')).toMatchObject({ text: 'It is sunny in Lisbon.' });
    expect(await findSpan(proxy.url, { requestId: secondId })).toMatchObject({ route, status: 'ok', cost_usd: cost });
  });
});
