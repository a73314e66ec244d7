// The calls SDKs make that no provider bills (ADR 0912), as their users meet them: the official `openai` SDK's
// `moderations.create` and `responses.inputTokens.count`, the `@anthropic-ai/sdk`'s `messages.countTokens` on a
// Claude model on each of its routes (the Anthropic API, Vertex AI, Bedrock's CountTokens) and natively on the
// Anthropic API, and the Google Gen AI SDK's `models.embedContent` (which is billed) through the native Vertex AI
// route. Each fake checks what it receives in its own wire format; each span is read back: a free call is
// priced at 0 and charges no budget, the embedding is costed from the tokens the answer reported.

import Anthropic, { toFile as anthropicFile } from '@anthropic-ai/sdk';
import { BedrockRuntimeClient, CountTokensCommand } from '@aws-sdk/client-bedrock-runtime';
import { GoogleGenAI } from '@google/genai';
import { OAuth2Client } from 'google-auth-library';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { ANTHROPIC_KEY, AWS, OPENAI_KEY, PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

const SONNET_ON = {
  'gamma-direct': 'claude-sonnet-4-5-20250929',
  gamma: 'claude-sonnet-4-5@20250929',
  'gamma-cloudb': 'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
} as const;

beforeAll(async () => {
  bed = await startUpstreamBed();
  // A budget alice could not spend a cent of: free calls still go through and leave it untouched.
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`routes:
  - name: compatible
    format: openai-chat
    baseUrl: "${bed.openai.url}"
    credential: { kind: api-key, env: COMPATIBLE_API_KEY }
models:
  sonnet-direct: { targets: [{ route: gamma-direct, model: ${SONNET_ON['gamma-direct']} }] }
  sonnet-vertex: { targets: [{ route: gamma, model: "${SONNET_ON.gamma}" }] }
  sonnet-bedrock: { targets: [{ route: gamma-cloudb, model: "${SONNET_ON['gamma-cloudb']}" }] }
pricing:
  models:
    - { provider: google, model: gemini-embedding-2, input_per_million: 0.2, output_per_million: 0 }
    - { provider: compatible, model: mistral-moderation-latest, input_per_million: 50, output_per_million: 0 }
budgets:
  policies:
    - { name: default, users: ["*"], limitUsd: 0.000001, period: month, timeZone: UTC, enforcement: block }
`),
    env: { ...bed.env, COMPATIBLE_API_KEY: OPENAI_KEY },
  });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

const ALICE = { 'x-tollgate-user': 'alice' };

function spanOf(spanId: string | null): Promise<SpanJson> {
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId });
}

/** A call that cost nothing: priced (its model has a price entry), 0 USD, answered. */
function expectFreeSpan(span: SpanJson, expected: { name: string; route: string; provider: string; model: string }): void {
  expect(span).toMatchObject({ ...expected, user_id: 'alice', status: 'ok', status_code: 200, cost_usd: 0, priced: true, unmetered: false });
}

async function aliceSpent(): Promise<number> {
  return ((await (await fetch(`${proxy.url}/_local/api/budgets/alice`)).json()) as { spent_usd: number }).spent_usd;
}

describe("moderation with the openai SDK's moderations.create", () => {
  it("through /v1 with no model: OpenAI's default model, flagged as OpenAI flags it, free", async () => {
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await openai.moderations.create({ input: 'We attack at dawn.' }).withResponse();
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.path).toBe('/v1/moderations');
    expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(seen.json).toEqual({ input: 'We attack at dawn.', model: 'omni-moderation-latest' });
    expect(data.model).toBe('omni-moderation-2024-09-26');
    expect(data.results).toHaveLength(1);
    expect(data.results[0]).toMatchObject({ flagged: true, categories: { violence: true, hate: false } });
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), {
      name: 'moderation omni-moderation-latest',
      route: 'beta',
      provider: 'openai',
      model: 'omni-moderation-latest',
    });
    expect(await aliceSpent()).toBe(0);
  });

  it('natively through /proxy/beta, several texts: forwarded as sent, free', async () => {
    const openai = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await openai.moderations.create({ model: 'text-moderation-latest', input: ['Good morning.', 'An attack on the castle.'] }).withResponse();
    expect(bed.openai.requests.at(-1)!.json).toEqual({ model: 'text-moderation-latest', input: ['Good morning.', 'An attack on the castle.'] });
    expect(data.results.map((result) => result.flagged)).toEqual([false, true]);
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), {
      name: 'moderation text-moderation-latest',
      route: 'beta',
      provider: 'openai',
      model: 'text-moderation-latest',
    });
    expect(await aliceSpent()).toBe(0);
  });

  it("through /v1 on a configured OpenAI-compatible route: passed through with the route's model id", async () => {
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await openai.moderations.create({ model: 'compatible/omni-moderation-latest', input: 'hello' }).withResponse();
    expect(bed.openai.requests.at(-1)!.json).toEqual({ model: 'omni-moderation-latest', input: 'hello' });
    expect(data.results[0]!.flagged).toBe(false);
    // The configured route's provider has no price entry for it: recorded as unpriced, at 0.
    expect(await spanOf(response.headers.get('x-proxy-span-id'))).toMatchObject({ route: 'compatible', provider: 'compatible', status: 'ok', cost_usd: 0, priced: false });
  });

  it('on a configured route whose price entry bills moderation: held to the budget like any billed call, refused with nothing sent', async () => {
    // Mistral bills its moderation model by the token; priced so here at 50 USD per million input tokens, one
    // reservation of the request's few tokens (over 0.0001 USD) does not fit alice's 0.000001 USD.
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const error = await openai.moderations.create({ model: 'compatible/mistral-moderation-latest', input: 'hello' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error).toMatchObject({ status: 429, code: 'budget_exceeded' });
    expect(bed.openai.requests).toHaveLength(0);
    expect(await aliceSpent()).toBe(0);
  });

  it('for a model whose provider has no moderation API: 400 unsupported_operation naming the model and provider, nothing sent', async () => {
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const error = await openai.moderations.create({ model: 'claude-sonnet-4-5', input: 'hello' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const refused = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(refused).toMatchObject({ status: 400, code: 'unsupported_operation', param: 'model' });
    expect(refused.message).toContain('model claude-sonnet-4-5 (provider anthropic) cannot moderate');
    for (const fake of [bed.openai, bed.anthropic, bed.vertex, bed.bedrock]) expect(fake.requests).toHaveLength(0);
    expect(await spanOf(refused.headers.get('x-proxy-span-id'))).toMatchObject({ status: 'rejected', route: 'gamma-direct', cost_usd: 0 });
  });
});

describe("a file upload with the openai SDK's files.create through /proxy/beta", () => {
  it('is free: the form is forwarded as it came, with the proxy key, and charges nothing', async () => {
    const openai = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const pdf = Buffer.from('%PDF-1.4 quarterly notes');
    const { data, response } = await openai.files.create({ file: await toFile(pdf, 'notes.pdf'), purpose: 'user_data' }).withResponse();
    expect(data).toMatchObject({ object: 'file', filename: 'notes.pdf', purpose: 'user_data', bytes: pdf.length });
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.path).toBe('/v1/files');
    expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(seen.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(seen.body.includes(pdf)).toBe(true);
    const span = await spanOf(response.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({ route: 'beta', provider: 'openai', user_id: 'alice', status: 'ok', status_code: 200, cost_usd: 0, unmetered: false });
    expect(await aliceSpent()).toBe(0);
  });
});

describe("a file upload with the anthropic SDK's beta.files.upload through /proxy/gamma-direct", () => {
  it('is free: the form is forwarded as it came, with the proxy key, and charges nothing', async () => {
    const anthropic = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const text = Buffer.from('Quarterly notes: revenue up.');
    const { data, response } = await anthropic.beta.files.upload({ file: await anthropicFile(text, 'notes.txt', { type: 'text/plain' }) }).withResponse();
    expect(data).toMatchObject({ type: 'file', filename: 'notes.txt', mime_type: 'text/plain', size_bytes: text.length });
    const seen = bed.anthropic.requests.at(-1)!;
    expect(seen.path).toBe('/v1/files');
    expect(seen.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(seen.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(seen.body.includes(text)).toBe(true);
    const span = await spanOf(response.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({ route: 'gamma-direct', provider: 'anthropic', user_id: 'alice', status: 'ok', status_code: 200, cost_usd: 0, unmetered: false });
    expect(await aliceSpent()).toBe(0);
  });
});

describe("the anthropic SDK's messages.countTokens on every Claude route", () => {
  // The fakes count as Anthropic does: input, cache reads and cache writes, 1200 + 500 + 80 = 1780.
  const usage = { input: 1200, output: 300, cacheRead: 500, cacheWrite: 80 };
  const request = {
    system: 'You are terse.',
    messages: [{ role: 'user' as const, content: 'How many tokens is this?' }],
  };

  it.each([
    ['the Anthropic API', 'sonnet-direct', 'gamma-direct', SONNET_ON['gamma-direct']],
    ['Vertex AI', 'sonnet-vertex', 'gamma', SONNET_ON.gamma],
    // CountTokens takes the foundation model, not the inference profile the alias names.
    ['Bedrock', 'sonnet-bedrock', 'gamma-cloudb', 'anthropic.claude-sonnet-4-5-20250929-v1:0'],
  ])("through /v1 on %s: the provider's own count, free", async (_where, alias, route, upstreamModel) => {
    for (const fake of [bed.anthropic, bed.vertex, bed.bedrock]) fake.behave({ usage });
    const anthropic = new Anthropic({ baseURL: proxy.url, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await anthropic.messages.countTokens({ model: alias, ...request }).withResponse();
    expect(data).toEqual({ input_tokens: 1780 });
    const seen = { 'gamma-direct': bed.anthropic, gamma: bed.vertex, 'gamma-cloudb': bed.bedrock }[route]!.requests.at(-1)!;
    if (route === 'gamma-direct') expect(seen.path).toBe('/v1/messages/count_tokens');
    if (route === 'gamma') expect(seen.path).toBe(`/v1/projects/${PROJECT}/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict`);
    if (route === 'gamma-cloudb') {
      expect(seen.path).toBe('/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens');
      expect(seen.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    }
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), { name: `count_tokens ${upstreamModel}`, route, provider: 'anthropic', model: upstreamModel });
    expect(await aliceSpent()).toBe(0);
  });

  it('natively through /proxy/gamma-direct: forwarded, recorded as a token count, free', async () => {
    bed.anthropic.behave({ usage });
    const anthropic = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await anthropic.messages.countTokens({ model: 'claude-haiku-4-5', ...request }).withResponse();
    expect(data).toEqual({ input_tokens: 1780 });
    expect(bed.anthropic.requests.at(-1)!.json).toEqual({ model: 'claude-haiku-4-5', ...request });
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), {
      name: 'count_tokens claude-haiku-4-5',
      route: 'gamma-direct',
      provider: 'anthropic',
      model: 'claude-haiku-4-5',
    });
    expect(await aliceSpent()).toBe(0);
  });
});

describe("the AWS SDK's CountTokensCommand through /proxy/gamma-cloudb", () => {
  it('is signed with the proxy identity, forwarded as the SDK sent it, and free', async () => {
    bed.bedrock.behave({ usage: { input: 900, output: 0, cacheRead: 100 } });
    const client = new BedrockRuntimeClient({
      region: AWS.region,
      endpoint: `${proxy.url}/proxy/gamma-cloudb`,
      credentials: { accessKeyId: 'AKIDCALLER', secretAccessKey: 'caller-secret' },
      maxAttempts: 1,
    });
    client.middlewareStack.add(
      (next) => async (args) => {
        Object.assign((args.request as { headers: Record<string, string> }).headers, { ...ALICE, 'x-request-id': 'bedrock-count-tokens-1' });
        return next(args);
      },
      { step: 'build', name: 'tollgateUser' },
    );
    const invokeBody = { anthropic_version: 'bedrock-2023-05-31', max_tokens: 10, messages: [{ role: 'user', content: 'Count me.' }] };
    const modelId = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
    const out = await client.send(new CountTokensCommand({ modelId, input: { invokeModel: { body: new TextEncoder().encode(JSON.stringify(invokeBody)) } } }));
    client.destroy();
    // Bedrock counts as Anthropic does: input and cache reads, 900 + 100.
    expect(out.inputTokens).toBe(1000);
    const seen = bed.bedrock.requests.at(-1)!;
    expect(seen.path).toBe('/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens');
    expect(seen.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\//);
    const sent = (seen.json as { input: { invokeModel: { body: string } } }).input.invokeModel.body;
    expect(JSON.parse(Buffer.from(sent, 'base64').toString('utf8'))).toEqual(invokeBody);
    const span = await findSpan(proxy.url, { requestId: 'bedrock-count-tokens-1' });
    expectFreeSpan(span, { name: `count_tokens ${modelId}`, route: 'gamma-cloudb', provider: 'anthropic', model: modelId });
    expect(await aliceSpent()).toBe(0);
  });
});

describe("the openai SDK's responses.inputTokens.count", () => {
  const input = [{ role: 'user' as const, content: 'How many tokens is this?' }];

  it('passes through to OpenAI', async () => {
    bed.openai.behave({ usage: { input: 42, output: 0 } });
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await openai.responses.inputTokens.count({ model: 'gpt-4o-mini', instructions: 'Be terse.', input }).withResponse();
    expect(data).toEqual({ object: 'response.input_tokens', input_tokens: 42 });
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.path).toBe('/v1/responses/input_tokens');
    expect(seen.json).toEqual({ model: 'gpt-4o-mini', instructions: 'Be terse.', input });
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), { name: 'count_tokens gpt-4o-mini', route: 'beta', provider: 'openai', model: 'gpt-4o-mini' });
  });

  it("counts for Claude with Anthropic's count_tokens, the Responses input translated to Messages", async () => {
    bed.anthropic.behave({ usage: { input: 30, output: 0 } });
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const { data, response } = await openai.responses.inputTokens.count({ model: 'sonnet-direct', instructions: 'Be terse.', input }).withResponse();
    expect(data).toEqual({ object: 'response.input_tokens', input_tokens: 30 });
    const seen = bed.anthropic.requests.at(-1)!;
    expect(seen.path).toBe('/v1/messages/count_tokens');
    expect(seen.json).toEqual({
      model: SONNET_ON['gamma-direct'],
      system: [{ type: 'text', text: 'Be terse.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'How many tokens is this?' }] }],
    });
    expectFreeSpan(await spanOf(response.headers.get('x-proxy-span-id')), {
      name: `count_tokens ${SONNET_ON['gamma-direct']}`,
      route: 'gamma-direct',
      provider: 'anthropic',
      model: SONNET_ON['gamma-direct'],
    });
  });

  it("counts for Gemini with Vertex AI's countTokens", async () => {
    bed.vertex.behave({ usage: { input: 17, output: 0 } });
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: ALICE });
    const data = await openai.responses.inputTokens.count({ model: 'gemini-2.5-flash', instructions: 'Be terse.', input });
    expect(data).toEqual({ object: 'response.input_tokens', input_tokens: 17 });
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:countTokens`);
    expect(seen.json).toEqual({ contents: [{ role: 'user', parts: [{ text: 'How many tokens is this?' }] }], systemInstruction: { parts: [{ text: 'Be terse.' }] } });
  });
});

/** A Google client with a token of the caller's own, which the proxy replaces with its credential. */
function callerToken(): OAuth2Client {
  const client = new OAuth2Client();
  client.setCredentials({ access_token: 'caller-token', expiry_date: Date.now() + 3_600_000 });
  return client;
}

describe("the Google Gen AI SDK's models.embedContent through /proxy/alpha", () => {
  it("is sent as Vertex AI's :predict and costed from each prediction's token count", async () => {
    const ai = new GoogleGenAI({
      vertexai: true,
      project: PROJECT,
      location: 'us-central1',
      // The proxy drops the caller's token and attaches its own; the SDK only needs something to send.
      googleAuthOptions: { authClient: callerToken() as never },
      httpOptions: { baseUrl: `${proxy.url}/proxy/alpha` },
    });
    const answer = await ai.models.embedContent({
      model: 'gemini-embedding-001',
      contents: 'The quick brown fox jumps',
      config: { outputDimensionality: 256 },
    });
    const seen = bed.vertex.requests.at(-1)!;
    // The SDK's default API version on Vertex AI.
    expect(seen.path).toBe(`/v1beta1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-embedding-001:predict`);
    expect(seen.json).toEqual({ instances: [{ content: 'The quick brown fox jumps' }], parameters: { outputDimensionality: 256 } });
    // The metadata server's token (through the proxy's google-auth-library), never the caller's.
    expect(seen.headers.authorization).toMatch(/^Bearer /);
    expect(seen.headers.authorization).not.toBe('Bearer caller-token');
    expect(answer.embeddings?.[0]?.values).toHaveLength(256);
    // The fake counts a token a word: 5 tokens at gemini-embedding-001's 0.15 per million = 0.00000075 USD.
    const span = await spanOf(answer.sdkHttpResponse?.headers?.['x-proxy-span-id'] ?? null);
    expect(span).toMatchObject({ route: 'alpha', provider: 'google', model: 'gemini-embedding-001', input_tokens: 5, output_tokens: 0, priced: true, status: 'ok' });
    expect(span.cost_usd).toBeCloseTo(0.00000075, 12);
  });

  it('is sent as :embedContent for a newer Gemini embedding model and costed from its usageMetadata', async () => {
    const ai = new GoogleGenAI({
      vertexai: true,
      project: PROJECT,
      location: 'us-central1',
      googleAuthOptions: { authClient: callerToken() as never },
      httpOptions: { baseUrl: `${proxy.url}/proxy/alpha` },
    });
    const answer = await ai.models.embedContent({ model: 'gemini-embedding-2', contents: 'Seven words go into this one embedding.', config: { outputDimensionality: 128 } });
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`/v1beta1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-embedding-2:embedContent`);
    expect(seen.json).toMatchObject({ content: { parts: [{ text: 'Seven words go into this one embedding.' }] }, embedContentConfig: { outputDimensionality: 128 } });
    expect(answer.embeddings?.[0]?.values).toHaveLength(128);
    // 7 tokens (a word each) at the configured 0.2 per million: 7 × 0.2 / 1e6 = 0.0000014 USD.
    const span = await spanOf(answer.sdkHttpResponse?.headers?.['x-proxy-span-id'] ?? null);
    expect(span).toMatchObject({ route: 'alpha', provider: 'google', model: 'gemini-embedding-2', input_tokens: 7, output_tokens: 0, priced: true, status: 'ok' });
    expect(span.cost_usd).toBeCloseTo(0.0000014, 12);
  });
});
