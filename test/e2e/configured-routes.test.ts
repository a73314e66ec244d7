// Providers added by config alone (docs/routes.md, "Adding a route in the config"): an OpenAI-compatible one
// and an Anthropic-compatible one in the config file, two more through the config API, and a local
// OpenAI-compatible server that takes no credential. Each is called with the official SDKs, natively on
// /proxy/<name> and through /v1; each fake checks the credential header it receives; each call is one priced span.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import { refusedConfigFile, startProxyProcess, type ProxyProcess } from './proxy-process.ts';

const MISTRAL_KEY = 'sk-mistral-from-file';
const KIMI_KEY = 'sk-kimi-from-env';
const AZURE_KEY = 'azure-key-from-env';
const CLAUDE_GW_KEY = 'sk-claude-gateway-key';
const usage = { input: 1000, output: 200 };
const M = 1_000_000;

let mistral: FakeUpstream;
let kimi: FakeUpstream;
let azure: FakeUpstream;
let claudeGateway: FakeUpstream;
let llama: FakeUpstream;
let proxy: ProxyProcess;

function configYaml(keyFile: string): string {
  return `
routes:
  - name: mistral
    format: openai-chat
    baseUrl: ${mistral.url}
    credential: { kind: api-key, file: ${keyFile} }
    models: [mistral-large-latest]
  - name: kimi
    format: anthropic
    baseUrl: ${kimi.url}
    provider: moonshot
    credential: { kind: api-key, header: x-api-key, env: KIMI_KEY }
    headers: { anthropic-version: '2023-06-01' }
  - name: llama
    format: openai-chat
    baseUrl: ${llama.url}
    credential: { kind: none }
  # Declared here, pointed at their upstreams through the config API (which may only use declared credentials).
  - { name: azure, format: openai-chat, baseUrl: "http://127.0.0.1:9", credential: { kind: api-key, header: api-key } }
  - { name: claude-gw, format: anthropic, baseUrl: "http://127.0.0.1:9", credential: { kind: api-key, header: x-api-key } }
pricing:
  models:
    - { provider: mistral, model: mistral-large-latest, input_per_million: 2, output_per_million: 6 }
    - { provider: moonshot, model: kimi-k2, input_per_million: 0.6, output_per_million: 2.5 }
`;
}

async function postConfig(body: unknown): Promise<Response> {
  return fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

beforeAll(async () => {
  [mistral, kimi, azure, claudeGateway, llama] = await Promise.all([
    startFakeUpstream('openai', { expectApiKey: MISTRAL_KEY }),
    startFakeUpstream('anthropic', { expectApiKey: KIMI_KEY }),
    startFakeUpstream('openai', { expectApiKey: AZURE_KEY, apiKeyHeader: 'api-key' }),
    startFakeUpstream('anthropic', { expectApiKey: CLAUDE_GW_KEY }),
    startFakeUpstream('openai', { anonymous: true }),
  ]);
  for (const fake of [mistral, kimi, azure, claudeGateway, llama]) fake.behave({ usage });
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-routes-'));
  const keyFile = join(dir, 'mistral-key');
  writeFileSync(keyFile, `${MISTRAL_KEY}\n`);
  proxy = await startProxyProcess({ configYaml: configYaml(keyFile), env: { KIMI_KEY, AZURE_API_KEY: AZURE_KEY, CLAUDE_GW_API_KEY: CLAUDE_GW_KEY } });
});

afterAll(async () => {
  await proxy?.stop();
  await Promise.all([mistral, kimi, azure, claudeGateway, llama].map((fake) => fake?.close()));
});

function openai(path: string): OpenAI {
  return new OpenAI({ baseURL: `${proxy.url}${path}`, apiKey: 'caller-placeholder-key', maxRetries: 0 });
}

function anthropic(path: string): Anthropic {
  return new Anthropic({ baseURL: `${proxy.url}${path}`, apiKey: 'caller-placeholder-key', maxRetries: 0 });
}

describe('routes from the config file', () => {
  it('an OpenAI-compatible provider: its key from a file as a bearer token, priced under its provider', async () => {
    const { data, response } = await openai('/proxy/mistral/v1')
      .chat.completions.create({ model: 'mistral-large-latest', messages: [{ role: 'user', content: 'Say hello.' }] })
      .withResponse();
    expect(data.usage?.prompt_tokens).toBe(usage.input);
    const seen = mistral.requests.at(-1)!;
    expect(seen.path).toBe('/v1/chat/completions');
    expect(seen.headers.authorization).toBe(`Bearer ${MISTRAL_KEY}`);
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id')! });
    expect(span).toMatchObject({ route: 'mistral', provider: 'mistral', model: 'mistral-large-latest', status: 'ok', input_tokens: 1000, output_tokens: 200 });
    // 1000 × 2 + 200 × 6 USD per million
    expect(span.cost_usd).toBeCloseTo(3200 / M, 12);
  });

  it('streams, with usage asked for on the caller’s behalf and metered', async () => {
    const stream = await openai('/proxy/mistral/v1').chat.completions.create({
      model: 'mistral-large-latest',
      stream: true,
      messages: [{ role: 'user', content: 'Say hello.' }],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect((mistral.requests.at(-1)!.json as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
  });

  it('an Anthropic-compatible provider: x-api-key from an environment variable, its anthropic-version header', async () => {
    const { data, response } = await anthropic('/proxy/kimi')
      .messages.create({ model: 'kimi-k2', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] })
      .withResponse();
    expect(data.usage.input_tokens).toBe(usage.input);
    const seen = kimi.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(KIMI_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id')! });
    expect(span).toMatchObject({ route: 'kimi', provider: 'moonshot', model: 'kimi-k2', status: 'ok' });
    // 1000 × 0.6 + 200 × 2.5 USD per million
    expect(span.cost_usd).toBeCloseTo(1100 / M, 12);
  });

  it('a local OpenAI-compatible server with no credential: the caller’s key never reaches it, the call costs 0, unpriced', async () => {
    const { response } = await openai('/proxy/llama/v1')
      .chat.completions.create({ model: 'llama-3.1-8b', messages: [{ role: 'user', content: 'Say hello.' }] })
      .withResponse();
    expect(response.status).toBe(200);
    expect(llama.requests.at(-1)!.headers.authorization).toBeUndefined();
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id')! });
    expect(span).toMatchObject({ route: 'llama', provider: 'llama', model: 'llama-3.1-8b', status: 'ok', input_tokens: 1000, cost_usd: 0 });
  });

  it('the config API (and so the UI) lists every route with its format, provider, upstream and credential kind, never a key', async () => {
    const answer = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { routes: Record<string, unknown>[] };
    expect(answer.routes.find((route) => route.name === 'mistral')).toEqual({
      name: 'mistral',
      format: 'openai-chat',
      provider: 'mistral',
      baseUrl: mistral.url,
      credential: 'api-key',
      configured: true,
    });
    expect(answer.routes.find((route) => route.name === 'beta')).toMatchObject({ format: 'openai', provider: 'openai', credential: 'api-key', configured: false });
    expect(answer.routes.map((route) => route.name)).toEqual([
      'alpha',
      'alpha-compat',
      'beta',
      'gamma',
      'gamma-cloud',
      'gamma-direct',
      'gamma-cloudb',
      'local',
      'mistral',
      'kimi',
      'llama',
      'azure',
      'claude-gw',
    ]);
    expect(JSON.stringify(answer)).not.toContain(MISTRAL_KEY);
  });

  it('/v1 reaches them by the model list and by <route>/<model>, and lists the listed ones', async () => {
    const client = openai('/v1');
    const models = (await client.models.list()).data.map((model) => model.id);
    expect(models).toContain('mistral-large-latest');
    const listed = await client.chat.completions.create({ model: 'mistral-large-latest', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(mistral.requests.at(-1)!.path).toBe('/v1/chat/completions');
    expect(await findSpan(proxy.url, { spanId: listed.response.headers.get('x-proxy-span-id')! })).toMatchObject({ route: 'mistral', provider: 'mistral' });
    await client.chat.completions.create({ model: 'llama/llama-3.1-8b', messages: [{ role: 'user', content: 'hi' }] });
    expect((llama.requests.at(-1)!.json as { model: string }).model).toBe('llama-3.1-8b');
    // An Anthropic-format route answers /v1/chat/completions through the chat translation, priced by its provider's entry.
    const translated = await client.chat.completions.create({ model: 'kimi/kimi-k2', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(translated.data.choices[0]?.message.content).toBeTruthy();
    expect(kimi.requests.at(-1)!.path).toBe('/v1/messages');
    const span = await findSpan(proxy.url, { spanId: translated.response.headers.get('x-proxy-span-id')! });
    expect(span).toMatchObject({ route: 'kimi', provider: 'moonshot', model: 'kimi-k2' });
    expect(span.cost_usd).toBeCloseTo(1100 / M, 12);
  });

  it('/v1/messages and /v1/responses ride on the chat translation to an OpenAI-compatible route', async () => {
    const message = await anthropic('').messages.create({ model: 'mistral/mistral-large-latest', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.usage.input_tokens).toBe(usage.input);
    const response = await openai('/v1').responses.create({ model: 'mistral/mistral-large-latest', input: 'hi' });
    expect(response.usage?.input_tokens).toBe(usage.input);
    expect(mistral.requests.at(-1)!.path).toBe('/v1/chat/completions');
  });
});

describe('routes added through the config API', () => {
  it('re-points a route of the config file, keeping its declared key (AZURE_API_KEY in an api-key header)', async () => {
    const res = await postConfig({
      routes: [{ name: 'azure', format: 'openai-chat', baseUrl: `${azure.url}`, credential: { use: 'azure' }, models: ['gpt-4o-azure'] }],
      pricing: { models: [{ provider: 'azure', model: 'gpt-4o-azure', input_per_million: 2.5, output_per_million: 10 }] },
    });
    expect(res.status).toBe(200);
    const { response } = await openai('/v1')
      .chat.completions.create({ model: 'gpt-4o-azure', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const seen = azure.requests.at(-1)!;
    expect(seen.headers['api-key']).toBe(AZURE_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    const span = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id')! });
    expect(span).toMatchObject({ route: 'azure', provider: 'azure', model: 'gpt-4o-azure' });
    // 1000 × 2.5 + 200 × 10 USD per million
    expect(span.cost_usd).toBeCloseTo(4500 / M, 12);
  });

  it('adds an Anthropic-compatible route with a declared credential, called natively with the Anthropic SDK', async () => {
    const res = await postConfig({
      routes: [
        {
          name: 'claude',
          format: 'anthropic',
          baseUrl: claudeGateway.url,
          credential: { use: 'claude-gw' },
          headers: { 'anthropic-version': '2023-06-01' },
        },
      ],
    });
    expect(res.status).toBe(200);
    const data = await anthropic('/proxy/claude').messages.create({ model: 'claude-sonnet-4-20250514', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    expect(data.usage.output_tokens).toBe(usage.output);
    expect(claudeGateway.requests.at(-1)!.headers['x-api-key']).toBe(CLAUDE_GW_KEY);
  });

  it('refuses, naming the field and changing nothing: a credential source, a built-in name, an unknown format or kind, a non-http base URL', async () => {
    const before = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { revision: number };
    const route = { name: 'x', format: 'openai-chat', baseUrl: 'http://127.0.0.1:9', credential: { kind: 'none' } };
    const cases: [unknown, string][] = [
      [{ routes: [{ ...route, credential: { kind: 'api-key', env: 'AWS_SECRET_ACCESS_KEY' } }] }, 'routes[0].credential.kind cannot be set: a route added through the config API'],
      [{ routes: [{ ...route, credential: { use: 'azure', file: '/etc/shadow' } }] }, 'routes[0].credential.file cannot be set: a route added through the config API'],
      [{ routes: [{ ...route, name: 'beta' }] }, 'routes[0].name "beta" is a built-in route'],
      [{ routes: [{ ...route, format: 'cohere' }] }, 'routes[0].format must be one of'],
      [{ routes: [{ ...route, credential: { kind: 'oauth' } }] }, 'routes[0].credential.kind cannot be set: a route added through the config API'],
      [{ routes: [{ ...route, baseUrl: 'ftp://files.example' }] }, 'routes[0].baseUrl must be an http(s) URL'],
      [{ routes: [route, route] }, 'routes[1].name repeats route x'],
      [{ routes: [{ ...route, headers: { authorization: 'Bearer sk-x' } }] }, 'routes[0].headers.authorization is a header the proxy sets itself'],
    ];
    for (const [body, message] of cases) {
      const res = await postConfig(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(message);
    }
    const after = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { revision: number };
    expect(after.revision).toBe(before.revision);
  });
});

describe('a bad route in the config file', () => {
  it('stops the proxy at start with exit code 2, naming the field', async () => {
    const { code, stderr } = await refusedConfigFile('routes:\n  - { name: groq, format: openai-chat, baseUrl: https://api.groq.com/openai, credential: { kind: bearer } }\n');
    expect(code).toBe(2);
    expect(stderr).toContain('routes[0].credential.kind must be one of api-key, google-adc, aws-sigv4, none (got "bearer")');
  });
});
