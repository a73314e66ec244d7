// A user's path through the local proxy: start `tollgate proxy` with a config file, send a call through
// each of the seven routes (streaming and not), read each span back from /_local/api/traces, change a
// price through the config API and see the next call costed at it.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { ANTHROPIC_KEY, OPENAI_KEY, PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';

// List prices, USD per million tokens (shared/docs/providers.md), for the expected costs below.
const FLASH = { input: 0.3, cached: 0.03, output: 2.5 };
const GPT4O_MINI = { input: 0.15, cached: 0.075, output: 0.6 };
const SONNET4 = { input: 3, cacheRead: 0.3, cacheWrite5m: 3.75, output: 15 };

const usage = { input: 1000, output: 200, cacheRead: 400, cacheWrite: 100, reasoning: 50 };
const M = 1_000_000;

// Gemini: prompt includes cache; thoughts are billed as output.
const geminiCost = (u: typeof usage) => (u.input * FLASH.input + u.cacheRead * FLASH.cached + (u.output + u.reasoning) * FLASH.output) / M;
// OpenAI: prompt − cached at the input price, cached at the cached price, completion at the output price.
const openaiCost = (u: { input: number; cacheRead: number; output: number }) => (u.input * GPT4O_MINI.input + u.cacheRead * GPT4O_MINI.cached + u.output * GPT4O_MINI.output) / M;
// Anthropic: input (no cache), cache writes, cache reads, output (thinking included) each at their own rate.
const anthropicCost = (u: typeof usage) =>
  (u.input * SONNET4.input + u.cacheWrite * SONNET4.cacheWrite5m + u.cacheRead * SONNET4.cacheRead + (u.output + u.reasoning) * SONNET4.output) / M;

let bed: UpstreamBed;
let proxy: ProxyProcess;

async function spanFor(res: Response): Promise<SpanJson> {
  const spanId = res.headers.get('x-proxy-span-id');
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId });
}

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${proxy.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

const claudeBody = { max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] };
const chatBody = { messages: [{ role: 'user', content: 'Say hello.' }] };
const geminiBody = { contents: [{ role: 'user', parts: [{ text: 'Say hello.' }] }] };
const vertexModels = `/v1/projects/${PROJECT}/locations`;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => {
  bed.reset();
  for (const fake of [bed.vertex, bed.openai, bed.anthropic, bed.bedrock]) fake.behave({ usage });
});

describe('the seven routes, non-streaming', () => {
  it('alpha: Gemini generateContent on Vertex with an ADC token from the metadata server', async () => {
    const res = await post(`/proxy/alpha${vertexModels}/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`, geminiBody, {
      authorization: 'Bearer caller-secret-must-not-leak',
      'x-tollgate-user': 'alice',
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { usageMetadata: { promptTokenCount: number } };
    expect(json.usageMetadata.promptTokenCount).toBe(usage.input + usage.cacheRead);
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`${vertexModels}/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`);
    expect(seen.headers.authorization).toMatch(/^Bearer metadata-token-\d+$/);
    expect(seen.json).toEqual(geminiBody);
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'google', route: 'alpha', model: 'gemini-2.5-flash', user_id: 'alice', status: 'ok', status_code: 200 });
    expect(span.input_tokens).toBe(usage.input + usage.cacheRead);
    expect(span.output_tokens).toBe(usage.output + usage.reasoning);
    expect(span.cached_tokens).toBe(usage.cacheRead);
    expect(span.cost_usd).toBeCloseTo(geminiCost(usage), 12);
  });

  it('alpha-compat: the Vertex OpenAI-compatible surface', async () => {
    const res = await post(`/proxy/alpha-compat${vertexModels}/us-central1/endpoints/openapi/chat/completions`, { model: 'google/gemini-2.5-flash', ...chatBody });
    expect(res.status).toBe(200);
    expect(bed.vertex.requests.at(-1)!.headers.authorization).toMatch(/^Bearer metadata-token-/);
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'google', route: 'alpha-compat', model: 'google/gemini-2.5-flash', status: 'ok', priced: true });
    expect(span.input_tokens).toBe(usage.input + usage.cacheRead);
    expect(span.cached_tokens).toBe(usage.cacheRead);
    expect(span.cost_usd).toBeGreaterThan(0);
  });

  it("beta: OpenAI with the API key from the environment, never the caller's", async () => {
    bed.openai.behave({ usage: { input: 1000, output: 200, cacheRead: 400 } });
    const res = await post(
      '/proxy/beta/v1/chat/completions',
      { model: 'gpt-4o-mini', ...chatBody },
      {
        authorization: 'Bearer sk-caller-own-key',
        'x-api-key': 'also-not-forwarded',
      },
    );
    expect(res.status).toBe(200);
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(seen.headers['x-api-key']).toBeUndefined();
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'openai', route: 'beta', model: 'gpt-4o-mini', input_tokens: 1400, output_tokens: 200, cached_tokens: 400 });
    expect(span.cost_usd).toBeCloseTo(openaiCost({ input: 1000, cacheRead: 400, output: 200 }), 12);
  });

  it('gamma: the Anthropic Messages API reaches Claude on Vertex as rawPredict with the model in the URL', async () => {
    const res = await post('/proxy/gamma/v1/messages', { model: 'claude-sonnet-4@20250514', ...claudeBody }, { 'anthropic-beta': 'prompt-caching-2024-07-31' });
    expect(res.status).toBe(200);
    const seen = bed.vertex.requests.at(-1)!;
    expect(seen.path).toBe(`${vertexModels}/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`);
    expect(seen.json).toEqual({ ...claudeBody, anthropic_version: 'vertex-2023-10-16' });
    expect(seen.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'anthropic', route: 'gamma', model: 'claude-sonnet-4@20250514', status: 'ok' });
    expect(span.input_tokens).toBe(usage.input + usage.cacheRead + usage.cacheWrite);
    expect(span.cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });

  it('gamma: count_tokens maps to count-tokens:rawPredict', async () => {
    const res = await post('/proxy/gamma/v1/messages/count_tokens', { model: 'claude-sonnet-4@20250514', messages: claudeBody.messages });
    expect(res.status).toBe(200);
    expect(bed.vertex.requests.at(-1)!.path).toBe(`${vertexModels}/us-east5/publishers/anthropic/models/count-tokens:rawPredict`);
  });

  it('gamma-cloud: native rawPredict paths pass through', async () => {
    const path = `${vertexModels}/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`;
    const res = await post(`/proxy/gamma-cloud${path}`, { anthropic_version: 'vertex-2023-10-16', ...claudeBody });
    expect(res.status).toBe(200);
    expect(bed.vertex.requests.at(-1)!.path).toBe(path);
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'anthropic', route: 'gamma-cloud', model: 'claude-sonnet-4@20250514' });
    expect(span.cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });

  it('gamma-direct: the Anthropic API with x-api-key and anthropic-version', async () => {
    const res = await post('/proxy/gamma-direct/v1/messages', { model: 'claude-sonnet-4-20250514', ...claudeBody }, { 'x-api-key': 'caller-key' });
    expect(res.status).toBe(200);
    const seen = bed.anthropic.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'anthropic', route: 'gamma-direct', model: 'claude-sonnet-4-20250514' });
    expect(span.cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });

  it('gamma-cloudb: Bedrock InvokeModel, SigV4-signed, with a model id containing ":"', async () => {
    const body = { anthropic_version: 'bedrock-2023-05-31', ...claudeBody };
    const res = await post('/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke', body);
    expect(res.status, await res.clone().text()).toBe(200);
    const seen = bed.bedrock.requests.at(-1)!;
    expect(seen.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke');
    expect(String(seen.headers.authorization)).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDPROXYTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    const span = await spanFor(res);
    expect(span).toMatchObject({ provider: 'anthropic', route: 'gamma-cloudb', model: 'anthropic.claude-sonnet-4-20250514-v1:0', status: 'ok' });
    expect(span.cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });
});

async function readAll(res: Response): Promise<string> {
  return new TextDecoder().decode(await res.arrayBuffer());
}

describe('streaming', () => {
  it('beta: a stream without include_usage is still costed, and the caller gets no usage chunk', async () => {
    bed.openai.behave({ usage: { input: 1000, output: 200, cacheRead: 400 } });
    const res = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', stream: true, ...chatBody });
    expect(res.status).toBe(200);
    const text = await readAll(res);
    expect(text).toContain('data: [DONE]');
    expect(text).not.toContain('"usage":{');
    expect((bed.openai.requests.at(-1)!.json as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
    const span = await spanFor(res);
    expect(span).toMatchObject({ input_tokens: 1400, output_tokens: 200, status: 'ok' });
    expect(span.cost_usd).toBeCloseTo(openaiCost({ input: 1000, cacheRead: 400, output: 200 }), 12);
  });

  it('beta: a stream that asked for usage keeps its usage chunk', async () => {
    bed.openai.behave({ usage: { input: 10, output: 5 } });
    const res = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, ...chatBody });
    const text = await readAll(res);
    expect(text).toContain('"prompt_tokens":10');
    expect((await spanFor(res)).total_tokens).toBe(15);
  });

  it('alpha: streamGenerateContent as SSE and as a progressively written JSON array', async () => {
    for (const query of ['?alt=sse', '']) {
      const res = await post(`/proxy/alpha${vertexModels}/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent${query}`, geminiBody);
      expect(res.status).toBe(200);
      await readAll(res);
      expect(bed.vertex.requests.at(-1)!.query).toBe(query.slice(1));
      const span = await spanFor(res);
      expect(span.output_tokens).toBe(usage.output + usage.reasoning);
      expect(span.cost_usd).toBeCloseTo(geminiCost(usage), 12);
    }
  });

  it('gamma-direct and gamma: Anthropic SSE (message_start merged with message_delta)', async () => {
    const direct = await post('/proxy/gamma-direct/v1/messages', { model: 'claude-sonnet-4-20250514', stream: true, ...claudeBody });
    expect(await readAll(direct)).toContain('event: message_stop');
    expect((await spanFor(direct)).cost_usd).toBeCloseTo(anthropicCost(usage), 12);

    const vertex = await post('/proxy/gamma/v1/messages', { model: 'claude-sonnet-4@20250514', stream: true, ...claudeBody });
    expect(await readAll(vertex)).toContain('event: message_stop');
    expect(bed.vertex.requests.at(-1)!.path).toMatch(/claude-sonnet-4@20250514:streamRawPredict$/);
    expect((await spanFor(vertex)).cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });

  it('gamma-cloudb: the Bedrock binary event stream, delivered in split and coalesced reads', async () => {
    bed.bedrock.behave({ usage, splitFrames: true });
    const res = await post('/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke-with-response-stream', {
      anthropic_version: 'bedrock-2023-05-31',
      ...claudeBody,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/vnd.amazon.eventstream');
    await readAll(res);
    const span = await spanFor(res);
    expect(span.status).toBe('ok');
    expect(span.cost_usd).toBeCloseTo(anthropicCost(usage), 12);
  });
});

describe('trace context', () => {
  it("joins the caller's trace and sends the proxy's span as the upstream's parent", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await post(
      '/proxy/beta/v1/chat/completions',
      { model: 'gpt-4o-mini', ...chatBody },
      {
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
        tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
      },
    );
    expect(res.headers.get('x-proxy-trace-id')).toBe(traceId);
    const spanId = res.headers.get('x-proxy-span-id');
    const seen = bed.openai.requests.at(-1)!;
    expect(seen.headers.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    expect(seen.headers.tracestate).toBe('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
    const span = await spanFor(res);
    expect(span.parent_span_id).toBe('00f067aa0ba902b7');
  });

  it('starts a new trace for an invalid traceparent and drops tracestate', async () => {
    const res = await post(
      '/proxy/beta/v1/chat/completions',
      { model: 'gpt-4o-mini', ...chatBody },
      {
        traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
        tracestate: 'congo=t61rcWkgMzE',
      },
    );
    const traceId = res.headers.get('x-proxy-trace-id');
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceId).not.toBe('00000000000000000000000000000000');
    expect(bed.openai.requests.at(-1)!.headers.tracestate).toBeUndefined();
  });
});

describe('prices through the config API', () => {
  it('a price change is effective for the next call', async () => {
    bed.openai.behave({ usage: { input: 1000, output: 200, cacheRead: 400 } });
    const before = await spanFor(await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody }));
    const change = await post('/_local/api/config', {
      pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 1, output_per_million: 2, cached_input_per_million: 0.5 }] },
    });
    expect(change.status).toBe(200);
    const after = await spanFor(await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody }));
    expect(before.cost_usd).toBeCloseTo(openaiCost({ input: 1000, cacheRead: 400, output: 200 }), 12);
    expect(after.cost_usd).toBeCloseTo((1000 * 1 + 400 * 0.5 + 200 * 2) / M, 12);
  });

  it('a bad entry is refused with a message naming the field, and nothing changes', async () => {
    const before = await (await fetch(`${proxy.url}/_local/api/config`)).json();
    const res = await post('/_local/api/config', {
      pricing: {
        models: [
          { provider: 'openai', model: 'gpt-4o', input_per_million: 9, output_per_million: 9 },
          { provider: 'openai', model: 'gpt-4.1', input_per_million: -1, output_per_million: 2 },
        ],
      },
    });
    expect(res.status).toBe(400);
    const error = (await res.json()) as { error: { message: string } };
    expect(error.error.message).toContain('pricing.models[1].input_per_million');
    expect(await (await fetch(`${proxy.url}/_local/api/config`)).json()).toEqual(before);
  });

  it('malformed JSON is a 400', async () => {
    const res = await fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"pricing": ' });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.message).toMatch(/JSON/i);
  });

  it('a model without a price costs 0 and the span says so', async () => {
    const res = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-unreleased-9', ...chatBody });
    const span = await spanFor(res);
    expect(span).toMatchObject({ cost_usd: 0, priced: false });
    // The log line comes through a pipe and may land after the span is readable.
    await waitFor('the log line saying the model has no price', () => proxy.logs.some((l) => l.span_id === span.span_id && String(l.pricing).includes('no price')));
  });
});

describe('/_local/api/traces', () => {
  it('returns newest first, honours limit, and refuses a bad limit naming it', async () => {
    const one = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody });
    const two = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody });
    const traces = (await (await fetch(`${proxy.url}/_local/api/traces?limit=2`)).json()) as { spans: SpanJson[]; count: number };
    expect(traces.count).toBe(2);
    expect(traces.spans.map((s) => s.span_id)).toEqual([two.headers.get('x-proxy-span-id'), one.headers.get('x-proxy-span-id')]);
    for (const bad of ['0', '201', 'abc', '1.5']) {
      const res = await fetch(`${proxy.url}/_local/api/traces?limit=${bad}`);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain('limit');
    }
  });

  it('logs one JSON line per call with provider, model, tokens, cost, latency, user and request id', async () => {
    const res = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody }, { 'x-tollgate-user': 'bob', 'x-request-id': 'req-42' });
    const spanId = res.headers.get('x-proxy-span-id');
    await spanFor(res);
    expect(res.headers.get('x-proxy-request-id')).toBe('req-42');
    expect(res.headers.get('x-request-id')).toMatch(/^req_/); // the provider's own id is left alone
    const generated = await post('/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody });
    const generatedId = generated.headers.get('x-proxy-request-id');
    expect(generatedId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await spanFor(generated)).toMatchObject({ request_id: generatedId });
    // Answers the proxy writes itself carry the id too: a refusal before routing, a failure once routed.
    const unknown = await post('/proxy/no-such-route/v1/chat/completions', { model: 'gpt-4o-mini', ...chatBody }, { 'x-request-id': 'req-43' });
    expect([unknown.status, unknown.headers.get('x-proxy-request-id')]).toEqual([404, 'req-43']);
    const badJson = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-44' },
      body: '{',
    });
    expect([badJson.status, badJson.headers.get('x-proxy-request-id')]).toEqual([400, 'req-44']);
    const line = await waitFor("the call's log line", () => proxy.logs.find((l) => l.span_id === spanId));
    expect(line).toMatchObject({ msg: 'llm call', provider: 'openai', model: 'gpt-4o-mini', user_id: 'bob', request_id: 'req-42' });
    expect(typeof line.cost_usd).toBe('number');
    expect(typeof line.latency_ms).toBe('number');
  });
});
